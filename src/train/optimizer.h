// The optimizer of a training step (system.md §3): global-norm clipping, Muon for the 2-D hidden
// matrices, AdamW for the rest, and the separate AdamW of the balancing biases (spec §10).
//
// Grouping by ParamKind (model/param_layout.h):
//   Matrix, Expert → Muon (each expert's fc1 [F,D] / fc2 [D,F/2] is its own matrix), decayed;
//   Embedding      → AdamW, decayed (it is a matrix: "weight decay only on matrices");
//   Vector, Conv   → AdamW, no decay (conv weights are 3-D kernels, not matrices: our choice);
//   Buffer         → never touched by step(); update_balancing_biases moves the real experts'
//                    entries of each balancing_biases (the skip entry stays as stored, C3).
// With use_muon = false every trainable parameter uses AdamW (Matrix/Expert decayed).
//
// Non-finite steps: step() returns the pre-clip global gradient norm. When it is NaN/Inf the
// weights, the optimizer state and the step count are left untouched, so the caller detects a
// skipped step with !std::isfinite(returned norm), counts it and skips update_balancing_biases
// for that step too. A non-finite loss is the caller's to check before calling step().
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "io/zaya_config.h"
#include "model/activations.h"
#include "model/model.h"

namespace zaya {

struct OptimizerConfig {
  double lr = 3e-4;  // peak
  double weight_decay = 0.1;
  double adam_beta1 = 0.9, adam_beta2 = 0.95, adam_eps = 1e-8;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int muon_ns_steps = 5;
  bool muon_symmetric = true;
  double muon_rms_scale = 0.2;
  double grad_clip = 1.0;  // 0 = off
  double balance_lr = 1e-3, balance_beta1 = 0.9, balance_beta2 = 0.999, balance_eps = 1e-8;
  bool use_muon = true;  // false: AdamW for everything
};

class Optimizer {
 public:
  Optimizer(const Model& m, const OptimizerConfig& cfg);

  // Clips (returns the pre-clip global grad norm), applies Muon/AdamW with learning rate lr to
  // m.params() from m.grads(); increments the step count. Skips everything on a non-finite norm.
  double step(Model& m, double lr);

  // Balancing-bias update from per-layer class counts over the global batch (counts[layer index]
  // = the K class counts of that MoE sub-layer; only MoE layers present) — spec §10. Has its own
  // step count for the bias corrections (one per call that updates something).
  void update_balancing_biases(Model& m, const std::map<int64_t, std::vector<int64_t>>& counts);

  // All optimizer state as named F32 views into the optimizer's memory (for checkpoints: save
  // them, and restore by copying into the same views). Names: "<param>.muon_momentum",
  // "<param>.adam_m", "<param>.adam_v" ("<…>.balancing_biases.adam_m/v" for the bias AdamW) and
  // "balance.steps" [2] = the bias-update count as (count / 2^24, count mod 2^24), exact in F32.
  std::vector<std::pair<std::string, Tensor>> state_tensors();
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  size_t state_bytes() const { return state_.size(); }
  const OptimizerConfig& config() const { return cfg_; }

 private:
  enum class Rule { Muon, AdamW, Balance };
  struct Entry {
    size_t spec;  // index into the model's layout
    Rule rule;
    bool decay;      // weight decay applies
    size_t s0, s1;   // state offsets (elements): momentum / m, and v
    int64_t n_real;  // Balance: real experts
  };
  OptimizerConfig cfg_;
  ParamLayout layout_;  // copy: names, shapes and offsets of the model's arenas
  std::vector<Entry> entries_;
  Buffer state_;                // F32 optimizer state, one allocation
  std::vector<float> scratch_;  // Muon's u / O, sized for the largest matrix
  size_t balance_steps_offset_ = 0;
  int64_t steps_ = 0;
  float* state() const { return static_cast<float*>(state_.data()); }
  int64_t balance_steps() const;
  void set_balance_steps(int64_t s);
};

// ‖g‖₂ over all trainable gradients (grad_clip.h).
double global_grad_norm(const Model& m);

// Chosen-class counts per MoE sub-layer of one forward pass (balance.h); sum over micro-batches.
std::map<int64_t, std::vector<int64_t>> count_routing(const ZayaConfig& c, const Activations& a);

}  // namespace zaya
