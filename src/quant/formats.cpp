// The block formats (formats.h): scalar quantizers and the exact dequantizers.
//
// Dequantizing follows GGML's formulas operation by operation in f32 (docs/quantization.md), so a
// block reads back to the same floats here, in the kernels and in llama.cpp. Every product in them
// is exact in f32: an f16 scale has 11 significant bits, and the sub-block scale and the level add
// at most 12 more (Q6_K: an int8 scale, 7 bits, times |q| ≤ 32, 5; IQ4_XS: ls − 32, 5 bits, times
// a table value, 7; Q5_K: 6 + 5), 23 in all. So the order of the multiplications does not matter,
// and the only rounding is the K types' subtraction d·sc·q − dmin·m, the same whether or not a
// compiler fuses it into a multiply-add: any kernel that computes these products exactly gets
// GGML's values.
//
// Quantizing searches, for every (sub-)block, the scale (and min) with the least weighted squared
// error: a grid of candidate scales, each refitted by least squares, as GGML's reference
// quantizers do, then polished (levels re-rounded to the best fit and refitted while that helps).
// Two more steps than GGML's, each lowering the error: values are rounded against the scale as it
// is stored (an f16, or a 6- or 8-bit multiple of one), not the unrounded one, and each
// sub-block's stored integer scale (and min) is chosen among its rounded value and the neighbours
// by the error it gives. The weights are GGML's (K types: the sub-block's RMS + |x|; Q6_K and
// IQ4_XS: x²), so the error is spread over the values as GGML spreads it. docs/quantization.md
// has the errors measured against GGML's.
//
// Errors: a non-finite value, or one too large for the type (beyond 65504, an f16's largest, times
// the largest level and sub-block scale; Q4_K and Q5_K: 65504·63, the largest min), throws
// zaya::Error naming its index; callers add the tensor's name.
#include "quant/formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "core/assert.h"
#include "quant/blocks.h"

namespace zaya::quant {
namespace {

// Round to nearest, ties to even (GGML rounds the same way), after clamping to [lo, hi].
inline int round_clamped(float v, int lo, int hi) {
  v = std::min(std::max(v, float(lo)), float(hi));
  return int(std::nearbyint(v));
}

inline float half(uint16_t h) {
  return f16_to_f32(h);
}

void check_finite(const float* x, int64_t n, int64_t base) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) fail("non-finite value at index {}", base + i);
}

// The largest magnitude block type t can hold: its largest level times the largest scale an f16
// and the packed sub-scales give. A value beyond it cannot be stored (its block's f16 scale would
// overflow); checking up front also keeps the squares of the searches far from f32's range.
double max_magnitude(DType t) {
  constexpr double h = 65504;
  switch (t) {
    case DType::Q8_0:
      return h * 127;
    case DType::Q4_0:
      return h * 8;
    case DType::Q5_0:
      return h * 16;
    case DType::Q4_K:
    case DType::Q5_K:
      return h * 63;  // a negative value's min: dmin·m, m ≤ 63 (the levels' side goes further)
    case DType::Q6_K:
      return h * 128 * 32;
    case DType::IQ4_XS:
      return h * 32 * 127;
    default:
      return std::numeric_limits<double>::infinity();
  }
}

void check_values(DType t, const float* x, int64_t n, int64_t base) {
  check_finite(x, n, base);
  const double lim = max_magnitude(t);
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(double(x[i])) > lim)
      fail("value {} at index {} is too large for {} (largest magnitude about {:.4g})", x[i],
           base + i, dtype_name(t), lim);
}

// The f16 of a block scale `d` computed from x[0, n); a scale too large for an f16 names the
// block's largest value.
uint16_t scale_half(float d, DType t, const float* x, int n, int64_t base) {
  const uint16_t h = f32_to_f16(d);
  if ((h & 0x7fffu) == 0x7c00u) {
    int at = 0;
    for (int i = 1; i < n; ++i)
      if (std::fabs(x[i]) > std::fabs(x[at])) at = i;
    fail("value {} at index {} is too large for {}: its block's scale {} exceeds an f16's 65504",
         x[at], base + at, dtype_name(t), d);
  }
  return h;
}

// ---- Q8_0, Q4_0, Q5_0: one f16 scale per 32 values, levels q in [qmin, qmax] ------------------

