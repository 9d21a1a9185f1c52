// Stage 1 of the CCA conv on the GPU (docs/model.md §4.2), shared by cca_conv_forward (ops/gpu/cca_conv.cu)
// and the decode step's prefill chunks (ops/gpu/cca_conv_step.cu). Device pointers, on stream().
#pragma once
#include <cstdint>

namespace zaya::ops::gpu {

// z[B·T, C] = b1 + Σ_i w1[c,i,0]·y_{t−1}[g·d+i] + w1[c,i,1]·y_t[g·d+i], g = ⌊c/d⌋, from the
// stage-0 output y[B, T+1, C] (row r = position r−1). w1[C,d,2] F32, or BF16 as raw bits.
void cca_stage1_forward(float* z, const float* y, const float* w1, const float* b1, int64_t B,
                        int64_t T, int64_t C, int64_t d);
void cca_stage1_forward(float* z, const float* y, const uint16_t* w1, const float* b1, int64_t B,
                        int64_t T, int64_t C, int64_t d);

}  // namespace zaya::ops::gpu
