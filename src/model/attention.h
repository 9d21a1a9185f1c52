// One CCA attention sub-layer (docs/model.md §4) as explicit op calls: forward saves into
// AttentionActs, backward runs the same ops in strict reverse order (§8.5).
#pragma once
#include "io/zaya_config.h"
#include "model/activations.h"
#include "model/weights.h"

namespace zaya {

// o[N,D] = CCA(x[N,D]).
void attention_layer_forward(const ZayaConfig& c, const AttentionWeights& w, AttentionActs& a,
                             const Tensor& rope_cos, const Tensor& rope_sin, const Tensor& x,
                             const Tensor& o);
// dx[N,D] = (overwrite) gradient of the input; parameter gradients accumulate into dw.
void attention_layer_backward(const ZayaConfig& c, const AttentionWeights& w,
                              const AttentionWeights& dw, const AttentionActs& a,
                              BackwardScratch& g, const Tensor& rope_cos, const Tensor& rope_sin,
                              const Tensor& x, const Tensor& dout, const Tensor& dx);

}  // namespace zaya
