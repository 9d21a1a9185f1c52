// e^x in float without libm, so loops over it vectorise (shared by the CPU attention kernels).
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

namespace zaya::ops::cpu {

// The core of exp_vec for float or a float SIMD vector F: for xc in [−87, 88], x = n·ln2 + r
// (Cody–Waite, |r| ≤ ln2/2, n returned rounded to an integer value) and e^r by the Cephes expf
// polynomial (≤ 1.5 ulp); the caller scales by 2ⁿ.
template <class F>
inline F exp_reduced(F xc, F& n) {
  n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  F r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.0f;
}

// e^x: exp_reduced, then 2^n through the exponent bits. x < −87 → 0 (this covers −inf, masked
// scores); clamped at 88.
inline float exp_vec(float x) {
  const float xc = std::min(std::max(-87.0f, x), 88.0f);  // NaN → −87 (no UB in the int cast)
  float n;
  const float p = exp_reduced(xc, n);
  const float two_n = std::bit_cast<float>((int32_t(n) + 127) << 23);
  return x < -87.0f ? 0.0f : (x == x ? p * two_n : x);  // NaN propagates
}

}  // namespace zaya::ops::cpu
