// The z-score spike detector (anomaly.h).
#include "train/anomaly.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"

namespace zaya {

// (x − mean) / std over the window, in double; a window of identical values has std 0, so the
// spread is floored at 1e-6 of the mean's magnitude (a flat loss must not make noise a spike).
double AnomalyDetector::z_score(const std::deque<double>& w, double x) const {
  double mean = 0;
  for (double v : w) mean += v;
  mean /= double(w.size());
  double var = 0;
  for (double v : w) var += (v - mean) * (v - mean);
  const double sd = std::max(std::sqrt(var / double(w.size())), 1e-6 * std::abs(mean) + 1e-12);
  return (x - mean) / sd;
}

AnomalyVerdict AnomalyDetector::observe(double loss, double grad_norm, bool judge_spikes) {
  AnomalyVerdict v;
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
    v.anomaly = true, v.kind = AnomalyKind::NonFinite;
    return v;
  }
  if (judge_spikes && judging()) {
    const double zl = z_score(loss_, loss), zg = z_score(grad_, grad_norm);
    v.z = std::max(zl, zg);
    double grad_mean = 0;
    for (double g : grad_) grad_mean += g / double(grad_.size());
    const bool grad_spike = zg > c_.z && grad_norm > c_.grad_ratio * grad_mean;
    if (zl > c_.z || grad_spike) {
      v.anomaly = true;
      v.kind = zl > c_.z ? AnomalyKind::LossSpike : AnomalyKind::GradSpike;
      return v;
    }
  }
  loss_.push_back(loss), grad_.push_back(grad_norm);
  if (int64_t(loss_.size()) > c_.window) loss_.pop_front(), grad_.pop_front();
  return v;
}

nlohmann::json AnomalyDetector::to_json() const {
  return {{"loss", loss_}, {"grad_norm", grad_}};
}

void AnomalyDetector::from_json(const nlohmann::json& j) {
  const auto values = [&](const char* key) {
    if (!j.is_object() || !j.contains(key) || !j.at(key).is_array())
      fail("trainer_state.json: 'anomaly.{}' must be an array of numbers", key);
    std::deque<double> out;
    for (const nlohmann::json& x : j.at(key)) {
      if (!x.is_number() || !std::isfinite(x.get<double>()))
        fail("trainer_state.json: 'anomaly.{}' holds {}, not a finite number", key, x.dump());
      out.push_back(x.get<double>());
    }
    return out;
  };
  std::deque<double> loss = values("loss"), grad = values("grad_norm");
  if (loss.size() != grad.size())
    fail("trainer_state.json: 'anomaly' has {} losses but {} gradient norms", loss.size(),
         grad.size());
  while (int64_t(loss.size()) > c_.window) loss.pop_front(), grad.pop_front();
  loss_ = std::move(loss), grad_ = std::move(grad);
}

}  // namespace zaya
