// SwiGLU's middle on the CPU, one row at a time: η = SiLU(g) ⊙ u and its backward, shared by the
// experts (moe.cpp) and the decoder's silu_mul (activation.cpp), so that both give the same bits.
//
// SiLU(g) = g·σ(g), σ(g) = 1/(1 + e^−g). In f32 e^x is exp_vec's (exp_vec.h, ≤ 1.5 ulp) on whole
// SIMD vectors (attn::exp_simd, the same operations lane by lane) and on the tail, so the loops
// vectorise; in f64 (the tests' reference precision) it is libm's exp.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/cpu/attention_simd.h"
#include "ops/cpu/exp_vec.h"

namespace zaya::ops::cpu {

namespace swiglu_detail {

// σ(z) of a scalar; e^−z clamps at e^88 for z < −88 (σ ≈ 6e−39) and is 0 for z > 87 (σ = 1).
template <class T>
inline T sigmoid(T z) {
  if constexpr (std::is_same_v<T, float>) {
    return 1.0f / (1.0f + exp_vec(-z));
  } else {
    return T(1) / (T(1) + std::exp(-z));
  }
}

// σ of a vector of floats, lane by lane the scalar's operations.
inline attn::Simd<float>::vec sigmoid(attn::Simd<float>::vec z) {
  const auto one = attn::splat(1.0f);
  return one / (one + attn::exp_simd<float>(-z));
}

}  // namespace swiglu_detail

// act[j] = SiLU(g[j]) · u[j] for j < H.
template <class T>
inline void swiglu_row(T* act, const T* g, const T* u, int64_t H) {
  using swiglu_detail::sigmoid;
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    constexpr int64_t L = attn::kLanes<float>;
    for (; j + L <= H; j += L) {
      const auto z = attn::load(g + j);
      attn::store(act + j, z * sigmoid(z) * attn::load(u + j));
    }
  }
  for (; j < H; ++j) act[j] = g[j] * sigmoid(g[j]) * u[j];
}

// The backward of swiglu_row: dg = dη·u·SiLU'(g) with SiLU'(g) = σ(1 + g(1 − σ)), du = dη·SiLU(g).
template <class T>
inline void swiglu_backward_row(T* dg, T* du, const T* dact, const T* g, const T* u, int64_t H) {
  using swiglu_detail::sigmoid;
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    constexpr int64_t L = attn::kLanes<float>;
    const auto one = attn::splat(1.0f);
    for (; j + L <= H; j += L) {
      const auto z = attn::load(g + j), d = attn::load(dact + j), s = sigmoid(z);
      attn::store(dg + j, d * attn::load(u + j) * s * (one + z * (one - s)));
      attn::store(du + j, d * z * s);
    }
  }
  for (; j < H; ++j) {
    const T z = g[j], s = sigmoid(z);
    dg[j] = dact[j] * u[j] * s * (T(1) + z * (T(1) - s));
    du[j] = dact[j] * z * s;
  }
}

}  // namespace zaya::ops::cpu
