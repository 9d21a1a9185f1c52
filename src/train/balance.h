// The routing counts behind the balancing-bias update (docs/model.md §10, docs/training.md):
// once per optimizer step, per MoE sub-layer, the error e_i = c_i/N_tok − 1/n over the n real
// experts (c_i: tokens of the global batch that chose expert i, N_tok: all routed tokens including
// skips) is the gradient of a separate AdamW on the real experts' biases (ops::balance_update,
// called by Optimizer::update_balancing_biases). The skip class's bias is never touched.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "io/zaya_config.h"
#include "model/activations.h"

namespace zaya {

// The class counts of every MoE sub-layer of a step, in one flat host buffer of F64 (exact
// integers) so that one all-reduce sums them over the ranks in place: layer i's K classes start at
// offset(i). Summed over a step's micro-batches by add(). For activations on a GPU (device Gpu)
// the counting runs there into a device copy of the buffer, which to_host() brings to the host
// (once per step: add() does not synchronise).
class RoutingCounts {
 public:
  explicit RoutingCounts(const ZayaConfig& c, Device device = Device::Cpu);
  void clear();
  // Adds the chosen classes of one forward pass (MoeActs.choice of every MoE sub-layer); the
  // activations must live on the device given at construction.
  void add(const ZayaConfig& c, const Activations& a);
  // The sums of every add() since clear() into the host buffer that layer() and flat() read (a
  // copy from the device, waiting for it; nothing to do on the CPU). Call before reading them.
  void to_host();
  // Layer i's K class counts; empty for an attention sub-layer.
  std::span<const double> layer(int64_t i) const;
  std::span<double> layer(int64_t i);
  std::span<double> flat() { return counts_; }  // every layer's, for the reduction
  std::span<const double> flat() const { return counts_; }

 private:
  std::vector<int64_t> offset_, size_;  // per sub-layer (size 0: attention)
  std::vector<double> counts_;
  Device device_;
  Buffer device_counts_;  // F64, counts_'s size: the running sums on a GPU (empty on the CPU)
};

// The mean over MoE sub-layers of the normalised entropy of the real experts' token shares (1 =
// an even load, 0 = one expert takes every token): the step line's expert_entropy.
double expert_load_entropy(const ZayaConfig& c, const RoutingCounts& counts);

}  // namespace zaya
