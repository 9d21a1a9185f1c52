// BF16- and F16-weight kernels shared by the CPU ops (linear.cpp dispatches to linear_bf16_forward
// and linear_f16_forward, embedding.cpp widens gathered rows). bf16 is the top half of an f32, so
// widening is a 16-bit shift; f16 widens through F16C; both are exact; all arithmetic is f32.
#pragma once
#include <cstdint>

namespace zaya::ops::cpu {

// y[N,O] (+)= x[N,I] · w[O,I]ᵀ (+ b[O]), w bf16, everything else f32; b_O may be null. Bias and
// accumulate as the f32 linear: y = (accumulate ? y : 0) + b + x·wᵀ. w needs only 2-byte alignment.
void linear_bf16_forward(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O,
                         int64_t N, int64_t O, int64_t I, bool accumulate);

// The same for f16 weights (same regimes, same determinism).
void linear_f16_forward(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O,
                        int64_t N, int64_t O, int64_t I, bool accumulate);

// dst[n] = f32(src[n]) (exact).
void widen_bf16(float* dst, const uint16_t* src, int64_t n);
void widen_f16(float* dst, const uint16_t* src, int64_t n);

}  // namespace zaya::ops::cpu