// Error of x ≈ d·q with q rounded against the stored scale d (q written to `q`).
float sym_levels(const float* x, int n, float d, int qmin, int qmax, int8_t* q) {
  float err = 0;
  if (d == 0) {
    for (int i = 0; i < n; ++i) {
      q[i] = 0;
      err += x[i] * x[i];
    }
    return err;
  }
  for (int i = 0; i < n; ++i) {
    q[i] = int8_t(round_clamped(x[i] / d, qmin, qmax));
    const float e = x[i] - d * float(q[i]);
    err += e * e;
  }
  return err;
}

// Chooses the f16 scale of one block: candidates map the largest magnitude to levels near qmin
// (and, for ntry == 0, only to ±qmax as Q8_0 does); each candidate and its least-squares refit
// are rounded to f16 and judged by the error of the levels rounded against them.
uint16_t sym_block(DType t, const float* x, int n, int qmin, int qmax, int ntry, int8_t* q,
                   int64_t base) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax == 0) {
    std::fill(q, q + n, int8_t(0));
    return 0;
  }
  int8_t tmp[kSuper];
  uint16_t best_h = 0;
  float best = std::numeric_limits<float>::infinity();
  // A scale and its refit; one that overflows an f16 is passed over (the first candidate, GGML's
  // choice, fits whenever the values pass check_values).
  auto try_scale = [&](float d) {
    const uint16_t h = f32_to_f16(d);
    if ((h & 0x7fffu) == 0x7c00u) return false;
    const float err = sym_levels(x, n, half(h), qmin, qmax, tmp);
    if (err < best) {
      best = err;
      best_h = h;
      std::copy(tmp, tmp + n, q);
    }
    return true;
  };
  auto consider = [&](float d) {
    if (!try_scale(d)) return;
    float sxq = 0, sqq = 0;  // the least-squares scale for the levels of d
    for (int i = 0; i < n; ++i) {
      sxq += x[i] * float(tmp[i]);
      sqq += float(tmp[i]) * float(tmp[i]);
    }
    if (sqq > 0 && sxq / sqq != d) try_scale(sxq / sqq);
  };
  const float first = ntry == 0 ? amax / float(qmax) : max / float(qmin);
  consider(first);
  for (int k = 1; k <= ntry; ++k) {
    consider(max / (float(qmin) - 0.1f * float(k)));
    consider(max / (float(qmin) + 0.1f * float(k)));
  }
  if (best_h == 0 && best == std::numeric_limits<float>::infinity())
    scale_half(first, t, x, n, base);  // throws: no candidate fits an f16
  return best_h;
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb, int64_t base) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    int8_t q[kBlock];
    y[b].d = sym_block(DType::Q8_0, x, kBlock, -127, 127, 0, q, base + b * kBlock);
    std::memcpy(y[b].qs, q, kBlock);
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb, int64_t base) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    int8_t q[kBlock];
    y[b].d = sym_block(DType::Q4_0, x, kBlock, -8, 7, 4, q, base + b * kBlock);
    for (int j = 0; j < kBlock / 2; ++j)
      y[b].qs[j] = uint8_t((q[j] + 8) | ((q[j + kBlock / 2] + 8) << 4));
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb, int64_t base) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock) {
    int8_t q[kBlock];
    y[b].d = sym_block(DType::Q5_0, x, kBlock, -16, 15, 4, q, base + b * kBlock);
    uint32_t qh = 0;
    for (int j = 0; j < kBlock / 2; ++j) {
      const int lo = q[j] + 16, hi = q[j + kBlock / 2] + 16;
      y[b].qs[j] = uint8_t((lo & 15) | ((hi & 15) << 4));
      qh |= uint32_t(lo >> 4) << j;
      qh |= uint32_t(hi >> 4) << (j + kBlock / 2);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

// ---- Q4_K, Q5_K: 8 sub-blocks of 32, y = (d·sc)·q − (dmin·m), q in [0, nmax] -----------------

// The least weighted-squared-error fit of x ≈ s·L − m (s ≥ 0, m ≥ 0, L in [0, nmax]) of one
// sub-block: a grid of inverse scales over the range [min(x, 0), max(x)], each with L rounded
// and (s, m) refitted by weighted least squares.
void fit_scale_min(const float* x, const float* w, int n, int nmax, float rmin, float rdelta,
                   int nstep, float* s_out, float* m_out) {
  float lo = x[0], hi = x[0], sw = 0, swx = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sw += w[i];
    swx += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {  // constant (or all-zero) sub-block: the min alone carries it
    *s_out = 0;
    *m_out = -lo;
    return;
  }
  auto error_of = [&](float s, float mn) {  // mn = −m, the value of level 0
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float l = float(round_clamped((x[i] - mn) / s, 0, nmax));
      const float d = s * l + mn - x[i];
      e += w[i] * d * d;
    }
    return e;
  };
  // The weighted least-squares (s, mn) for levels L(i); false when they do not determine them.
  auto refit = [&](auto&& level, float* s, float* mn) {
    float sl = 0, sll = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const float l = level(i);
      sl += w[i] * l;
      sll += w[i] * l * l;
      sxl += w[i] * l * x[i];
    }
    const float det = sw * sll - sl * sl;
    if (!(det > 0)) return false;
    *s = (sw * sxl - swx * sl) / det;
    *mn = (sll * swx - sl * sxl) / det;
    if (*mn > 0) {  // the min must not be positive (m ≥ 0): fit the scale alone
      *mn = 0;
      *s = sxl / sll;
    }
    return *s > 0;
  };
  float best_s = (hi - lo) / float(nmax), best_mn = lo;
  float best = error_of(best_s, best_mn);
  // The grid: level 0 at the best min so far (it starts at min(x, 0)), the top level near max(x).
  for (int k = 0; k <= nstep; ++k) {
    const float anchor = best_mn;
    const float iscale = (rmin + rdelta * float(k) + float(nmax)) / (hi - anchor);
    float s, mn;
    if (!refit([&](int i) { return float(round_clamped(iscale * (x[i] - anchor), 0, nmax)); }, &s,
               &mn))
      continue;
    const float e = error_of(s, mn);
    if (e < best) {
      best = e;
      best_s = s;
      best_mn = mn;
    }
  }
  // Polish: levels nearest to the best fit, refitted, while that helps.
  for (int it = 0; it < 3; ++it) {
    const float s0 = best_s, mn0 = best_mn;
    float s, mn;
    if (!refit([&](int i) { return float(round_clamped((x[i] - mn0) / s0, 0, nmax)); }, &s, &mn))
      break;
    const float e = error_of(s, mn);
    if (!(e < best)) break;
    best = e;
    best_s = s;
    best_mn = mn;
  }
  *s_out = best_s;
  *m_out = -best_mn;
}

