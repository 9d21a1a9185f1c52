// Loss and gradient-norm spike detection (as llm.c's outlier detector): a step's value is judged
// by its z-score against the window of the accepted steps before it. A spike (z above the
// threshold, upward only: a falling loss is never an anomaly; a gradient norm must also be
// grad_ratio × the window's mean) or a non-finite value is an anomaly;
// spikes are judged only once the window is full and the caller says the warm-up is over (early
// training moves too fast for a z-score: docs/fault-tolerance.md, "Spikes and NaNs");
// the trainer skips that step's update, and after K anomalies in a row rolls back to the previous
// checkpoint (train/recovery.h). Anomalous values never enter the window. The window is part of the
// checkpoint (to_json), so a resumed run judges every later step as the uninterrupted one does.
#pragma once
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>

#include "core/enum_words.h"

namespace zaya {

struct AnomalyConfig {
  int64_t window = 32;  // accepted steps the z-score is computed over (judging starts when full)
  double z = 6;         // threshold; 0: spikes are not judged (non-finite values still are)
  // A gradient-norm spike must also exceed grad_ratio × the window's mean (0: the z-score alone):
  // a healthy run's gradient norm jumps 2–5× from one step to the next, far beyond its z-score
  // over a calm window, and clipping bounds such a step's update anyway; a gradient that
  // explodes grows by orders of magnitude, and its loss spikes too.
  double grad_ratio = 10;
};

// The kind in run events: "nonfinite", "loss_spike", "grad_spike".
enum class AnomalyKind { None, NonFinite, LossSpike, GradSpike };
template <>
struct EnumWords<AnomalyKind> {
  static constexpr std::pair<AnomalyKind, std::string_view> words[] = {
      {AnomalyKind::None, "none"},
      {AnomalyKind::NonFinite, "nonfinite"},
      {AnomalyKind::LossSpike, "loss_spike"},
      {AnomalyKind::GradSpike, "grad_spike"}};
};

struct AnomalyVerdict {
  bool anomaly = false;
  AnomalyKind kind = AnomalyKind::None;
  double z = 0;  // the larger of the two z-scores (0 while the window fills)
};

class AnomalyDetector {
 public:
  explicit AnomalyDetector(AnomalyConfig c = {}) : c_(c) {}
  // Judges one step; an accepted step joins the window (the oldest leaves when it is full).
  // judge_spikes = false (the warm-up): only a non-finite value is an anomaly.
  AnomalyVerdict observe(double loss, double grad_norm, bool judge_spikes = true);
  bool judging() const { return c_.z > 0 && int64_t(loss_.size()) >= c_.window; }

  nlohmann::json to_json() const;  // {"loss": [...], "grad_norm": [...]}, exact doubles
  // Restores the window (throws zaya::Error naming the field when malformed).
  void from_json(const nlohmann::json& j);

 private:
  double z_score(const std::deque<double>& w, double x) const;
  AnomalyConfig c_;
  std::deque<double> loss_, grad_;
};

}  // namespace zaya
