// Sampling: turns one row of logits into the next token id. Order of the controls (the llama.cpp /
// HF order): repetition penalty → temperature → top-k → top-p → min-p → draw. temperature 0 is
// greedy argmax (ties → lowest id) and ignores the other controls except the repetition penalty.
// Draws use the counter-based RNG (core/rng.h) keyed by (seed, draw index), so a sequence's
// output depends only on its seed, never on what else shares its batch.
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
  explicit Sampler(const SamplingParams& p) : p_(p), rng_{p.seed, 0} {}
  // The next id from logits[V] (modified in place: penalty, temperature, filtering). history is
  // every id of the sequence so far (prompt and generated) for the repetition penalty.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

 private:
  SamplingParams p_;
  CounterRng rng_;
  uint64_t draws_ = 0;
  std::vector<std::pair<float, int32_t>> cand_;  // scratch: (logit, id) candidates
  std::vector<int32_t> seen_;                    // scratch: distinct history ids
};

}  // namespace zaya
