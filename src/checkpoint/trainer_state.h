// Where a training run stands — what a checkpoint's trainer_state.json holds, so that a resumed run
// continues exactly — and the one parser that validates it (every field's type and range, named
// with the file in the error).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/loader.h"

namespace zaya {

// The data window of one step (global_rows rows from `at`): recorded for an anomalous step, and
// skipped from then on once a rollback has discarded it.
struct DataWindow {
  int64_t step = 0;  // the step that read it
  LoaderState at;
  int64_t rows = 0;
  bool operator==(const DataWindow&) const = default;
};
void to_json(nlohmann::json& j, const DataWindow& w);

struct TrainerState {
  int64_t step = 0;             // optimizer steps done (skipped ones included)
  int64_t optimizer_steps = 0;  // updates applied
  int64_t skipped = 0;          // steps skipped for a non-finite loss or gradient norm
  LoaderState data;             // the training data position (global rows: any rank count)
  int64_t world_size = 1;       // ranks that wrote it
  int64_t global_batch_rows = 0;
  nlohmann::json config;  // the TrainConfig of the run (train_config_to_json)
  // Fault handling: the anomaly detector's window, the anomalous steps in a row so far (their
  // windows) and the windows skipped after rollbacks (train/recovery.h).
  nlohmann::json anomaly = nlohmann::json::object();
  std::vector<DataWindow> anomalous;
  std::vector<DataWindow> skip_data;
  bool operator==(const TrainerState&) const = default;
};

// `path` names the file in errors; when its directory is a checkpoint (step_N), "step" must be N.
// Counts are integers in range: step and optimizer_steps in [0, 2^53], skipped in [0, step],
// world_size in [1, 2^24], global_batch_rows ≥ 1 (0 when absent: an older file). Throws
// zaya::Error naming the file and the key.
TrainerState parse_trainer_state(const nlohmann::json& j, const std::string& path);

void to_json(nlohmann::json& j, const TrainerState& s);
// parse_trainer_state(j, "trainer_state.json").
void from_json(const nlohmann::json& j, TrainerState& s);

}  // namespace zaya
