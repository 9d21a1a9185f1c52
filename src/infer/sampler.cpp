// Sampler: logit_bias → repetition penalty → frequency/presence → (the engine's mask) →
// temperature → top-k → top-p → min-p → draw (see sampler.h).
// Cost for a vocabulary of V: one pass (one exp each) for temperature and the candidate list,
// nth_element for top-k, a quickselect for top-p; nothing sorts the whole vocabulary.
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
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
    return bad(
        "frequency_penalty",
        fmt::format("frequency_penalty must be in [-2, 2] (0 = off); got {}", frequency_penalty));
  if (!(presence_penalty >= -2 && presence_penalty <= 2))
    return bad(
        "presence_penalty",
        fmt::format("presence_penalty must be in [-2, 2] (0 = off); got {}", presence_penalty));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return bad("logit_bias", fmt::format("logit_bias token id {} is negative", id));
    if (!(bias >= -100 && bias <= 100))
      return bad(
          "logit_bias",
          fmt::format("logit_bias for token id {} must be in [-100, 100]; got {}", id, bias));
  }
  for (int32_t id : stop_ids)
    if (id < 0) return bad("stop_ids", fmt::format("stop token id {} is negative", id));
  if (top_logprobs < -1 || top_logprobs > 20)
    return bad("top_logprobs",
               fmt::format("top_logprobs must be in [0, 20] (-1 = off); got {}", top_logprobs));
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

void Sampler::process(std::span<float> logits, std::span<const int32_t> history) {
  const int64_t V = int64_t(logits.size());
  ZAYA_ASSERT(V > 0, "sample: empty logits");

  for (const auto& [id, bias] : p_.logit_bias) {
    ZAYA_ASSERT(id >= 0 && id < V, "sample: logit_bias id {} outside the vocabulary of {}", id, V);
    logits[size_t(id)] += bias;
  }

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

  // OpenAI's penalties over the generated ids, the subtraction done in double.
  for (const auto& [id, count] : counts_) {
    ZAYA_ASSERT(id < V, "sample: generated id {} outside the vocabulary of {}", id, V);
    float& l = logits[size_t(id)];
    l = float(double(l) - (double(count) * p_.frequency_penalty + p_.presence_penalty));
  }
}

int32_t Sampler::draw(std::span<float> logits) {
  ZAYA_ASSERT(!logits.empty(), "sample: empty logits");
  const int32_t id = pick(logits);
  if (p_.frequency_penalty != 0 || p_.presence_penalty != 0) {
    auto it = std::lower_bound(counts_.begin(), counts_.end(), std::make_pair(id, int64_t(0)));
    if (it != counts_.end() && it->first == id)
      ++it->second;
    else
      counts_.insert(it, {id, 1});
  }
  return id;
}

int32_t Sampler::pick(std::span<float> logits) {
  const int64_t V = int64_t(logits.size());
  if (p_.temperature == 0) return argmax(logits);
  // A +inf logit is certain; NaN and -inf can never be drawn.
  const float top = logits[argmax(logits)];
  if (std::isinf(top) && top > 0) return argmax(logits);
  if (!std::isfinite(top)) return argmax(logits);  // nothing finite: same fallback as greedy

  // Temperature, and the candidate list of every finite logit.
  const float inv_t = float(1.0 / p_.temperature);
  const float max_l = top * inv_t;  // scaling by a positive factor keeps the maximum in place
  if (!std::isfinite(max_l)) return argmax(logits);  // a tiny temperature overflowed: greedy

  // Candidates carry their weight exp(l − max) ∝ probability (1 for the most likely), so the
  // order by weight is the order by logit and every later step is plain sums.
  cand_.clear();
  for (int64_t i = 0; i < V; ++i) {
    const float l = logits[i] * inv_t;
    logits[i] = l;
    if (std::isfinite(l)) cand_.emplace_back(std::exp(l - max_l), int32_t(i));
  }

  // top-k: the k most likely, unordered.
  if (p_.top_k > 0 && size_t(p_.top_k) < cand_.size()) {
    std::nth_element(cand_.begin(), cand_.begin() + (p_.top_k - 1), cand_.end(), more_likely);
    cand_.resize(size_t(p_.top_k));
  }
  // The softmax mass of top-k's survivors: what top-p measures against.
  double total = 0;
  for (const auto& c : cand_) total += c.first;

  // min-p keeps a prefix of the sorted order, and so does top-p; the documented order (top-p, then
  // min-p) keeps the shorter prefix. Applying min-p's threshold first gives the same set and
  // leaves top-p fewer candidates, as long as top-p still measures against `total`.
  double kept = total;  // the mass that survives every filter
  if (p_.min_p > 0) {
    const size_t n = cand_.size();
    // p ≥ min_p · p_max ⇔ weight ≥ min_p; the most likely (weight 1) always survives.
    std::erase_if(cand_, [&](const auto& c) { return double(c.first) < p_.min_p; });
    if (cand_.size() != n) {
      kept = 0;
      for (const auto& c : cand_) kept += c.first;
    }
  }

  if (p_.top_p < 1.0) {
    // The smallest most-likely prefix with mass ≥ top_p · total, by quickselect: halve the
    // unresolved range [lo, hi) with nth_element until it is small, then sort just that. O(V),
    // however large the nucleus (a full or growing sort of 262144 candidates costs far more).
    const double target = p_.top_p * total;
    size_t lo = 0, hi = cand_.size();
    double acc = 0;  // mass of cand_[0, lo), each more likely than everything after
    while (hi - lo > 64) {
      const size_t mid = lo + (hi - lo) / 2;
      std::nth_element(cand_.begin() + lo, cand_.begin() + mid, cand_.begin() + hi, more_likely);
      double m = 0;
      for (size_t i = lo; i < mid; ++i) m += cand_[i].first;
      if (acc + m >= target) {
        hi = mid;  // the cut is inside [lo, mid)
      } else {
        acc += m;
        lo = mid;
      }
    }
    std::sort(cand_.begin() + lo, cand_.begin() + hi, more_likely);
    size_t keep = hi;  // rounding: the whole range when the sums never quite reach the target
    for (size_t i = lo; i < hi; ++i) {
      acc += cand_[i].first;
      if (acc >= target) {
        keep = i + 1;
        break;
      }
    }
    cand_.resize(keep);
    kept = acc;
  }

  // Draw from the renormalised survivors.
  const double u = rng_.uniform(draws_++) * kept;
  double acc = 0;
  int32_t last = cand_[0].second;
  for (const auto& c : cand_) {
    acc += c.first;
    if (c.first > 0) last = c.second;
    if (u < acc) return c.second;
  }
  return last;  // u within rounding of `kept`: the last candidate that could be drawn
}

}  // namespace zaya
