// The training loop, as a Trainer: setup (model, optimizer, data, resume) in the constructor, then
// per step train_step() → StepResult and after_step() (metrics, log line, evaluation, sample,
// checkpoint). train_step is: zero grads → forward/backward × micro-batches → reduce → agree →
// check → clip + update (Muon / AdamW) → balancing biases.
// Data parallel with ZeRO-1 over a dist::Group (one code path; the single group is one process):
// train.micro_batch rows per rank per micro-batch, so the global batch is
// micro_batch × grad_accum × ranks rows, and rank r reads its disjoint slice of every global batch
// (TokenLoader). N ranks × micro_batch reproduce one process × N·micro_batch up to rounding.
// Each rank's gradient is scaled by 1/(global batch tokens) so their sum is the global mean's;
// the optimizer reduces and shards it (optimizer.h). Loss, the non-finite check and the routing
// counts are agreed by one all-reduce; metrics, logs and samples come from rank 0; validation is
// split over the ranks. A run resumes from its newest valid checkpoint (model, optimizer, data
// position, step: the TrainerState) on any number of ranks — bitwise on the same number.
// Before step 1 the setup refuses what would waste the run or its result (each message names
// both sides): files the keys name, a tokenizer the model cannot embed or the dataset was not
// made with, a seq_len beyond the model's context, a resumed checkpoint of another model config,
// resume = "none" over another run's checkpoints; a run resumed at its last step does nothing.
// Every checkpoint's model/ is a whole model: with tokenizer.json (the run's tokenizer, byte for
// byte), tokenizer_config.json and generation_config.json. A stop signal (stop_signal.h) ends the
// run after the current step with a checkpoint. The end-of-run sample comes after the final
// checkpoint, and a sample that fails is a warning.
// train.device = gpu (one process): the model, gradients, optimizer state, ZeRO bucket and
// activations live on the GPU, each micro-batch's tokens are copied over by model_forward, and the
// loss and the agreed scalars come back to the host; checkpoints are the same files as on the CPU,
// so either device resumes the other's.
#pragma once
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/trainer_state.h"
#include "data/loader.h"
#include "train/train_config.h"

namespace zaya {

namespace dist {
class Group;
}
class Model;

struct TrainSummary {
  int64_t steps_done = 0, skipped = 0;  // steps_done: the step the run ended at
  int64_t rollbacks = 0;  // back to a checkpoint after anomalies in a row (their steps redone)
  double first_loss = 0, last_loss = 0;
  double first_val_loss = NAN, last_val_loss = NAN;  // NaN: not evaluated (see val_status)
  std::string val_status;  // why there is no validation loss; empty when there is one
  double seconds = 0;
  // The newest checkpoint the run wrote (or resumed from, when it wrote none); "" when there is
  // none. Its model/ is the trained model.
  std::string checkpoint;
  int stop_signal = 0;            // SIGINT or SIGTERM when one stopped the run (stop_signal.h)
  bool already_finished = false;  // resumed at step ≥ train.steps: no step to run
};

struct TrainOptions {
  bool quiet = false;
  // Stop (with a checkpoint) once this step is done, as if interrupted; −1: run to train.steps.
  int64_t stop_at_step = -1;
  // The ranks of a data-parallel run (collective: every rank calls run_training); null: this
  // process alone.
  dist::Group* group = nullptr;
};

// One optimizer step's outcome (the same on every rank).
struct StepResult {
  int64_t step = 0;  // 1-based: the step just done
  double loss = 0, grad_norm = 0, lr = 0;
  bool skipped = false;
  // A stop signal some rank received before the step's agreed all-reduce (SIGTERM if any rank
  // got one, else SIGINT; 0: none): every rank stops after this step.
  int stop_signal = 0;
  int64_t tokens = 0;  // scored tokens of the global batch
  double seconds = 0;  // wall time of train_step
  double expert_load_entropy = 1;
};

class Trainer {
 public:
  // Collective. Builds or resumes the run; throws zaya::Error for bad configs, data or
  // checkpoints.
  Trainer(const TrainConfig& cfg, const TrainOptions& opt);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  bool done() const;  // all steps done, or stopped (opt.stop_at_step, a stop signal)
  // Collective: one optimizer step over the next global batch.
  StepResult train_step();
  // Collective: the step's metrics line and log line, then evaluation, sample and checkpoint when
  // due.
  void after_step(const StepResult& r);
  // Waits for background checkpoint writes; the run's summary.
  TrainSummary finish();

  const TrainerState& state() const;
  const Model& model() const;
  // The saved activations' storage ("fp32" | "bf16": train.activations resolved) and bytes.
  const char* activation_storage() const;
  size_t activation_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Trainer(cfg, opt); train_step + after_step until done; finish().
TrainSummary run_training(const TrainConfig& cfg, const TrainOptions& opt);

}  // namespace zaya
