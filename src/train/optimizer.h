// The optimizer of a training step (docs/training.md): global-norm clipping, Muon for the 2-D
// hidden matrices, AdamW for the rest, and the separate AdamW of the balancing biases
// (docs/model.md §10).
//
// Grouping by ParamKind (model/param_layout.h):
//   Matrix, Expert → Muon (each expert's fc1 [F,D] / fc2 [D,F/2] is its own matrix), decayed;
//   Embedding      → AdamW, decayed (it is a matrix: "weight decay only on matrices");
//   Vector, Conv   → AdamW, no decay (conv weights are 3-D kernels, not matrices: our choice);
//   Buffer         → never touched by step(); update_balancing_biases moves the real experts'
//                    entries of each balancing_biases (the skip entry stays as stored).
// With use_muon = false every trainable parameter uses AdamW (Matrix/Expert decayed).
//
// ZeRO-1 (train/zero_plan.h): the optimizer belongs to a dist::Group. Each rank holds the state of
// the parameters it owns only (whole Muon matrices, a slice of the AdamW tensors) plus a copy of
// the tiny balancing-bias state. A step is: reduce_gradients (the gradients of all ranks summed
// into each owner's shard by one reduce-scatter per bucket of the padded flat bucket buffer, the
// global norm from an all-reduce of the shards' sums of squares) → update (clip, Muon/AdamW on the
// owned shard, one all-gather per bucket so every rank holds all parameters). With the single
// group (size 1) this is the one process step: the same code, the collectives are copies.
//
// Overlap: the trainer passes gradients_ready as model_backward's layer hook on the last
// micro-batch, so each bucket's reduce-scatter starts (dist::Group::start_reduce_scatter) as soon
// as the backward has finished its layers, while the rest of the backward runs; reduce_gradients
// then starts any bucket not started yet and waits for all. The same collectives on the same
// buffers either way: the same bits with or without the hook.
//
// Device: the state, the bucket, the shard and Muon's scratch live on the model's device (one
// allocation each), and every update, pack and unpack is an op on it; the group's collectives then
// move device buffers (the single group copies on any device; the MPI group takes host buffers
// only). The balancing-bias counts come from the host: on a GPU they are copied over first.
//
// Non-finite steps: step() returns the pre-clip global gradient norm (the same on every rank).
// When it is NaN/Inf the weights, the optimizer state and the step count are left untouched, so
// the caller detects a skipped step with !std::isfinite(returned norm), counts it and skips
// update_balancing_biases for that step too. A non-finite loss is the caller's to check (and to
// agree on across ranks) before calling update().
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/arena.h"
#include "io/zaya_config.h"
#include "model/activations.h"
#include "model/model.h"
#include "ops/ops.h"
#include "train/balance.h"
#include "train/optim_config.h"
#include "train/zero_plan.h"

namespace zaya::dist {
class Group;
class Pending;
}  // namespace zaya::dist

namespace zaya {

class Optimizer {
 public:
  // Collective: every rank of `group` builds one for the same model layout and config. The group
  // must outlive the optimizer.
  Optimizer(const Model& m, const OptimConfig& cfg, dist::Group& group);
  // One process: a single group of its own.
  Optimizer(const Model& m, const OptimConfig& cfg);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Collective. Sums m.grads() over the ranks into this rank's shard and returns the global
  // pre-clip gradient norm (NaN/Inf when any gradient on any rank is non-finite).
  double reduce_gradients(const Model& m);
  // Collective (every rank, in the same order). model_backward has finished `layer` (its
  // LayerDone hook): the buckets whose gradients are now final are packed and their
  // reduce-scatters started; started ones are progressed. Only on the step's last backward.
  void gradients_ready(const Model& m, int64_t layer);
  // Collective. With the finite norm that the last reduce_gradients returned: clips the shard to
  // optim.grad_clip by it (the one gradient clipping), updates this rank's parameters with
  // learning rate lr and all-gathers them into m.params() on every rank; increments the step
  // count.
  void update(Model& m, double lr, double grad_norm) { update(m, lr, grad_norm, false); }
  // With defer_gathers (the trainer) update() returns with the all-gathers of the parameters
  // still in flight (each bucket's started as soon as its part of the update was done): the next
  // forward's LayerStart hook calls parameters_needed, which finishes those the layer reads, so
  // they overlap the forward; finish_update finishes all of them. Until then the parameters of
  // other ranks' shards are the old ones: anything else that reads them (evaluation, a
  // checkpoint, a rollback) must call finish_update first.
  void update(Model& m, double lr, double grad_norm, bool defer_gathers);
  void parameters_needed(Model& m, int64_t layer);  // model_forward's LayerStart numbering
  void finish_update(Model& m);
  // reduce_gradients, then update unless the norm is non-finite; returns the norm.
  double step(Model& m, double lr);

  // Balancing-bias update from per-layer class counts over the global batch (counts[layer index]
  // = the K class counts of that MoE sub-layer, summed over micro-batches and ranks; only MoE
  // layers present) — docs/model.md §10. Local: every rank applies the same update to its copy. Has
  // its own step count for the bias corrections (one per call that updates something).
  void update_balancing_biases(Model& m, const RoutingCounts& counts);

