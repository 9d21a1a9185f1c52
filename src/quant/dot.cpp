// The scalar reference of the quantized dot products (dot.h gives the exact definition every ISA
// follows), the activation layout, and the choice of ISA. The SIMD kernels are dot_x86.inc,
// compiled twice: dot_avx2.cpp and dot_vnni.cpp.
#include "quant/dot.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/assert.h"
#include "quant/blocks.h"
#include "quant/dot_impl.h"

#if defined(__clang__)
#pragma clang fp contract(off)  // dot.h's products and sums are separate roundings
#endif

namespace zaya::quant {

namespace {

// One weight block as integers: values q (offset applied), per-16 scales, per-32 mins, and the
// two float scales. n is 32 or 256.
struct Decoded {
  int n = 0;
  int8_t q[kSuper];
  int32_t sc16[kSuper / 16];
  int32_t min32[kSuper / 32];
  float d = 0, dmin = 0;
  bool has_min = false;
};

// GGML's 6-bit scale and min j of a Q4_K / Q5_K block.
void scale_min_k4(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void decode(DType t, const uint8_t* p, Decoded& o) {
  o.has_min = false;
  switch (t) {
    case DType::Q8_0: {
      BlockQ8_0 b;
      std::memcpy(&b, p, sizeof b);
      o.n = kBlock, o.d = f16_to_f32(b.d);
      for (int j = 0; j < kBlock; ++j) o.q[j] = b.qs[j];
      o.sc16[0] = o.sc16[1] = 1;
      return;
    }
    case DType::Q4_0: {
      BlockQ4_0 b;
      std::memcpy(&b, p, sizeof b);
      o.n = kBlock, o.d = f16_to_f32(b.d);
      for (int j = 0; j < 16; ++j) {
        o.q[j] = int8_t((b.qs[j] & 15) - 8);
        o.q[j + 16] = int8_t((b.qs[j] >> 4) - 8);
      }
      o.sc16[0] = o.sc16[1] = 1;
      return;
    }
    case DType::Q5_0: {
      BlockQ5_0 b;
      std::memcpy(&b, p, sizeof b);
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      o.n = kBlock, o.d = f16_to_f32(b.d);
      for (int j = 0; j < 16; ++j) {
        o.q[j] = int8_t(((b.qs[j] & 15) | (((qh >> j) & 1) << 4)) - 16);
        o.q[j + 16] = int8_t(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
      }
      o.sc16[0] = o.sc16[1] = 1;
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = t == DType::Q5_K;
      uint16_t d, dmin;
      std::memcpy(&d, p, 2);
      std::memcpy(&dmin, p + 2, 2);
      const uint8_t* scales = p + 4;
      const uint8_t* qh = five ? p + 16 : nullptr;
      const uint8_t* qs = five ? p + 48 : p + 16;
      o.n = kSuper, o.d = f16_to_f32(d), o.dmin = f16_to_f32(dmin), o.has_min = true;
      for (int g = 0; g < 8; ++g) {
        int sc, m;
        scale_min_k4(g, scales, sc, m);
        o.sc16[2 * g] = o.sc16[2 * g + 1] = sc;
        o.min32[g] = m;
        const uint8_t* q = qs + 32 * (g / 2);
        for (int l = 0; l < 32; ++l) {
          int v = (g % 2 == 0) ? (q[l] & 15) : (q[l] >> 4);
          if (five) v |= ((qh[l] >> g) & 1) << 4;
          o.q[32 * g + l] = int8_t(v);
        }
      }
      return;
    }
    case DType::Q6_K: {
      BlockQ6_K b;
      std::memcpy(&b, p, sizeof b);
      o.n = kSuper, o.d = f16_to_f32(b.d);
      for (int s = 0; s < 16; ++s) o.sc16[s] = b.scales[s];
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b.ql + 64 * h;
        const uint8_t* qh = b.qh + 32 * h;
        int8_t* q = o.q + 128 * h;
        for (int l = 0; l < 32; ++l) {
          q[l] = int8_t(((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
          q[l + 32] = int8_t(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
          q[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          q[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
      return;
    }
    case DType::IQ4_XS: {
      BlockIQ4_XS b;
      std::memcpy(&b, p, sizeof b);
      o.n = kSuper, o.d = f16_to_f32(b.d);
      for (int g = 0; g < 8; ++g) {
        const int ls =
            ((b.scales_l[g / 2] >> (4 * (g % 2))) & 15) | (((b.scales_h >> (2 * g)) & 3) << 4);
        o.sc16[2 * g] = o.sc16[2 * g + 1] = ls - 32;
        for (int j = 0; j < 16; ++j) {
          o.q[32 * g + j] = kIQ4NL[b.qs[16 * g + j] & 15];
          o.q[32 * g + j + 16] = kIQ4NL[b.qs[16 * g + j] >> 4];
        }
      }
      return;
    }
    default:
      ZAYA_ASSERT(false, "quant dot: {} is not a block type", dtype_name(t));
  }
}

float dot_scalar_one(DType t, const uint8_t* w, const ActRow& x, int64_t I) {
  const int64_t B = dtype_block_elems(t), nb = I / B;
  const size_t bytes = dtype_block_bytes(t);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, m = 0;
  Decoded blk;
  for (int64_t b = 0; b < nb; ++b) {
    decode(t, w + b * bytes, blk);
    const int8_t* xq = x.q + b * B;
    int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int p = 0; p < blk.n; ++p) lane[(p % 32) / 4] += blk.sc16[p / 16] * blk.q[p] * xq[p];
    const float s = blk.d * x.d[b];
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(s, float(lane[l]), acc[l]);
    if (blk.has_min) {
      int32_t msum = 0;
      for (int g = 0; g < 8; ++g) msum += blk.min32[g] * x.sum32[b * 8 + g];
      const float sm = blk.dmin * x.d[b];
      m = std::fma(sm, float(msum), m);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) - m;
}

template <DType T>
void dot_scalar(const void* w, size_t w_stride, int R, const void* act, size_t act_stride, int C,
                int64_t I, float* out, int64_t ldo) {
  for (int c = 0; c < C; ++c) {
    const ActRow x = act_row(T, static_cast<const uint8_t*>(act) + c * act_stride, I);
    for (int r = 0; r < R; ++r)
      out[c * ldo + r] = dot_scalar_one(T, static_cast<const uint8_t*>(w) + r * w_stride, x, I);
  }
}

// d, q (and the 32-sums) of one activation block of B values, as dot.h defines them.
void quantize_block(const float* x, int B, int8_t* q, float& d) {
  float amax = 0;
  bool finite = true;
  for (int j = 0; j < B; ++j) {
    const float a = std::fabs(x[j]);
    finite = finite && a <= std::numeric_limits<float>::max();
    amax = a > amax ? a : amax;
  }
  if (!finite) {
    d = std::numeric_limits<float>::quiet_NaN();
    std::memset(q, 0, size_t(B));
    return;
  }
  if (amax < kTinyAmax) amax = 0;  // dot.h: a negligible block is zeros (127 / amax would overflow)
  d = amax / 127.0f;
  const float id = amax > 0 ? 127.0f / amax : 0.0f;
  for (int j = 0; j < B; ++j) {
    const float v = x[j] * id;
    q[j] = int8_t(std::lrintf(v));
  }
}

template <int B, bool kSums>
void quantize_scalar(const float* x, void* row, int64_t I) {
  int8_t* q = static_cast<int8_t*>(row);
  float* d = reinterpret_cast<float*>(q + I);
  for (int64_t b = 0; b < I / B; ++b) quantize_block(x + b * B, B, q + b * B, d[b]);
  if constexpr (kSums) {
    int16_t* s = reinterpret_cast<int16_t*>(d + I / B);
    for (int64_t g = 0; g < I / 32; ++g) {
      int v = 0;
      for (int j = 0; j < 32; ++j) v += q[g * 32 + j];
      s[g] = int16_t(v);
    }
  }
}

template <DType T>
constexpr DotKernels scalar_kernels() {
  constexpr int B = T == DType::Q8_0 || T == DType::Q4_0 || T == DType::Q5_0 ? 32 : 256;
  constexpr bool sums = T == DType::Q4_K || T == DType::Q5_K;
  return {&quantize_scalar<B, sums>, &dot_scalar<T>, 1, 1, 1};
}

constexpr DotKernels kScalar[] = {scalar_kernels<DType::Q8_0>(),  scalar_kernels<DType::Q4_0>(),
                                  scalar_kernels<DType::Q5_0>(),  scalar_kernels<DType::Q4_K>(),
                                  scalar_kernels<DType::Q5_K>(),  scalar_kernels<DType::Q6_K>(),
                                  scalar_kernels<DType::IQ4_XS>()};

#if defined(__x86_64__)
// F16C from cpuid leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c".
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

Isa detect_best() {
#if defined(__x86_64__)
  if (isa_supported(Isa::Avx512Vnni)) return Isa::Avx512Vnni;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
#endif
  return Isa::Scalar;
}

std::atomic<int> g_isa{-1};

}  // namespace

int type_index(DType t) {
  ZAYA_ASSERT(dtype_is_quantized(t), "quant dot: {} is not a block type", dtype_name(t));
  return int(t) - int(DType::Q8_0);
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512Vnni:
      return "avx512-vnni";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
#else
      return false;
#endif
    case Isa::Avx512Vnni:
#if defined(__x86_64__)
      return isa_supported(Isa::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
#else
      return false;
#endif
  }
  return false;
}

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = int(detect_best());
    g_isa.store(v, std::memory_order_relaxed);
  }
  return Isa(v);
}

void set_isa(Isa isa) {
  ZAYA_ASSERT(isa_supported(isa), "quant: ISA {} is not supported by this CPU or build",
              isa_name(isa));
  g_isa.store(int(isa), std::memory_order_relaxed);
}

int64_t act_block(DType t) {
  return dtype_block_elems(t);
}

size_t act_row_bytes(DType t, int64_t I) {
  const bool sums = t == DType::Q4_K || t == DType::Q5_K;
  const size_t n = size_t(I) + size_t(I / act_block(t)) * 4 + (sums ? size_t(I / 32) * 2 : 0);
  return (n + 63) / 64 * 64;
}

ActRow act_row(DType t, const void* row, int64_t I) {
  const int8_t* q = static_cast<const int8_t*>(row);
  const float* d = reinterpret_cast<const float*>(q + I);
  return {q, d, reinterpret_cast<const int16_t*>(d + I / act_block(t))};
}

const DotKernels& dot_kernels(DType t, Isa isa) {
  const int i = type_index(t);
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2:
      return avx2::kernels[i];
    case Isa::Avx512Vnni:
      return vnni::kernels[i];
#endif
    default:
      return kScalar[i];
  }
}

}  // namespace zaya::quant
