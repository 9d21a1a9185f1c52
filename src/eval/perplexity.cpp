// Strided-window perplexity (perplexity.h): the window plan, batches of windows through a scorer
// with the unscored targets masked (−1) — the training model's forward or the inference
// decoder's — and the default context of a model directory.
#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "core/assert.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
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

BatchScorer model_scorer(const Model& model) {
  auto acts = std::make_shared<std::unique_ptr<Activations>>();
  return [&model, acts](const int32_t* ids, const int32_t* targets, int64_t rows, int64_t T) {
    if (!*acts || (*acts)->B != rows || (*acts)->T != T)
      *acts = std::make_unique<Activations>(model.config(), rows, T, model.device());
    int64_t scored = 0;
    for (int64_t i = 0; i < rows * T; ++i) scored += targets[i] >= 0;
    // The mean over the scored positions, back to their sum.
    return model_forward(model, **acts, ids, targets) * double(scored);
  };
}

BatchScorer infer_scorer(const InferModel& model) {
  // Logits of at most ~256 MiB at a time: a window of a 262k vocabulary is prefilled in chunks.
  const int64_t V = model.config().vocab_size;
  const int64_t chunk = std::max<int64_t>(1, (int64_t(256) << 20) / (V * int64_t(sizeof(float))));
  auto dec = std::make_shared<Decoder>(model);
  auto logits = std::make_shared<std::vector<float>>();
  return [&model, dec, logits, chunk, V](const int32_t* ids, const int32_t* targets, int64_t rows,
                                         int64_t T) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      SequenceCache cache(model.config(), T);
      for (int64_t t0 = 0; t0 < T; t0 += chunk) {
        const int64_t k = std::min(chunk, T - t0);
        logits->resize(size_t(k * V));
        const Tensor lt(logits->data(), {k, V});
        const std::span<const int32_t> tokens(ids + r * T + t0, size_t(k));
        const DecodeItem item{&cache, tokens};
        dec->forward(std::span<const DecodeItem>(&item, 1), lt, /*all_positions=*/true);
        for (int64_t i = 0; i < k; ++i) {
          const int32_t target = targets[r * T + t0 + i];
          if (target < 0) continue;
          ZAYA_ASSERT(target < V, "target {} outside the vocabulary of {}", target, V);
          const float* row = logits->data() + i * V;
          const float mx = *std::max_element(row, row + V);
          double z = 0;
          for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - double(mx));
          sum += std::log(z) + double(mx) - double(row[target]);
        }
      }
    }
    return sum;
  };
}

PerplexityResult strided_loss(const Model& model, int64_t tokens, const ReadTokens& read,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress) {
  return strided_loss(model_scorer(model), tokens, read, context, stride, rows, progress);
}

PerplexityResult strided_loss(const BatchScorer& score, int64_t tokens, const ReadTokens& read,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress) {
  ZAYA_ASSERT(rows >= 1, "strided_loss: rows {}", rows);
  const std::vector<EvalWindow> plan = plan_windows(tokens, context, stride);
  const int64_t T = plan.front().length;  // every window has this length (perplexity.h)
  const int64_t W = int64_t(plan.size());
  PerplexityResult r;
  r.windows = W;
  std::vector<int32_t> ids, targets, window(size_t(T + 1));
  for (int64_t w0 = 0; w0 < W; w0 += rows) {
    const int64_t n = std::min(rows, W - w0);
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
    r.loss_sum += score(ids.data(), targets.data(), n, T);
    r.tokens += scored;
    if (progress) progress(w0 + n, W);
  }
  ZAYA_ASSERT(r.tokens == tokens - 1, "scored {} of {} tokens", r.tokens, tokens - 1);
  return r;
}

PerplexityResult strided_loss(const Model& model, std::span<const int32_t> stream, int64_t context,
                              int64_t stride, int64_t rows, const EvalProgress& progress) {
  return strided_loss(model_scorer(model), stream, context, stride, rows, progress);
}

PerplexityResult strided_loss(const BatchScorer& score, std::span<const int32_t> stream,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress) {
  const ReadTokens read = [&](int64_t pos, int64_t n, int32_t* out) {
    ZAYA_ASSERT(pos >= 0 && pos + n <= int64_t(stream.size()), "read [{}, {}) of {}", pos, pos + n,
                stream.size());
    std::copy(stream.begin() + pos, stream.begin() + pos + n, out);
  };
  return strided_loss(score, int64_t(stream.size()), read, context, stride, rows, progress);
}

ContextChoice default_context(const std::string& model_dir, const ZayaConfig& config) {
  ModelExtras x;
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) read_tokenizer_config(path, x);
  return default_context(x, config);
}

ContextChoice default_context(const ModelExtras& x, const ZayaConfig& config) {
  const int64_t positions = config.max_position_embeddings;
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
