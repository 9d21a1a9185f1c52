// The training loop on one process: zero grads → forward/backward × micro-batches → check →
// clip + update (Muon / AdamW) → balancing biases → log / evaluate / sample / checkpoint.
// A run resumes bitwise from its newest valid checkpoint (model, optimizer, data position, step).
#pragma once
#include <string>

#include "train/train_config.h"

namespace zaya {

struct TrainSummary {
  int64_t steps_done = 0, skipped = 0;
  double first_loss = 0, last_loss = 0;
  double first_val_loss = 0, last_val_loss = 0;
  double seconds = 0;
};

struct TrainOptions {
  bool quiet = false;
  // Stop (with a checkpoint) once this step is done, as if interrupted; −1: run to train.steps.
  int64_t stop_at_step = -1;
};

// Throws zaya::Error for bad configs, data or checkpoints.
TrainSummary run_training(const TrainConfig& cfg, const TrainOptions& opt);

}  // namespace zaya
