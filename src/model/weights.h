// The training views of one parameter-shaped F32 arena (the weights, or their gradients: same
// layout, other base pointer): bind_params' per-tensor views (param_views.h), with what one GEMM
// reads packed into one view — q ‖ k, v1 ‖ v2, and all experts' fc1 / fc2 of a layer, which the
// layout keeps adjacent.
// Shapes: D model, V vocab, C conv channels, d head, Hq/Hk heads, R router, K classes,
// E experts, F expert first-projection width.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "model/param_layout.h"
#include "model/param_views.h"

namespace zaya {

struct AttentionWeights {
  Tensor wqk;      // [C, D] linear_q ‖ linear_k
  Tensor wv;       // [Hk·d, D] val_proj1 ‖ val_proj2
  Tensor conv0_w;  // [C, 1, 2]
  Tensor conv0_b;  // [C]
  Tensor conv1_w;  // [C, d, 2]
  Tensor conv1_b;  // [C]
  Tensor temp;     // [Hk]
  Tensor wo;       // [D, Hq·d]
};

struct MoeWeights {
  Tensor down_w, down_b;  // [R, D], [R]
  Tensor eda_scale;       // [R] γ, undefined when this layer has none
  Tensor norm_w;          // [R]
  Tensor m1_w, m1_b;      // [R, R], [R]
  Tensor m2_w, m2_b;      // [R, R], [R]
  Tensor m3_w;            // [K, R]
  Tensor biases;          // [K] balancing biases (buffer)
  Tensor fc1;             // [E, F, D]
  Tensor fc2;             // [E, D, F/2]
};

struct LayerWeights {
  Tensor input_norm;  // [D]
  ResScale res;
  AttentionWeights attn;  // bound for attention sub-layers
  MoeWeights moe;         // bound for MoE sub-layers
};

struct ModelWeights {
  Tensor embed;  // [V, D]
  std::vector<LayerWeights> layers;
  ResScale final_res;
  Tensor final_norm;  // [D]
};

// Views into `base` (F32, layout.total elements, on `device`) following `layout`.
ModelWeights bind_weights(const ZayaConfig& c, const ParamLayout& layout, float* base,
                          Device device = Device::Cpu);

}  // namespace zaya
