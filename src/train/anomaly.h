// Loss and gradient-norm spike detection (as llm.c's outlier detector): a step's value is judged
// by its z-score against the window of the accepted steps before it. A spike (z above the
// threshold, upward only: a falling loss is never an anomaly) or a non-finite value is an anomaly;
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
  AnomalyVerdict observe(double loss, double grad_norm);
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
