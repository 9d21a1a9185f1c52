// In-run recovery: the trainer's policies for a step that went wrong (docs/fault-tolerance.md).
//   anomalies   a non-finite or spiking loss or gradient norm (train/anomaly.h): the step's update
//               is skipped and counted, its data window recorded;
//   rollback    anomaly_rollback anomalies in a row: back to the newest valid checkpoint before
//               them, their data windows skipped from then on (exact: the data position is in the
//               checkpoint), later checkpoints discarded; 3 rollbacks to one step end the run;
//   stragglers  a rank whose compute time stays above the others' (train/straggler.h) is named.
// The trainer calls it at fixed points of the step; it logs and writes the run events itself.
// Every decision depends only on values the ranks agreed on, so all ranks take it together.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/trainer_state.h"
#include "train/anomaly.h"
#include "train/straggler.h"
#include "train/train_config.h"

namespace zaya {

namespace dist {
class Group;
}
class RunEvents;
class TokenLoader;

class Recovery {
 public:
  // Collective (gathers every rank's host name, for the straggler messages).
  Recovery(const TrainConfig& cfg, dist::Group& group, RunEvents& events);

  // Before a step reads its data: passes over the windows a rollback discarded.
  void skip_discarded_windows(TokenLoader& data, const TrainerState& state) const;

  // The verdict on step `step` (loss and grad_norm agreed by the ranks; `nonfinite`: some rank's
  // loss was not finite). True: an anomaly — the update is to be skipped; state.skipped and
  // state.anomalous (with `window`) record it.
  bool judge(int64_t step, double loss, double grad_norm, bool nonfinite, const DataWindow& window,
             TrainerState& state);

  // After a step: names the ranks that became stragglers (seconds: each rank's compute time).
  void note_stragglers(int64_t step, std::span<const double> seconds);
  std::vector<int> stragglers() const { return stragglers_.current(); }

  // Whether the anomalies in a row call for a rollback.
  bool rollback_due(const TrainerState& state) const;
  // Collective, when rollback_due: the step of the newest valid checkpoint before the anomalies
  // in a row, with the checkpoints after it discarded; −1 when there is none (the steps stay
  // skipped, state.anomalous is cleared, the anomaly window starts over — a lasting new level
  // would otherwise be skipped for ever — and a warning is logged). zaya::Error after 3
  // rollbacks to the same step (the run is diverging).
  int64_t rollback_target(const std::string& checkpoint_dir, int64_t step, TrainerState& state);
  // The windows to skip once rolled back: those already skipped and the anomalous ones.
  static std::vector<DataWindow> windows_to_skip(const TrainerState& state);
  // Logs the rollback of step `step` to `to` over `windows` and writes its run event.
  void report_rollback(int64_t step, int64_t to, const std::vector<DataWindow>& windows,
                       double seconds);

  // The anomaly detector's window, saved in every checkpoint (TrainerState::anomaly) so that a
  // resumed run judges as the uninterrupted one does.
  nlohmann::json anomaly_state() const { return anomaly_.to_json(); }
  void restore_anomaly_state(const nlohmann::json& j);

  // The hostname of every rank (gathered once at start-up), for the log and the metrics.
  const std::vector<std::string>& hosts() const { return hosts_; }

 private:
  const TrainConfig& cfg_;
  dist::Group& group_;
  RunEvents& events_;
  AnomalyDetector anomaly_;
  StragglerTracker stragglers_;
  std::vector<std::string> hosts_;       // of every rank
  std::map<int64_t, int> rollbacks_to_;  // rollbacks per target step (a bound on retries)
};

}  // namespace zaya
