// The loss and perplexity of a model on a token stream longer than its context, scored in strided
// windows (`zaya eval --text` and `--dataset`, docs/cli.md).
//
// Convention (docs/cli.md#zaya-eval compares it with other tools): every token is scored once.
// Token j of the stream (j ≥ 1; token 0 has nothing before it) is predicted from the tokens
// before it inside one window of at most `context` tokens. Window k starts at k·stride and is
// `context` tokens long; it scores the tokens that no earlier window scored, so the first window
// scores its whole length and each later one its last `stride` tokens (the last window: those
// left), each seeing at least context − stride tokens of the text before it. The last window is
// moved back to end at the stream's last token, so every window is full length (the tokens it
// scores see more context, never less) and batches are uniform. A stream of n ≤ context + 1 tokens
// is one window of n − 1 inputs.
//
// A window's inputs are tokens [begin, begin + length) and its targets the next tokens; input
// position i predicts token begin + i + 1 and counts when i ≥ first_scored.
//
// The windows are scored by a BatchScorer: the training model's forward (model_scorer: F32, CPU or
// GPU, a model directory) or the inference decoder's (infer_scorer: an InferModel in its stored
// dtypes, e.g. a GGUF file), both through the one window loop of strided_loss.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/model_extras.h"
#include "io/zaya_config.h"

namespace zaya {

class Model;
class InferModel;

struct EvalWindow {
  int64_t begin = 0, length = 0, first_scored = 0;
  bool operator==(const EvalWindow&) const = default;
};

// The windows over a stream of `tokens` tokens (≥ 2), as above. context ≥ 1, 1 ≤ stride ≤
// context; throws zaya::Error otherwise.
std::vector<EvalWindow> plan_windows(int64_t tokens, int64_t context, int64_t stride);

struct PerplexityResult {
  double loss_sum = 0;  // Σ −log p(token | its context) over the scored tokens, in nats
  int64_t tokens = 0;   // tokens scored (the stream's length − 1)
  int64_t windows = 0;
  double loss() const { return tokens > 0 ? loss_sum / double(tokens) : NAN; }  // nats/token
  double perplexity() const { return std::exp(loss()); }
};

// Reads `n` stream tokens starting at `pos` into out (the stream may live on disk).
using ReadTokens = std::function<void(int64_t pos, int64_t n, int32_t* out)>;
// Called after each batch with the windows done so far and their total.
using EvalProgress = std::function<void(int64_t done, int64_t total)>;

// Scores one batch: ids and targets [rows, T] row after row (a target −1 is not scored); returns
// Σ −log p(target | the row's ids up to it) over the scored targets, in nats.
using BatchScorer =
    std::function<double(const int32_t* ids, const int32_t* targets, int64_t rows, int64_t T)>;
// The training model's forward (model/transformer.h model_forward), on its device.
BatchScorer model_scorer(const Model& model);
// The inference decoder's (infer/decoder.h): each row prefilled into a fresh cache in chunks, the
// logits of all positions scored. `model` must outlive the scorer.
BatchScorer infer_scorer(const InferModel& model);

// Scores a stream of `tokens` tokens with `score` in the windows of plan_windows, `rows` windows
// per batch (≥ 1; the last batch may hold fewer). Every id must be < the model's vocab.
PerplexityResult strided_loss(const BatchScorer& score, int64_t tokens, const ReadTokens& read,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress = nullptr);
// The same with model_scorer(model).
PerplexityResult strided_loss(const Model& model, int64_t tokens, const ReadTokens& read,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress = nullptr);
// The same over a stream in memory.
PerplexityResult strided_loss(const BatchScorer& score, std::span<const int32_t> stream,
                              int64_t context, int64_t stride, int64_t rows,
                              const EvalProgress& progress = nullptr);
PerplexityResult strided_loss(const Model& model, std::span<const int32_t> stream, int64_t context,
                              int64_t stride, int64_t rows, const EvalProgress& progress = nullptr);

// The longest context used when a model directory names none (see default_context).
inline constexpr int64_t kDefaultContextCap = 2048;

struct ContextChoice {
  int64_t context = 0;
  std::string why;  // where it came from, for the log ("model_max_length of …")
};
// The context a model was trained on: model_dir/tokenizer_config.json's model_max_length when
// present (the trainer writes its seq_len there), capped at max_position_embeddings; else
// max_position_embeddings capped at kDefaultContextCap. Throws zaya::Error naming the file when
// tokenizer_config.json exists but is not valid JSON.
ContextChoice default_context(const std::string& model_dir, const ZayaConfig& config);
// The same from a model's extras already read (x.model_max_length from x.tokenizer_config).
ContextChoice default_context(const ModelExtras& x, const ZayaConfig& config);

}  // namespace zaya