// The levels and weighted error of one sub-block for stored factors ds = d·sc, dm = dmin·m.
float kq_levels(const float* x, const float* w, int n, float ds, float dm, int nmax, uint8_t* L) {
  float e = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = ds == 0 ? 0 : uint8_t(round_clamped((x[i] + dm) / ds, 0, nmax));
    const float r = ds * float(L[i]) - dm - x[i];
    e += w[i] * r * r;
  }
  return e;
}

// One Q4_K / Q5_K super-block: d, dmin, the packed 6-bit scales and mins, the levels L.
void quantize_k_super(DType t, const float* x, int nmax, float rmin, float rdelta, int nstep,
                      uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales, uint8_t* L,
                      int64_t base) {
  constexpr int nsub = kSuper / 32;
  float s[nsub], m[nsub], w[kSuper];
  float max_s = 0, max_m = 0;
  for (int j = 0; j < nsub; ++j) {
    const float* xs = x + 32 * j;
    float sx2 = 0;
    for (int i = 0; i < 32; ++i) sx2 += xs[i] * xs[i];
    const float av = std::sqrt(sx2 / 32);
    for (int i = 0; i < 32; ++i) w[32 * j + i] = av + std::fabs(xs[i]);
    fit_scale_min(xs, w + 32 * j, 32, nmax, rmin, rdelta, nstep, &s[j], &m[j]);
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, m[j]);
  }
  *d_out = scale_half(max_s / 63, t, x, kSuper, base);
  *dmin_out = scale_half(max_m / 63, t, x, kSuper, base);
  const float d = half(*d_out), dmin = half(*dmin_out);
  uint8_t ls[nsub], lm[nsub], tmp[32];
  for (int j = 0; j < nsub; ++j) {
    const float* xs = x + 32 * j;
    const int s0 = d > 0 ? round_clamped(s[j] / d, 0, 63) : 0;
    const int m0 = dmin > 0 ? round_clamped(m[j] / dmin, 0, 63) : 0;
    float best = std::numeric_limits<float>::infinity();
    for (int a = std::max(0, s0 - 1); a <= std::min(63, s0 + 1); ++a) {
      for (int b = std::max(0, m0 - 1); b <= std::min(63, m0 + 1); ++b) {
        const float e = kq_levels(xs, w + 32 * j, 32, d * float(a), dmin * float(b), nmax, tmp);
        if (e < best) {
          best = e;
          ls[j] = uint8_t(a);
          lm[j] = uint8_t(b);
          std::copy(tmp, tmp + 32, L + 32 * j);
        }
      }
    }
  }
  std::memset(scales, 0, 12);
  for (int j = 0; j < nsub; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = uint8_t((ls[j] & 15) | ((lm[j] & 15) << 4));
      scales[j - 4] |= uint8_t((ls[j] >> 4) << 6);
      scales[j] |= uint8_t((lm[j] >> 4) << 6);
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb, int64_t base) {
  for (int64_t b = 0; b < nb; ++b, x += kSuper) {
    uint8_t L[kSuper];
    quantize_k_super(DType::Q4_K, x, 15, -1.0f, 0.1f, 20, &y[b].d, &y[b].dmin, y[b].scales, L,
                     base + b * kSuper);
    for (int c = 0; c < 4; ++c)  // each 64-value chunk: low nibbles then high nibbles
      for (int l = 0; l < 32; ++l)
        y[b].qs[32 * c + l] = uint8_t(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb, int64_t base) {
  for (int64_t b = 0; b < nb; ++b, x += kSuper) {
    uint8_t L[kSuper];
    quantize_k_super(DType::Q5_K, x, 31, -0.5f, 0.1f, 15, &y[b].d, &y[b].dmin, y[b].scales, L,
                     base + b * kSuper);
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[b].qs[32 * c + l] = uint8_t((lo & 15) | ((hi & 15) << 4));
        y[b].qh[l] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

// ---- Q6_K: 16 sub-blocks of 16, y = (d·sc)·q, sc an int8, q in [−32, 31] ---------------------

// The weighted least-squares scale of one sub-block (signed: the largest magnitude maps near −32),
// over a grid of inverse scales each refitted.
float fit_scale_sym(const float* x, const float* w, int n, int nmax, int ntry) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax == 0) return 0;
  float best_s = 0, best = 0;  // best = sxl²/sll, the error reduction of the refitted scale
  for (int k = -ntry; k <= ntry; ++k) {
    const float iscale = -(float(nmax) + 0.1f * float(k)) / max;
    float sxl = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      const float l = float(round_clamped(iscale * x[i], -nmax, nmax - 1));
      sxl += w[i] * x[i] * l;
      sll += w[i] * l * l;
    }
    if (sll > 0 && sxl * sxl > best * sll) {
      best_s = sxl / sll;
      best = best_s * sxl;
    }
  }
  // Polish: levels nearest to the best scale, refitted, while that helps.
  for (int it = 0; it < 3 && best_s != 0; ++it) {
    float sxl = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      const float l = float(round_clamped(x[i] / best_s, -nmax, nmax - 1));
      sxl += w[i] * x[i] * l;
      sll += w[i] * l * l;
    }
    if (!(sll > 0 && sxl * sxl > best * sll)) break;
    best_s = sxl / sll;
    best = best_s * sxl;
  }
  return best_s;
}

