// In-run recovery (recovery.h).
#include "train/recovery.h"

#include <unistd.h>

#include <cmath>

#include "checkpoint/checkpoint.h"
#include "core/assert.h"
#include "core/log.h"
#include "data/loader.h"
#include "dist/group.h"
#include "resilience/run_events.h"

namespace zaya {

namespace {

// Every rank's host name (a fixed 64 bytes each, gathered by one all-reduce of I32 codes).
std::vector<std::string> gather_hosts(dist::Group& group) {
  constexpr int kChars = 64;
  std::vector<int32_t> codes(size_t(group.size() * kChars), 0);
  char name[kChars] = {};
  gethostname(name, kChars - 1);
  for (int i = 0; i < kChars && name[i]; ++i)
    codes[size_t(group.rank() * kChars + i)] = int32_t(static_cast<unsigned char>(name[i]));
  group.all_reduce(Tensor(codes.data(), {int64_t(codes.size())}), dist::ReduceOp::Sum);
  std::vector<std::string> hosts(size_t(group.size()));
  for (int r = 0; r < group.size(); ++r)
    for (int i = 0; i < kChars && codes[size_t(r * kChars + i)]; ++i)
      hosts[size_t(r)] += char(codes[size_t(r * kChars + i)]);
  return hosts;
}

}  // namespace

Recovery::Recovery(const TrainConfig& cfg, dist::Group& group, RunEvents& events)
    : cfg_(cfg),
      group_(group),
      events_(events),
      anomaly_(AnomalyConfig{cfg.anomaly_window, cfg.anomaly_z, cfg.anomaly_grad_ratio}),
      stragglers_(group.size(), StragglerConfig{cfg.straggler_factor, cfg.straggler_steps}),
      hosts_(gather_hosts(group)) {}

void Recovery::skip_discarded_windows(TokenLoader& data, const TrainerState& state) const {
  for (bool again = true; again;) {
    again = false;
    const LoaderState at = data.state();
    for (const DataWindow& w : state.skip_data) {
      if (w.at.epoch != at.epoch || w.at.position != at.position) continue;
      data.advance(uint64_t(w.rows));
      log_info(
          "data: skipping the {} rows of step {}'s window (epoch {}, row {}): a rollback "
          "discarded them",
          w.rows, w.step, w.at.epoch, w.at.position);
      again = true;
      break;
    }
  }
}

bool Recovery::judge(int64_t step, double loss, double grad_norm, bool nonfinite,
                     const DataWindow& window, TrainerState& state) {
  const AnomalyVerdict v =
      anomaly_.observe(nonfinite ? NAN : loss, grad_norm, step > cfg_.anomaly_warmup);
  if (!v.anomaly) {
    state.anomalous.clear();
    return false;
  }
  ++state.skipped;
  state.anomalous.push_back(window);
  if (v.kind == AnomalyKind::NonFinite)
    log_info("step {:>6}  non-finite loss {} or grad norm {}: step skipped", step, loss, grad_norm);
  else
    log_info(
        "step {:>6}  {} (loss {:.4f}, grad_norm {:.3f}: z {:.1f} over the last {} steps): "
        "step skipped",
        step, v.kind == AnomalyKind::LossSpike ? "loss spike" : "gradient-norm spike", loss,
        grad_norm, v.z, cfg_.anomaly_window);
  events_.write({{"event", "anomaly"},
                 {"step", step},
                 {"kind", std::string(enum_word(v.kind))},
                 {"loss", loss},
                 {"grad_norm", grad_norm},
                 {"z", v.z}});
  return true;
}

void Recovery::note_stragglers(int64_t step, std::span<const double> seconds) {
  if (group_.size() < 2) return;
  for (int r : stragglers_.observe(seconds)) {
    const double ratio = stragglers_.ratios()[size_t(r)];
    log_info(
        "straggler: rank {} ({}) took {:.2f}x the other ranks' median compute time for {} "
        "steps in a row (step {})",
        r, hosts_[size_t(r)], ratio, cfg_.straggler_steps, step);
    events_.write({{"event", "straggler"},
                   {"step", step},
                   {"rank", r},
                   {"host", hosts_[size_t(r)]},
                   {"ratio", ratio}});
  }
}

bool Recovery::rollback_due(const TrainerState& state) const {
  return cfg_.anomaly_rollback > 0 && int64_t(state.anomalous.size()) >= cfg_.anomaly_rollback;
}

int64_t Recovery::rollback_target(const std::string& checkpoint_dir, int64_t step,
                                  TrainerState& state) {
  const int64_t first = state.anomalous.front().step;
  double target = -1;
  if (!checkpoint_dir.empty()) {
    if (group_.rank() == 0) {
      const std::string dir = find_latest_valid_checkpoint(checkpoint_dir, first);
      if (!dir.empty()) target = double(checkpoint_step(dir));
    }
    group_.broadcast(Tensor(&target, {1}), 0);
  }
  if (target < 0) {
    // Skipping on would skip every later step of a new level (the window never takes in a
    // skipped value): take it as the new normal and start the window over.
    log_info(
        "warning: {} anomalous steps in a row (from step {}) but no checkpoint before them to roll "
        "back to: the steps stay skipped, and the anomaly guard's window starts over from here",
        state.anomalous.size(), first);
    anomaly_ = AnomalyDetector(
        AnomalyConfig{cfg_.anomaly_window, cfg_.anomaly_z, cfg_.anomaly_grad_ratio});
    state.anomalous.clear();
    return -1;
  }
  const int64_t to = int64_t(target);
  if (++rollbacks_to_[to] > 3)
    fail(
        "the loss keeps spiking after 3 rollbacks to step {} (last anomaly at step {}): the run "
        "is diverging; lower optim.lr or check the data",
        to, step);
  if (group_.rank() == 0) discard_checkpoints_after(checkpoint_dir, to);
  group_.barrier();
  return to;
}

std::vector<DataWindow> Recovery::windows_to_skip(const TrainerState& state) {
  std::vector<DataWindow> skip = state.skip_data;
  skip.insert(skip.end(), state.anomalous.begin(), state.anomalous.end());
  return skip;
}

void Recovery::report_rollback(int64_t step, int64_t to, const std::vector<DataWindow>& windows,
                               double seconds) {
  std::vector<int64_t> steps;
  for (const DataWindow& w : windows) steps.push_back(w.step);
  log_info(
      "rollback: {} anomalous steps in a row ({}–{}): back to step {}; their data windows are "
      "skipped from now on",
      steps.size(), steps.front(), steps.back(), to);
  events_.write({{"event", "rollback"},
                 {"step", step},
                 {"to_step", to},
                 {"windows", steps},
                 {"seconds", seconds}});
}

void Recovery::restore_anomaly_state(const nlohmann::json& j) {
  anomaly_ =
      AnomalyDetector(AnomalyConfig{cfg_.anomaly_window, cfg_.anomaly_z, cfg_.anomaly_grad_ratio});
  if (!j.empty()) anomaly_.from_json(j);
}

}  // namespace zaya
