// The training loop: zero grads → forward/backward × micro-batches → reduce → check → clip +
// update (Muon / AdamW) → balancing biases → log / evaluate / sample / checkpoint.
// Data parallel with ZeRO-1 over a dist::Group (one code path; the single group is one process):
// train.micro_batch rows per rank per micro-batch, so the global batch is
// micro_batch × grad_accum × ranks rows, and rank r reads its disjoint slice of every global batch
// (TokenLoader). N ranks × micro_batch reproduce one process × N·micro_batch up to rounding.
// Each rank's gradient is scaled by 1/(global batch tokens) so their sum is the global mean's;
// the optimizer reduces and shards it (optimizer.h). Loss, routing counts and the non-finite check
// are agreed by one all-reduce; metrics, logs and samples come from rank 0; validation is split
// over the ranks. A run resumes from its newest valid checkpoint (model, optimizer, data position,
// step) on any number of ranks — bitwise on the same number.
#pragma once
#include <cmath>
#include <string>

#include "train/train_config.h"

namespace zaya {

namespace dist {
class Group;
}

struct TrainSummary {
  int64_t steps_done = 0, skipped = 0;
  double first_loss = 0, last_loss = 0;
  double first_val_loss = NAN, last_val_loss = NAN;  // NaN: not evaluated (see val_status)
  std::string val_status;  // why there is no validation loss; empty when there is one
  double seconds = 0;
};

struct TrainOptions {
  bool quiet = false;
  // Stop (with a checkpoint) once this step is done, as if interrupted; −1: run to train.steps.
  int64_t stop_at_step = -1;
  // The ranks of a data-parallel run (collective: every rank calls run_training); null: this
  // process alone.
  dist::Group* group = nullptr;
};

// Throws zaya::Error for bad configs, data or checkpoints.
TrainSummary run_training(const TrainConfig& cfg, const TrainOptions& opt);

}  // namespace zaya