float q6_levels(const float* x, const float* w, int n, float ds, int8_t* L) {
  float e = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = ds == 0 ? 0 : int8_t(round_clamped(x[i] / ds, -32, 31));
    const float r = ds * float(L[i]) - x[i];
    e += w[i] * r * r;
  }
  return e;
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb, int64_t base) {
  constexpr int nsub = kSuper / 16;
  for (int64_t b = 0; b < nb; ++b, x += kSuper) {
    float s[nsub], w[kSuper];
    float max_s = 0, amax_s = 0;
    for (int i = 0; i < kSuper; ++i) w[i] = x[i] * x[i];
    for (int j = 0; j < nsub; ++j) {
      s[j] = fit_scale_sym(x + 16 * j, w + 16 * j, 16, 32, 9);
      if (std::fabs(s[j]) > amax_s) {
        amax_s = std::fabs(s[j]);
        max_s = s[j];
      }
    }
    BlockQ6_K& blk = y[b];
    int8_t L[kSuper] = {};
    blk.d = scale_half(max_s / -128, DType::Q6_K, x, kSuper, base + b * kSuper);
    const float d = half(blk.d);
    for (int j = 0; j < nsub; ++j) {
      int8_t tmp[16];
      const int s0 = d != 0 ? round_clamped(s[j] / d, -128, 127) : 0;
      float best = std::numeric_limits<float>::infinity();
      blk.scales[j] = 0;
      for (int a = std::max(-128, s0 - 1); a <= std::min(127, s0 + 1); ++a) {
        const float e = q6_levels(x + 16 * j, w + 16 * j, 16, d * float(a), tmp);
        if (e < best) {
          best = e;
          blk.scales[j] = int8_t(a);
          std::copy(tmp, tmp + 16, L + 16 * j);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {  // each 128-value half
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l] + 32, q2 = Lh[l + 32] + 32, q3 = Lh[l + 64] + 32, q4 = Lh[l + 96] + 32;
        ql[l] = uint8_t((q1 & 15) | ((q3 & 15) << 4));
        ql[l + 32] = uint8_t((q2 & 15) | ((q4 & 15) << 4));
        qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

// ---- IQ4_XS: 8 sub-blocks of 32, y = (d·(ls − 32))·kIQ4NL[q] ----------------------------------

// The index of the table value nearest to v (ties to the lower).
inline int nearest_nl(float v) {
  if (v <= float(kIQ4NL[0])) return 0;
  if (v >= float(kIQ4NL[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < float(kIQ4NL[mid]))
      hi = mid;
    else
      lo = mid;
  }
  return v - float(kIQ4NL[lo]) <= float(kIQ4NL[hi]) - v ? lo : hi;
}

// The weighted least-squares scale of one sub-block for the table: candidates map the largest
// magnitude to the table's ends, each refitted.
float fit_scale_nl(const float* x, const float* w, int n, int ntry) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax == 0) return 0;
  float best_s = 0, best = 0;
  auto consider = [&](float id) {
    float sqx = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      const float q = float(kIQ4NL[nearest_nl(id * x[i])]);
      sqx += w[i] * q * x[i];
      sqq += w[i] * q * q;
    }
    if (sqq > 0 && sqx * sqx > best * sqq) {
      best_s = sqx / sqq;
      best = best_s * sqx;
    }
  };
  consider(float(kIQ4NL[0]) / -max);
  for (int k = -ntry; k <= ntry; ++k) consider((float(k) + float(kIQ4NL[0])) / max);
  // Polish: levels nearest to the best scale, refitted, while that helps.
  for (int it = 0; it < 3 && best_s != 0; ++it) {
    const float before = best;
    consider(1 / best_s);
    if (!(best > before)) break;
  }
  return best_s;
}

float nl_levels(const float* x, const float* w, int n, float dl, uint8_t* L) {
  float e = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = dl == 0 ? uint8_t(nearest_nl(0)) : uint8_t(nearest_nl(x[i] / dl));
    const float r = dl * float(kIQ4NL[L[i]]) - x[i];
    e += w[i] * r * r;
  }
  return e;
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb, int64_t base) {
  constexpr int nsub = kSuper / 32;
  for (int64_t b = 0; b < nb; ++b, x += kSuper) {
    float s[nsub], w[kSuper];
    float max_s = 0, amax_s = 0;
    for (int i = 0; i < kSuper; ++i) w[i] = x[i] * x[i];
    for (int j = 0; j < nsub; ++j) {
      s[j] = fit_scale_nl(x + 32 * j, w + 32 * j, 32, 7);
      if (std::fabs(s[j]) > amax_s) {
        amax_s = std::fabs(s[j]);
        max_s = s[j];
      }
    }
    BlockIQ4_XS& blk = y[b];
    blk.d = scale_half(max_s / -32, DType::IQ4_XS, x, kSuper, base + b * kSuper);
    const float d = half(blk.d);
    blk.scales_h = 0;
    std::memset(blk.scales_l, 0, sizeof blk.scales_l);
    uint8_t L[kSuper];
    for (int j = 0; j < nsub; ++j) {
      uint8_t tmp[32];
      const int s0 = d != 0 ? round_clamped(s[j] / d, -32, 31) : 0;
      float best = std::numeric_limits<float>::infinity();
      int ls = 0;
      for (int a = std::max(-32, s0 - 1); a <= std::min(31, s0 + 1); ++a) {
        const float e = nl_levels(x + 32 * j, w + 32 * j, 32, d * float(a), tmp);
        if (e < best) {
          best = e;
          ls = a;
          std::copy(tmp, tmp + 32, L + 32 * j);
        }
      }
      const int u = ls + 32;
      blk.scales_l[j / 2] |= uint8_t((u & 15) << (4 * (j % 2)));
      blk.scales_h |= uint16_t((u >> 4) << (2 * j));
    }
    for (int j = 0; j < nsub; ++j)
      for (int l = 0; l < 16; ++l)
        blk.qs[16 * j + l] = uint8_t(L[32 * j + l] | (L[32 * j + 16 + l] << 4));
  }
}

// ---- dequantizing: GGML's formulas, operation for operation --------------------------------

inline void scale_min_k4(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void dequant_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = half(x[b].d);
    for (int j = 0; j < kBlock; ++j) y[j] = float(x[b].qs[j]) * d;
  }
}

void dequant_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = half(x[b].d);
    for (int j = 0; j < kBlock / 2; ++j) {
      y[j] = float((x[b].qs[j] & 15) - 8) * d;
      y[j + kBlock / 2] = float((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock) {
    const float d = half(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < kBlock / 2; ++j) {
      const int h0 = int((qh >> j) << 4) & 16, h1 = int(qh >> (j + 12)) & 16;
      y[j] = float(((x[b].qs[j] & 15) | h0) - 16) * d;
      y[j + kBlock / 2] = float(((x[b].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dequant_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half(x[b].d), dmin = half(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      int sc, m;
      scale_min_k4(2 * c, x[b].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scale_min_k4(2 * c + 1, x[b].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) {
        const float p = d1 * float(q[l] & 15);
        *y++ = p - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const float p = d2 * float(q[l] >> 4);
        *y++ = p - m2;
      }
    }
  }
}

void dequant_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half(x[b].d), dmin = half(x[b].dmin);
    const uint8_t* ql = x[b].qs;
    const uint8_t* qh = x[b].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int c = 0; c < 4; ++c, ql += 32, u1 <<= 2, u2 <<= 2) {
      int sc, m;
      scale_min_k4(2 * c, x[b].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scale_min_k4(2 * c + 1, x[b].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) {
        const float p = d1 * float((ql[l] & 15) + (qh[l] & u1 ? 16 : 0));
        *y++ = p - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const float p = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0));
        *y++ = p - m2;
      }
    }
  }
}

void dequant_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half(x[b].d);
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    const int8_t* sc = x[b].scales;
    for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

void dequant_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half(x[b].d);
    const uint8_t* qs = x[b].qs;
    for (int j = 0; j < kSuper / 32; ++j, y += 32, qs += 16) {
      const int ls =
          ((x[b].scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((x[b].scales_h >> (2 * j)) & 3) << 4);
      const float dl = d * float(ls - 32);
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * float(kIQ4NL[qs[l] & 15]);
        y[l + 16] = dl * float(kIQ4NL[qs[l] >> 4]);
      }
    }
  }
}

void check_row(DType t, int64_t n) {
  if (!is_weight_type(t)) fail("{} is not a weight type (quantize/dequantize)", dtype_name(t));
  const int64_t be = dtype_block_elems(t);
  if (n < 0 || n % be != 0)
    fail("a row of {} values is not a whole number of {} blocks of {}", n, dtype_name(t), be);
}

// quantize_row with the index of x[0] in the caller's tensor, for error messages.
void quantize_row_at(DType t, const float* x, void* dst, int64_t n, int64_t base) {
  switch (t) {
    case DType::F32:
      check_finite(x, n, base);
      std::memcpy(dst, x, size_t(n) * 4);
      return;
    case DType::F16: {
      check_finite(x, n, base);
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        h[i] = f32_to_f16(x[i]);
        if ((h[i] & 0x7fffu) == 0x7c00u)
          fail("value {} at index {} is too large for F16 (largest 65504)", x[i], base + i);
      }
      return;
    }
    case DType::BF16: {
      check_finite(x, n, base);
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        h[i] = f32_to_bf16(x[i]);
        if ((h[i] & 0x7fffu) == 0x7f80u)
          fail("value {} at index {} is too large for BF16", x[i], base + i);
      }
      return;
    }
    default:
      break;
  }
  check_values(t, x, n, base);
  const int64_t nb = n / dtype_block_elems(t);
  switch (t) {
    case DType::Q8_0:
      return quantize_q8_0(x, static_cast<BlockQ8_0*>(dst), nb, base);
    case DType::Q4_0:
      return quantize_q4_0(x, static_cast<BlockQ4_0*>(dst), nb, base);
    case DType::Q5_0:
      return quantize_q5_0(x, static_cast<BlockQ5_0*>(dst), nb, base);
    case DType::Q4_K:
      return quantize_q4_k(x, static_cast<BlockQ4_K*>(dst), nb, base);
    case DType::Q5_K:
      return quantize_q5_k(x, static_cast<BlockQ5_K*>(dst), nb, base);
    case DType::Q6_K:
      return quantize_q6_k(x, static_cast<BlockQ6_K*>(dst), nb, base);
    case DType::IQ4_XS:
      return quantize_iq4_xs(x, static_cast<BlockIQ4_XS*>(dst), nb, base);
    default:
      break;
  }
}

}  // namespace

