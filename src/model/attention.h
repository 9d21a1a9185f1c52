// One CCA attention sub-layer (docs/model.md §4) as explicit op calls: forward saves into
// AttentionActs, backward runs the same ops in strict reverse order (§8.5). Sub-layer i attends
// within its sliding window, attention_keys(c, i) (model/attention_window.h; 0 = full causal),
// with the RoPE tables of its θ, c.rope_theta_of(i), which the caller passes.
#pragma once
#include "io/zaya_config.h"
#include "model/activations.h"
#include "model/weights.h"

namespace zaya {

// Partial RoPE tables cos/sin [T, r/2] F32 (ops::rope_tables) of one θ.
struct RopeTables {
  Tensor cos, sin;
};

// o[N,D] = CCA(x[N,D]) of sub-layer i.
void attention_layer_forward(const ZayaConfig& c, int64_t i, const AttentionWeights& w,
                             AttentionActs& a, const RopeTables& rope, const Tensor& x,
                             const Tensor& o);
// dx[N,D] = (overwrite) gradient of the input; parameter gradients accumulate into dw.
void attention_layer_backward(const ZayaConfig& c, int64_t i, const AttentionWeights& w,
                              const AttentionWeights& dw, const AttentionActs& a,
                              BackwardScratch& g, const RopeTables& rope, const Tensor& x,
                              const Tensor& dout, const Tensor& dx);

}  // namespace zaya