  // The global optimizer state (independent of the number of ranks) is, in layout order,
  // "<param>.muon_momentum" or "<param>.adam_m" + "<param>.adam_v" per trainable parameter,
  // "<buffer>.adam_m/v" [real experts] for the bias AdamW, and "balance.steps" [2] = the
  // bias-update count as (count / 2^24, count mod 2^24), exact in F32.
  // What this rank writes to a checkpoint: its owned slices (and, on rank 0 only, the replicated
  // balancing state), as views into the optimizer's memory.
  OptimizerShard state_to_save();
  // What this rank restores from a checkpoint: its owned slices and the balancing state.
  OptimizerShard state_to_load();
  // state_to_load() as named views, in layout order (at one rank: every tensor whole, shaped).
  std::vector<std::pair<std::string, Tensor>> state_tensors();

  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  size_t state_bytes() const { return state_.size(); }  // this rank's
  size_t total_state_bytes() const;                     // one process's (replicated state once)
  const OptimConfig& config() const { return cfg_; }
  const ZeroPlan& plan() const { return plan_; }
  // This rank's buffers as allocated, in bytes (the start-up memory line; zaya plan's figures
  // are checked against it, docs/plan.md).
  struct Memory {
    size_t state = 0, bucket = 0, shard = 0, scratch = 0;
  };
  Memory memory() const { return {state_.size(), bucket_.size(), shard_.size(), scratch_.size()}; }
  // Bytes of the buffers handed to the ZeRO-1 collectives since construction: the whole
  // world·chunk region of each bucket, the reduce-scatter's send and the all-gather's receive.
  uint64_t reduce_scatter_bytes() const { return reduce_scatter_bytes_; }
  uint64_t all_gather_bytes() const { return all_gather_bytes_; }

 private:
  enum class Rule { Muon, AdamW, Balance };
  struct Piece {  // one owned segment of the plan, or one balancing-bias buffer
    size_t spec;  // index into the model's layout
    Rule rule;
    bool decay;        // weight decay applies
    int64_t begin, n;  // elements [begin, begin + n) of the tensor (Balance: the real experts)
    int64_t shard;     // offset in the shard (Muon/AdamW)
    int64_t at;        // offset in the bucket buffer (Muon/AdamW; with several ranks)
    size_t bucket;     // its plan bucket (Balance: buckets.size())
    size_t s0, s1;     // state offsets (elements): momentum / m, and v
  };
  OptimConfig cfg_;
  std::unique_ptr<dist::Group> own_group_;  // the single group of the one-process constructor
  dist::Group& group_;
  ParamLayout layout_;  // copy: names, shapes and offsets of the model's arenas
  ZeroPlan plan_;
  std::vector<Piece> pieces_;  // owned pieces in shard order, then the Balance buffers
  Device device_;              // the model's: every buffer below lives there
  Buffer state_;               // F32 optimizer state of this rank, one allocation
  Buffer bucket_;              // F32 [world·chunk]: gradients out, parameters back (none alone)
  Buffer shard_;               // F32 [chunk]: this rank's summed gradients (none alone)
  // Alone: the layout ranges [offset, offset + length) the owned pieces cover, adjacent pieces
  // merged (the gradient norm's sums: one per run, few on any model).
  std::vector<std::pair<int64_t, int64_t>> grad_runs_;
  Buffer scratch_;  // F32: Muon's u / O, sized for the largest owned matrix
  Buffer counts_;   // F64 [largest K]: a layer's routing counts (GPU only)
  std::vector<std::vector<ops::CopySegment>> pack_;    // per bucket: gradients → bucket buffer
  std::vector<std::vector<ops::CopySegment>> unpack_;  // per bucket: the others' segments out
  std::vector<size_t> bucket_first_;  // owned pieces of bucket b: [first[b], first[b + 1])
  // The last update's all-gathers (bucket, pending) in the order started; [0, gathered_) done.
  std::vector<std::pair<size_t, std::unique_ptr<dist::Pending>>> gathers_;
  size_t gathered_ = 0;
  std::vector<std::unique_ptr<dist::Pending>> pending_;  // this step's started reduce-scatters
  int64_t shard_used_ = 0;  // the shard's elements up to this rank's last owned one
  size_t balance_steps_offset_ = 0;
  int64_t steps_ = 0;
  uint64_t reduce_scatter_bytes_ = 0, all_gather_bytes_ = 0;
  float* state() const { return static_cast<float*>(state_.data()); }
  float* bucket() const { return static_cast<float*>(bucket_.data()); }
  // One rank alone: no bucket and no shard. The update reads the model's gradients in place (no
  // pack, no reduce-scatter, no all-gather of the parameters back: they were updated in place).
  bool alone() const;
  float* shard() const { return static_cast<float*>(shard_.data()); }
  // Piece p's gradient (count·p.n elements): in the shard, or in the model's arena when alone.
  Tensor grad_of(const Model& m, const Piece& p, int64_t n) const;
  // n floats at p, memory of device_ (the optimizer's buffers and the model's arenas).
  Tensor flat(float* p, int64_t n) const { return Tensor(p, {n}).on(device_); }
  Tensor bucket_all() const { return flat(bucket(), plan_.bucket_elements()); }
  // Bucket b of the bucket buffer (world·chunk) and this rank's chunk of it in the shard.
  Tensor bucket_region(size_t b) const;
  Tensor shard_chunk(size_t b) const;
  Tensor bucket_chunk(size_t b) const;     // this rank's chunk of bucket b in the bucket buffer
  void start_bucket(const Model& m);       // the next bucket's pack and reduce-scatter
  void unpack_bucket(Model& m, size_t k);  // gathers_[k]: wait, then the parameters out
  int64_t balance_steps() const;
  void set_balance_steps(int64_t s);
  OptimizerShard state_shard(bool with_replicated);
  Optimizer(const Model& m, const OptimConfig& cfg, std::unique_ptr<dist::Group> own_group,
            dist::Group* group);
};

}  // namespace zaya