bool is_weight_type(DType t) {
  return dtype_is_quantized(t) || t == DType::F16 || t == DType::BF16 || t == DType::F32;
}

void quantize_row(DType t, const float* x, void* dst, int64_t n) {
  check_row(t, n);
  quantize_row_at(t, x, dst, n, 0);
}

void dequantize_row(DType t, const void* src, float* y, int64_t n) {
  check_row(t, n);
  const int64_t nb = n / dtype_block_elems(t);
  switch (t) {
    case DType::F32:
      std::memcpy(y, src, size_t(n) * 4);
      return;
    case DType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(h[i]);
      return;
    }
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::Q8_0:
      return dequant_q8_0(static_cast<const BlockQ8_0*>(src), y, nb);
    case DType::Q4_0:
      return dequant_q4_0(static_cast<const BlockQ4_0*>(src), y, nb);
    case DType::Q5_0:
      return dequant_q5_0(static_cast<const BlockQ5_0*>(src), y, nb);
    case DType::Q4_K:
      return dequant_q4_k(static_cast<const BlockQ4_K*>(src), y, nb);
    case DType::Q5_K:
      return dequant_q5_k(static_cast<const BlockQ5_K*>(src), y, nb);
    case DType::Q6_K:
      return dequant_q6_k(static_cast<const BlockQ6_K*>(src), y, nb);
    case DType::IQ4_XS:
      return dequant_iq4_xs(static_cast<const BlockIQ4_XS*>(src), y, nb);
    default:
      break;
  }
}

