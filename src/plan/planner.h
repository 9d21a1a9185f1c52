// `zaya plan` (docs/plan.md): what a ZeRO-1 training run needs and gives on a cluster it cannot
// be tried on. Memory per GPU, the step time, throughput, checkpoint sizes and stalls, and the
// checkpoint interval that maximises goodput for a failure rate.
//
// Two kinds of figure, kept apart:
// - Byte figures zaya itself reports for a run (the start-up memory line, the first step's ZeRO-1
//   collective line, the checkpoint manifest): computed here from the same plan the trainer
//   builds (make_zero_plan, Activations::bytes_needed, the safetensors writers' size functions),
//   so for a run that fits here they equal what the run reports (tests/cli/test_plan*.cpp).
// - Everything else (workspace, times, goodput) comes from stated assumptions (the MFU, the
//   cluster's peak rates, the MTBF, the restart cost) and the formulas of docs/plan.md, each a
//   function below so that it can be checked by hand.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/zaya_config.h"
#include "model/inspect.h"
#include "plan/cluster.h"
#include "train/train_config.h"

namespace zaya {

// How the ZeRO-1 collectives are modelled: none (one rank), a flat ring over every rank, or
// hierarchical (inside each node, then across the nodes along the rails).
enum class CollectiveAlgorithm { None, Ring, Hierarchical };
template <>
struct EnumWords<CollectiveAlgorithm> {
  static constexpr std::pair<CollectiveAlgorithm, std::string_view> words[] = {
      {CollectiveAlgorithm::None, "none"},
      {CollectiveAlgorithm::Ring, "ring"},
      {CollectiveAlgorithm::Hierarchical, "hierarchical"}};
};

struct PlanInput {
  // The run as `zaya train` would take it (the keys docs/plan.md lists are read: data.seq_len,
  // train.micro_batch, grad_accum, steps, precision, activations, optim.use_muon,
  // muon_ns_steps, muon_bf16, zero_bucket_mb, checkpoint.every, async, layout).
  TrainConfig train;
  ZayaConfig model;  // the architecture, in checkpoint.layout's semantics
  Cluster cluster;
  double mfu = 0.4;             // of the cluster's peak, for the model's and Muon's FLOPs
  double mtbf_hours = 24;       // mean time between failures of the whole job
  double restart_minutes = 10;  // from a failure to training again (relaunch, load, warm-up)
  double reserve_gb = 4;        // per GPU: runtime, communicator and allocator overheads
};

// --- the formulas (docs/plan.md), seconds and bytes ---

// A ring reduce-scatter or all-gather of a `bytes` buffer over n ranks at `bytes_per_s` per rank
// and direction: each rank sends (and receives) (n − 1)/n of the buffer.
double ring_seconds(double bytes, int64_t n, double bytes_per_s);
// Hierarchical: a ring inside each node over the whole buffer, then a ring across the nodes
// along each rail over the node's 1/per_node share of it.
double hierarchical_seconds(double bytes, int64_t nodes, int64_t per_node, double intra_bytes_per_s,
                            double net_bytes_per_s);
// Young: the interval between checkpoints that maximises goodput to first order, √(2δM).
double young_interval(double delta, double mtbf);
// Daly's higher-order estimate: √(2δM)·(1 + ⅓√(δ/2M) + (δ/2M)/9) − δ for δ < 2M, else M.
double daly_interval(double delta, double mtbf);
// Fraction of wall time that trains, with tau seconds of steps between checkpoints that each stall
// delta seconds, a restart cost R and one failure every M seconds (each losing R and on average
// half a period): τ/(τ+δ) · (1 − (R + (τ+δ)/2)/M), at least 0.
double goodput(double tau, double delta, double restart, double mtbf);

// Bytes one rank holds (the byte figures the trainer's start-up line reports).
struct RankMemory {
  uint64_t weights = 0, gradients = 0, optimizer_state = 0, bucket = 0, shard = 0, muon_scratch = 0,
           activations = 0;
  uint64_t total() const {
    return weights + gradients + optimizer_state + bucket + shard + muon_scratch + activations;
  }
};

struct Plan {
  PlanInput in;
  int64_t ranks = 1;
  int64_t global_rows = 0, tokens_per_step = 0;
  ModelFacts facts;
  double flops_per_token = 0;  // 3 × the forward's (the trainer's MFU numerator)

  // Memory per GPU: each component the largest over the ranks (as the trainer reports them).
  RankMemory memory;
  int64_t head_block_rows = 0;  // the GPU LM head's logits block
  uint64_t workspace = 0;       // estimate: that block + the reserve
  uint64_t capacity = 0;
  bool fits = false;
  // The ZeRO bucket's zero padding (bytes): each bucket is ranks × its largest rank's share, so a
  // bucket of fewer large Muon matrices than ranks is mostly padding (docs/zero1.md).
  uint64_t bucket_padding = 0;
  // When the padding is over a quarter of the bucket and optim.zero_bucket_mb is not 0: the
  // smallest optim.zero_bucket_mb (doubling from the setting; 0 = one bucket, the last resort)
  // whose padding is at most a quarter, and that bucket's bytes and padding; -1 when no suggestion
  // is made.
  double suggested_bucket_mb = -1;
  uint64_t suggested_bucket = 0, suggested_padding = 0;

  // ZeRO-1 collectives of one step (buffer bytes per rank, as the trainer reports them).
  int64_t buckets = 0;
  uint64_t reduce_scatter_bytes = 0, all_gather_bytes = 0;
  uint64_t embedding_bucket_bytes = 0;  // the last reduced and the first gathered
  double ring_sent_per_rank = 0;        // per collective: (ranks − 1)/ranks of the buffer
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::None;
  double rs_s = 0, ag_s = 0, rs_exposed_s = 0, ag_exposed_s = 0;

  // Step time and throughput.
  double compute_s = 0, muon_flops = 0, optimizer_s = 0, step_s = 0;
  double tokens_per_s = 0, days_per_trillion = 0;

  // Checkpoints: the files the writer produces (the manifest's sizes).
  std::vector<std::pair<std::string, uint64_t>> model_files;  // model/ weights file(s)
  bool model_files_exact = true;      // false for the native layout (tensor data only)
  std::vector<uint64_t> shard_bytes;  // optimizer/optimizer_rankR.safetensors, per rank
  uint64_t rank0_bytes = 0, largest_rank_bytes = 0, total_bytes = 0;
  double write_s = 0, snapshot_s = 0;  // through the file system; the async copy to the host
  int64_t interval_steps = 0;          // checkpoint.every as the trainer resolves it
  double interval_stall_s = 0, interval_goodput = 0;
  double young_s = 0, daly_s = 0;
  int64_t best_steps = 0;
  double best_stall_s = 0, best_goodput = 0;
};

// Throws zaya::Error for settings the planner cannot model (naming the flag or key).
Plan make_plan(const PlanInput& in);
nlohmann::ordered_json plan_json(const Plan& p);
std::string plan_text(const Plan& p);

}  // namespace zaya
