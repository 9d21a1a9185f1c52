// Sampler: repetition penalty → temperature → top-k → top-p → min-p → draw (see sampler.h).
// Cost for a vocabulary of V: one pass for the penalty/temperature/candidate list, nth_element for
// top-k, and for top-p a partial sort that grows geometrically from the most likely candidates, so
// a typical nucleus of tens of tokens never sorts the whole vocabulary.
#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/assert.h"

namespace zaya {

std::optional<SamplingParams::Invalid> SamplingParams::check() const {
  auto bad = [](const char* field, std::string msg) {
    return std::optional<Invalid>(Invalid{field, std::move(msg)});
  };
  if (!(temperature >= 0) || !std::isfinite(temperature))
    return bad(
        "temperature",
        fmt::format("temperature must be a finite number ≥ 0 (0 = greedy); got {}", temperature));
  if (top_k < 0)
    return bad("top_k", fmt::format("top_k must be an integer ≥ 0 (0 = off); got {}", top_k));
  if (!(top_p > 0 && top_p <= 1))
    return bad("top_p", fmt::format("top_p must be in (0, 1] (1 = off); got {}", top_p));
  if (!(min_p >= 0 && min_p <= 1))
    return bad("min_p", fmt::format("min_p must be in [0, 1] (0 = off); got {}", min_p));
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty))
    return bad("repetition_penalty",
               fmt::format("repetition_penalty must be a finite number > 0 (1 = off); got {}",
                           repetition_penalty));
  if (max_new_tokens < 0)
    return bad("max_new_tokens",
               fmt::format("max_new_tokens must be an integer ≥ 0; got {}", max_new_tokens));
  for (const std::string& s : stop)
    if (s.empty()) return bad("stop", "stop strings must not be empty");
  return std::nullopt;
}

void SamplingParams::validate() const {
  if (auto inv = check()) throw Error(inv->message);
}

namespace {

// Greedy: the largest logit, ties to the lowest id; NaN never wins. All NaN/-inf → id 0.
int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_v = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > best_v) best_v = logits[i], best = int32_t(i);
  return best;
}

// Candidate order: larger logit first, then lower id (a strict weak order, so results do not
// depend on the standard library's algorithm choices).
bool more_likely(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  const int64_t V = int64_t(logits.size());
  ZAYA_ASSERT(V > 0, "sample: empty logits");

  if (p_.repetition_penalty != 1.0 && !history.empty()) {
    // CTRL rule, once per distinct id: positive logits shrink, negative ones grow.
    seen_.assign(history.begin(), history.end());
    std::sort(seen_.begin(), seen_.end());
    seen_.erase(std::unique(seen_.begin(), seen_.end()), seen_.end());
    const float pen = float(p_.repetition_penalty);
    for (int32_t id : seen_) {
      ZAYA_ASSERT(id >= 0 && id < V, "sample: history id {} outside the vocabulary of {}", id, V);
      float& l = logits[id];
      l = l > 0 ? l / pen : l * pen;
    }
  }

  if (p_.temperature == 0) return argmax(logits);
  // A +inf logit is certain; NaN and -inf can never be drawn.
  const float top = logits[argmax(logits)];
  if (std::isinf(top) && top > 0) return argmax(logits);
  if (!std::isfinite(top)) return argmax(logits);  // nothing finite: same fallback as greedy

  // Temperature, and the candidate list of every finite logit.
  const float inv_t = float(1.0 / p_.temperature);
  cand_.clear();
  for (int64_t i = 0; i < V; ++i) {
    const float l = logits[i] * inv_t;
    logits[i] = l;
    if (std::isfinite(l)) cand_.emplace_back(l, int32_t(i));
  }
  if (cand_.empty()) return argmax(logits);  // temperature overflowed every logit to ±inf

  // top-k: the k most likely, unordered.
  if (p_.top_k > 0 && size_t(p_.top_k) < cand_.size()) {
    std::nth_element(cand_.begin(), cand_.begin() + (p_.top_k - 1), cand_.end(), more_likely);
    cand_.resize(size_t(p_.top_k));
  }

  // Softmax over the survivors of top-k (the mass top-p measures against).
  float max_l = cand_[0].first;
  for (const auto& c : cand_) max_l = std::max(max_l, c.first);
  double total = 0;
  for (const auto& c : cand_) total += std::exp(double(c.first - max_l));

  // min-p keeps a prefix of the sorted order, and so does top-p; the documented order (top-p, then
  // min-p) keeps the shorter prefix. Applying min-p's threshold first is the same result and
  // leaves top-p fewer candidates to sort, as long as top-p still measures against `total`.
  if (p_.min_p > 0) {
    const double threshold = double(max_l) + std::log(p_.min_p);  // p ≥ min_p · p_max
    std::erase_if(cand_, [&](const auto& c) { return double(c.first) < threshold; });
    // The maximum always survives (log(min_p) ≤ 0), so cand_ is never empty here.
  }

  size_t keep = cand_.size();
  if (p_.top_p < 1.0) {
    // Sort a growing head of the list until its mass reaches top_p.
    const double target = p_.top_p * total;
    double mass = 0;
    size_t sorted = 0, i = 0;
    keep = 0;
    while (keep == 0) {
      const size_t want = std::min(cand_.size(), std::max<size_t>(64, sorted * 4));
      std::partial_sort(cand_.begin() + sorted, cand_.begin() + want, cand_.end(), more_likely);
      sorted = want;
      for (; i < sorted; ++i) {
        mass += std::exp(double(cand_[i].first - max_l));
        if (mass >= target) {
          keep = i + 1;
          break;
        }
      }
      if (keep == 0 && sorted == cand_.size()) keep = cand_.size();  // rounding: keep all
    }
  }
  cand_.resize(std::max<size_t>(keep, 1));

  // Draw from the renormalised survivors.
  double kept = 0;
  for (const auto& c : cand_) kept += std::exp(double(c.first - max_l));
  const double u = rng_.uniform(draws_++) * kept;
  double acc = 0;
  for (const auto& c : cand_) {
    acc += std::exp(double(c.first - max_l));
    if (u < acc) return c.second;
  }
  return cand_.back().second;  // u within rounding of `kept`
}

}  // namespace zaya