void quantize_matrix(DType t, const float* x, void* dst, int64_t rows, int64_t cols) {
  check_row(t, cols);
  if (rows < 0) fail("a matrix of {} rows", rows);
  const size_t row_bytes = dtype_bytes(t, cols);
  auto* out = static_cast<unsigned char*>(dst);
  // A row's failure is kept and thrown after the loop (exceptions must not leave an OpenMP
  // region); the lowest failing row wins, so the message does not depend on the threads.
  int64_t bad_row = rows;
  std::string bad_msg;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t r = 0; r < rows; ++r) {
    try {
      quantize_row_at(t, x + r * cols, out + size_t(r) * row_bytes, cols, r * cols);
    } catch (const std::exception& e) {
#pragma omp critical(zaya_quantize_matrix)
      if (r < bad_row) {
        bad_row = r;
        bad_msg = e.what();
      }
    }
  }
  if (bad_row < rows) fail("{} (row {} of {} columns)", bad_msg, bad_row, cols);
}

void dequantize_matrix(DType t, const void* src, float* y, int64_t rows, int64_t cols) {
  check_row(t, cols);
  if (rows < 0) fail("a matrix of {} rows", rows);
  const size_t row_bytes = dtype_bytes(t, cols);
  const auto* in = static_cast<const unsigned char*>(src);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row(t, in + size_t(r) * row_bytes, y + r * cols, cols);
}

}  // namespace zaya::quant
