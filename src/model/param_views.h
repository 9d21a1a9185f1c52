// ParamViews: one view per tensor of a ZAYA1 parameter set, bound from the layout by name in one
// place (bind_params). How a tensor is resolved is the caller's: a view of an F32 arena (training
// weights or gradients), of a file mapping in its stored dtype, or of an owned copy (inference).
// The training structs (weights.h) and the inference model (infer/infer_model.h) both come from
// here, so a new parameter is added to the layout (param_layout.cpp), a field below and its
// binding line, and then used at the op call sites.
// Shapes: D model, V vocab, C conv channels, d head, Hq/Hk heads, R router, K classes, E experts,
// F expert first-projection width (gate ‖ up).
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "io/zaya_config.h"
#include "model/param_layout.h"

namespace zaya {

struct ResScale {
  Tensor ao, bo;  // hidden_states_scale/bias [D]: applied to the previous mixer output
  Tensor ar, br;  // residual_scale/bias [D]: applied to the residual (undefined in sub-layer 0)
};

struct AttentionParams {
  Tensor wq, wk;                  // [Hq·d, D], [Hk·d, D]
  Tensor wv1, wv2;                // [Hk·d/2, D] each: current / previous token values
  Tensor wo;                      // [D, Hq·d]
  Tensor conv0_w, conv1_w;        // [C,1,2], [C,d,2]
  Tensor conv0_b, conv1_b, temp;  // [C], [C], [Hk]
};

struct MoeParams {
  Tensor down_w, m1_w, m2_w, m3_w;                       // [R,D], [R,R], [R,R], [K,R]
  Tensor down_b, eda_scale, norm_w, m1_b, m2_b, biases;  // [R] ×5 (eda_scale may be absent), [K]
  std::vector<Tensor> fc1, fc2;                          // per expert: [F, D], [D, F/2]
};

struct LayerParams {
  Tensor input_norm;  // [D]
  ResScale res;
  AttentionParams attn;  // bound for attention sub-layers
  MoeParams moe;         // bound for MoE sub-layers
};

struct ParamViews {
  Tensor embed;  // [V, D] (the tied LM head)
  std::vector<LayerParams> layers;
  ResScale final_res;
  Tensor final_norm;  // [D]
};

// The view of one tensor of the layout (called once per tensor, in layout order).
using ResolveParam = std::function<Tensor(const ParamSpec&)>;

ParamViews bind_params(const ZayaConfig& c, const ParamLayout& layout, const ResolveParam& resolve);

}  // namespace zaya
