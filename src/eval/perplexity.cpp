// Strided-window perplexity (perplexity.h): the window plan, batches of windows through the model
// with the unscored targets masked (−1), and the default context of a model directory.
#include "eval/perplexity.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/assert.h"
#include "io/model_extras.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"

namespace zaya {

std::vector<EvalWindow> plan_windows(int64_t tokens, int64_t context, int64_t stride) {
  if (tokens < 2) fail("{} token(s): at least 2 are needed to score one", tokens);
  if (context < 1) fail("context {} must be at least 1", context);
  if (stride < 1 || stride > context)
    fail("stride {} must be in [1, context {}] (a larger stride would skip tokens)", stride,
         context);
  const int64_t targets = tokens - 1;  // tokens 1 … n−1 are predicted
  if (targets <= context) return {{0, targets, 0}};
  std::vector<EvalWindow> out;
  int64_t scored_to = 0;  // tokens 1 … scored_to are scored
  for (int64_t k = 0; scored_to < targets; ++k) {
    const int64_t begin = std::min(k * stride, targets - context);
    // Input i predicts token begin + i + 1: the new ones start at i = scored_to − begin.
    out.push_back({begin, context, scored_to - begin});
    scored_to = begin + context;
  }
  return out;
}

PerplexityResult strided_loss(const Model& model, int64_t tokens, const ReadTokens& read,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress) {
  ZAYA_ASSERT(rows >= 1, "strided_loss: rows {}", rows);
  const std::vector<EvalWindow> plan = plan_windows(tokens, context, stride);
  const int64_t T = plan.front().length;  // every window has this length (perplexity.h)
  const int64_t W = int64_t(plan.size());
  PerplexityResult r;
  r.windows = W;
  std::unique_ptr<Activations> acts;
  std::vector<int32_t> ids, targets, window(size_t(T + 1));
  for (int64_t w0 = 0; w0 < W; w0 += rows) {
    const int64_t n = std::min(rows, W - w0);
    if (!acts || acts->B != n)
      acts = std::make_unique<Activations>(model.config(), n, T, model.device());
    ids.resize(size_t(n * T));
    targets.resize(size_t(n * T));
    int64_t scored = 0;
    for (int64_t j = 0; j < n; ++j) {
      const EvalWindow& win = plan[size_t(w0 + j)];
      ZAYA_ASSERT(win.length == T, "window {} has length {}, not {}", w0 + j, win.length, T);
      read(win.begin, T + 1, window.data());
      int32_t* in = ids.data() + j * T;
      int32_t* tg = targets.data() + j * T;
      std::copy(window.begin(), window.begin() + T, in);
      for (int64_t i = 0; i < T; ++i) tg[i] = i >= win.first_scored ? window[size_t(i + 1)] : -1;
      scored += T - win.first_scored;
    }
    // The mean over the scored positions, back to their sum.
    r.loss_sum += model_forward(model, *acts, ids.data(), targets.data()) * double(scored);
    r.tokens += scored;
    if (progress) progress(w0 + n, W);
  }
  ZAYA_ASSERT(r.tokens == tokens - 1, "scored {} of {} tokens", r.tokens, tokens - 1);
  return r;
}

PerplexityResult strided_loss(const Model& model, std::span<const int32_t> stream, int64_t context,
                              int64_t stride, int64_t rows, const EvalProgress& progress) {
  const ReadTokens read = [&](int64_t pos, int64_t n, int32_t* out) {
    ZAYA_ASSERT(pos >= 0 && pos + n <= int64_t(stream.size()), "read [{}, {}) of {}", pos, pos + n,
                stream.size());
    std::copy(stream.begin() + pos, stream.begin() + pos + n, out);
  };
  return strided_loss(model, int64_t(stream.size()), read, context, stride, rows, progress);
}

ContextChoice default_context(const std::string& model_dir, const ZayaConfig& config) {
  const int64_t positions = config.max_position_embeddings;
  ModelExtras x;
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) read_tokenizer_config(path, x);
  // (transformers' "no limit", 1e30, reads as 0: not a length.)
  if (x.model_max_length >= 1 && x.model_max_length <= positions)
    return {x.model_max_length, "model_max_length in " + x.tokenizer_config};
  if (x.model_max_length > positions)
    return {positions, fmt::format("model_max_length {} in {}, capped at the config's "
                                   "max_position_embeddings",
                                   x.model_max_length, x.tokenizer_config)};
  if (positions <= kDefaultContextCap) return {positions, "the config's max_position_embeddings"};
  return {kDefaultContextCap, fmt::format("the config's max_position_embeddings {}, capped at {}",
                                          positions, kDefaultContextCap)};
}

}  // namespace zaya
