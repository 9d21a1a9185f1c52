// The SIMD vector of the CPU attention kernels (attention.cpp, attention_gemm.h) and e^x on it.
//
// The vector is the machine's widest (GCC/Clang vector extension): 64 bytes with AVX-512 (32
// registers), else 32 bytes (AVX2: 16 registers). exp_simd works on whole vectors, so the
// softmax loops vectorise whatever the compiler's if-conversion does (GCC 12 keeps exp_vec.h's
// selects scalar on AVX2, where there are no masked operations).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/cpu/exp_vec.h"

namespace zaya::ops::cpu::attn {

#if defined(__AVX512F__)
inline constexpr int kVecBytes = 64, kVecRegs = 32;
#else
inline constexpr int kVecBytes = 32, kVecRegs = 16;
#endif

template <class T>
struct Simd {
  typedef T vec __attribute__((vector_size(kVecBytes)));
  static constexpr int kLanes = kVecBytes / int(sizeof(T));
};
template <class T>
inline constexpr int64_t kLanes = Simd<T>::kLanes;

template <class T>
inline typename Simd<T>::vec load(const T* p) {
  typename Simd<T>::vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <class T>
inline void store(T* p, typename Simd<T>::vec v) {
  std::memcpy(p, &v, sizeof(v));
}
template <class T>
inline typename Simd<T>::vec splat(T x) {
  return typename Simd<T>::vec{} + x;
}

// e^x lane by lane. F32: the operations of exp_vec(float) (exp_vec.h) on vectors, the same bits:
// Cody–Waite reduction, the Cephes polynomial (≤ 1.5 ulp), 2ⁿ through the exponent bits;
// x < −87 → 0 (covers −inf, masked scores), clamped at 88, NaN propagates. F64: libm's exp.
template <class T>
inline typename Simd<T>::vec exp_simd(typename Simd<T>::vec x) {
  using V = typename Simd<T>::vec;
  if constexpr (std::is_same_v<T, float>) {
    typedef int32_t I __attribute__((vector_size(kVecBytes)));
    const V lo = splat(-87.0f), hi = splat(88.0f);
    V xc = lo < x ? x : lo;  // std::max(−87, x): NaN → −87 (no UB in the int conversion)
    xc = hi < xc ? hi : xc;
    V n;
    const V p = exp_reduced(xc, n);
    const V two_n = (V)((__builtin_convertvector(n, I) + 127) << 23);
    const V y = p * two_n;
    return x < lo ? V{} : (x == x ? y : x);
  } else {
    V y;
    for (int l = 0; l < Simd<T>::kLanes; ++l) y[l] = std::exp(x[l]);
    return y;
  }
}

}  // namespace zaya::ops::cpu::attn
