// Sampling: turns one row of logits into the next token id. Order of the controls:
//   logit_bias → repetition penalty → frequency/presence penalty   (process)
//   → [the engine's LogitsProcessor mask, engine.h]
//   → temperature → top-k → top-p → min-p → draw                    (draw)
// temperature 0 is greedy argmax (ties → lowest id) of the processed logits: it ignores top-k,
// top-p and min-p, never the bias, the penalties or a mask. sample() is process() then draw();
// the engine calls them apart to mask in between. The frequency and presence penalties are
// OpenAI's: logit[j] −= count[j]·frequency + (count[j] > 0)·presence, where count[j] is how often
// this sampler has drawn j (the generated ids, never the prompt); the repetition penalty (CTRL)
// instead looks at the whole history, prompt included.
// Draws use the counter-based RNG (core/rng.h) keyed by (seed, stream) at counter = draw index, so
// a sequence's output depends only on its seed and stream, never on what else shares its batch;
// the engine gives choice i of a request stream i (choice 0 draws exactly as a lone request).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"

namespace zaya {

struct SamplingParams {
  double temperature = 1.0;         // 0 = greedy; must be ≥ 0
  int64_t top_k = 0;                // 0 = off; else keep the k most likely
  double top_p = 1.0;               // nucleus mass in (0, 1]; 1 = off
  double min_p = 0.0;               // [0, 1]: drop tokens below min_p · p_max; 0 = off
  double repetition_penalty = 1.0;  // > 0; 1 = off; CTRL rule on every id seen so far
  uint64_t seed = 0;
  int64_t max_new_tokens = 128;   // ≥ 0
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;        // keep going past the tokenizer's EOS
  double frequency_penalty = 0;   // [-2, 2]: −count·f per generated occurrence (OpenAI's)
  double presence_penalty = 0;    // [-2, 2]: −p once an id has been generated (OpenAI's)
  // Added to the logits first: ids < vocab (checked by Engine::submit, which knows the vocab),
  // bias in [-100, 100]; an id listed twice gets both.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<int32_t> stop_ids;  // end like EOS (not included in the output), even with ignore_eos
  int top_logprobs = -1;          // -1 off; 0..20: chosen id's logprob + that many alternatives

  // The first out-of-range field (its name as spelled above) and a message naming it and its
  // allowed range; nullopt when every field is valid. The server maps `field` to its own names.
  struct Invalid {
    std::string field;
    std::string message;
  };
  std::optional<Invalid> check() const;
  // Throws zaya::Error with check()'s message.
  void validate() const;
};

class Sampler {
 public:
  // stream: the RNG stream (0 for a lone sequence; the engine's choice index otherwise).
  explicit Sampler(const SamplingParams& p, uint64_t stream = 0) : p_(p), rng_{p.seed, stream} {}
  // The next id from logits[V] (modified in place: bias, penalties, temperature, filtering).
  // history is every id of the sequence so far (prompt and generated) for the repetition penalty.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history) {
    process(logits, history);
    return draw(logits);
  }
  // The first half: logit_bias, repetition penalty, frequency/presence penalties, in place.
  void process(std::span<float> logits, std::span<const int32_t> history);
  // The second half: temperature, top-k, top-p, min-p, the draw; counts the drawn id as generated
  // (for the frequency/presence penalties of later steps).
  int32_t draw(std::span<float> logits);

 private:
  SamplingParams p_;
  CounterRng rng_;
  uint64_t draws_ = 0;
  std::vector<std::pair<float, int32_t>> cand_;      // scratch: (logit, id) candidates
  std::vector<int32_t> seen_;                        // scratch: distinct history ids
  std::vector<std::pair<int32_t, int64_t>> counts_;  // generated (id, count), sorted by id
  int32_t pick(std::span<float> logits);
};

}  // namespace zaya
