// What `zaya plot` reads: the trainer's metrics file (train.metrics, JSON Lines, written by
// train/metrics_log.h), the supervisor's goodput report (goodput.json, resilience/goodput.h), and
// where a run directory keeps them. The readers check what they use and throw zaya::Error naming
// the file, the line and the key; they never trust a field's type.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::plot {

// One line of the metrics file. A value the line does not hold, or holds as null (the trainer's
// JSON writes a NaN or an infinity as null), is NaN.
struct MetricsRow {
  int64_t step = 0;
  double loss = NAN, grad_norm = NAN, lr = NAN, tokens = NAN, tokens_per_s = NAN, mfu = NAN,
         expert_load_entropy = NAN, time = NAN;
  int64_t skipped = -1;  // the run's count of skipped steps so far; −1: not recorded
};

// A validation loss at a step: a metrics line with "val_loss" (a step's own line, or a line of
// its own: {"step": 0, "val_loss": 6.93}).
struct ValPoint {
  int64_t step = 0;
  double loss = NAN;
};

// The run went back: after step `from` it continued at step `to` + 1.
struct Rollback {
  int64_t from = 0, to = 0;
};

struct RunMetrics {
  std::string path;
  std::vector<MetricsRow> rows;  // the training lines, ascending steps (the final lineage)
  std::vector<ValPoint> val;     // ascending steps
  std::vector<Rollback> rollbacks;
  std::vector<int64_t> skipped_steps;  // the steps at which "skipped" grew
  bool torn_last_line = false;  // the last line had no newline and did not parse (a live run)
};

// Parses a metrics file's text; `name` names it in errors ("runs/x/metrics.jsonl line 7: …").
// A line is a JSON object with an integer "step" ≥ 0 and "loss" or "val_loss"; the other keys are
// optional. A training line whose step is not above the previous one's means the run went back
// (a rollback, or a restart from an earlier checkpoint whose file was not cut back): the lines
// from that step on are replaced and the rollback recorded. A last line without a newline that
// does not parse is a line still being written: left out (torn_last_line). Throws zaya::Error for
// an empty file, a malformed line, or a value of the wrong type.
RunMetrics parse_metrics(std::string_view text, const std::string& name);
// Reads and parses `path`.
RunMetrics read_metrics(const std::string& path);

// The parts of a goodput report the chart draws.
struct Goodput {
  std::string path;
  std::string outcome;  // completed | restarts spent | no progress | stopped
  double wall_s = 0, productive_s = 0, anomaly_s = 0;
  double before_launch_s = 0, setup_s = 0, after_step_s = 0, shutdown_s = 0;  // overhead
  double detection_s = 0, restart_s = 0, recomputed_s = 0, other_s = 0;       // failures, summed
  struct Attempt {
    int64_t attempt = 0;
    double launch_s = 0, end_s = 0;  // from the supervisor's start
    std::string outcome;             // completed | crash | hang | stopped
    std::string cause;
  };
  std::vector<Attempt> attempts;
  std::vector<Rollback> rollbacks;
  int64_t steps_kept = 0, steps_skipped = 0, steps_recomputed = 0, steps_rolled_back = 0;
};

// Parses goodput.json's text; zaya::Error naming `name` and the key for what is missing or of the
// wrong type.
Goodput parse_goodput(std::string_view text, const std::string& name);
Goodput read_goodput(const std::string& path);

// The files of a run, from what the user named.
struct RunFiles {
  std::string metrics;  // empty: none
  std::string goodput;  // empty: none
  std::string folder;   // where the plot goes by default
};
// `run` is a metrics file, a goodput.json, or a directory: the run directory holding
// metrics.jsonl (as configs/*.toml name it: train.metrics = "runs/NAME/metrics.jsonl"), or its
// checkpoint directory (then the metrics file is one level up); goodput.json in it or in one of
// its subdirectories (a `zaya supervise --dir` inside the run). zaya::Error when `run` does not
// exist, or is a directory with neither file (the message says that train.metrics writes one).
RunFiles find_run_files(const std::string& run);

}  // namespace zaya::plot
