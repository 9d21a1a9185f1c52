// One MoE sub-layer (docs/model.md §5): router (down-projection, EDA, RMSNorm, GELU MLP, biased
// top-1) and dropless expert dispatch; backward in strict reverse order (§8.6–§8.8).
#pragma once
#include "io/zaya_config.h"
#include "model/activations.h"
#include "model/weights.h"

namespace zaya {

// o[N,D] = MoE(x[N,D]); rprev[N,R] is the previous MoE layer's router state (undefined for the
// first MoE layer).
void moe_layer_forward(const ZayaConfig& c, const MoeWeights& w, MoeActs& a, const Tensor& x,
                       const Tensor& rprev, const Tensor& o);
// dx[N,D] overwritten. carry_in[N,R]: gradient reaching this layer's router state from the next
// MoE layer's EDA (undefined if none). carry_out[N,R] receives the gradient for rprev when this
// layer has an EDA scale (overwritten); returns whether it did.
bool moe_layer_backward(const ZayaConfig& c, const MoeWeights& w, const MoeWeights& dw,
                        const MoeActs& a, BackwardScratch& g, const Tensor& x, const Tensor& rprev,
                        const Tensor& dout, const Tensor& carry_in, const Tensor& carry_out,
                        const Tensor& dx);

}  // namespace zaya
