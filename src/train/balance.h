// Balancing-bias update (spec zaya1-model.md §10, system.md §3): once per optimizer step, per MoE
// sub-layer, the error e_i = c_i/N_tok − 1/n over the n real experts (c_i: tokens of the global
// batch that chose expert i, N_tok: all routed tokens including skips) is the gradient of a
// separate AdamW on the real experts' biases. Over-used experts (e_i > 0) get lower biases; the
// skip class's bias is never touched (C3). Biases and moments are F32, the arithmetic double.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "io/zaya_config.h"
#include "model/activations.h"

namespace zaya {

// Per MoE sub-layer index: the count of each of its K router classes among the tokens of one
// forward pass (from MoeActs.choice). Sum these over micro-batches (and ranks) for a step.
std::map<int64_t, std::vector<int64_t>> count_routing(const ZayaConfig& c, const Activations& a);

struct BalanceParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // t ≥ 1, for the bias corrections
};

// One update of the n real-expert biases bias[0..n) from class counts[0..K) (K ≥ n; classes
// ≥ n, i.e. the skip class, count towards N_tok only). m, v: F32 [n]. No-op when N_tok = 0.
void balance_update(float* bias, float* m, float* v, const std::vector<int64_t>& counts, int64_t n,
                    const BalanceParams& p);

}  // namespace zaya
