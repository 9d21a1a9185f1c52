// linear_forward with BF16 or F16 weights on the CPU (inference): y[N,O] (+)= x[N,I]·w[O,I]ᵀ
// (+ b[O]), x, y, b f32, w bf16 or f16 as stored (possibly mmap'd, only 2-byte aligned).
// Arithmetic is f32 with f32 accumulation; widening bf16 or f16 → f32 is exact (f16 through F16C's
// vcvtph2ps, the same values as f16_to_f32). Everything below is written once over the 16-bit
// format (Bf16, F16).
//
// Three regimes:
// - N = 1 (decode of one sequence): each thread owns a range of consecutive rows, i.e. one
//   sequential stream, read row after row with no software prefetch (the hardware stream
//   prefetcher does best on a single stream; a prefetch one row ahead cost 5–15% here). Ranges
//   are split into 64 KB chunks that a thread done early takes from the others' ends
//   (ops/cpu/stealing.h).
// - 1 < N ≤ kStreamMaxN (batched decode, prompt chunks): a streaming GEMV. Each thread owns a
//   static block of output rows and reads each weight row once from memory for all N inputs:
//   kRows rows are widened in registers per step and multiplied into up to 4 inputs at a time
//   (more inputs re-read the rows from L1), with a software prefetch of the next row block (kRows
//   streams defeat the hardware prefetcher). Several independent accumulators hide the FMA
//   latency; for few inputs the loops are bound by memory bandwidth (weights are read once per
//   step), for many by arithmetic (still faster than widening for sgemm up to kStreamMaxN).
// - N > kStreamMaxN (long prefill chunks): tiles of w (up to kScratchBytes of f32, so few and
//   large) are widened into a reused thread-local f32 scratch and multiplied by sgemm (OpenBLAS,
//   threaded inside) into y's columns (ldc = O); the widening of a tile is split over OpenMP
//   threads. Few large tiles matter: OpenBLAS's pthreads and a just-finished OpenMP team both spin
//   for a while, and alternating them hundreds of times per call on a busy machine was ~30×
//   slower.
// Each output element is one fixed-order sum computed by one task, so the bits do not depend on
// the thread count. Without AVX2+FMA+F16C (or AVX-512) the same loops run in scalar code.
#include "ops/cpu/linear_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/stealing.h"

namespace zaya::ops::cpu {

namespace {

// Above: widening + sgemm is faster than the multi-input GEMV; at and below, the GEMV wins (at
// N = 17 by ~4x on 2 threads: sgemm's packing does not pay for so few rows).
constexpr int64_t kStreamMaxN = 128;
constexpr int64_t kScratchBytes = int64_t(32) << 20;  // prefill tile: ≤ 32 MB of widened rows
constexpr int kMaxInputs = 4;
constexpr int64_t kStealChunkBytes = int64_t(64)
                                     << 10;  // N = 1: weight bytes per claimed chunk  // inputs per
                                             // pass over a row block (register budget)

// One SIMD vector of f32 lanes and the few operations the kernels need.
#if defined(__AVX512F__)
// The maskz forms with a full mask are the plain instructions; they avoid GCC 12's false
// "uninitialized" warnings from the unmasked intrinsics' undefined pass-through operand.
#define ZAYA_BF16_SIMD 1
using Vec = __m512;
constexpr int64_t kW = 16;
inline Vec load_bf16(const uint16_t* p) {  // 16 bf16 → 16 f32: zero-extend, shift into the top
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
}
inline Vec load_f16(const uint16_t* p) {  // 16 f16 → 16 f32
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline Vec load_f32(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void store_f32(float* p, Vec v) {
  _mm512_storeu_ps(p, v);
}
inline Vec fmadd(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline Vec zero() {
  return _mm512_setzero_ps();
}
inline Vec add(Vec a, Vec b) {
  return _mm512_add_ps(a, b);
}
inline float hsum(Vec v) {  // fixed tree: halves, quarters, then pairs
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  const __m256 h = _mm256_add_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define ZAYA_BF16_SIMD 1
using Vec = __m256;
constexpr int64_t kW = 8;
inline Vec load_bf16(const uint16_t* p) {  // 8 bf16 → 8 f32: zero-extend, shift into the top
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline Vec load_f16(const uint16_t* p) {  // 8 f16 → 8 f32
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline Vec load_f32(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void store_f32(float* p, Vec v) {
  _mm256_storeu_ps(p, v);
}
inline Vec fmadd(Vec a, Vec b, Vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline Vec zero() {
  return _mm256_setzero_ps();
}
inline Vec add(Vec a, Vec b) {
  return _mm256_add_ps(a, b);
}
inline float hsum(Vec v) {  // fixed tree: halves, then pairs
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#else
#define ZAYA_BF16_SIMD 0
constexpr int64_t kW = 1;
#endif

// The two 16-bit formats: a SIMD load (widening kW values) and the scalar conversion.
struct Bf16 {
#if ZAYA_BF16_SIMD
  static Vec load(const uint16_t* p) {
    return load_bf16(p);
  }
#endif
  static float scalar(uint16_t h) {
    return bf16_to_f32(h);
  }
};
struct F16 {
#if ZAYA_BF16_SIMD
  static Vec load(const uint16_t* p) {
    return load_f16(p);
  }
#endif
  static float scalar(uint16_t h) {
    return f16_to_f32(h);
  }
};

template <class H>
void widen(float* dst, const uint16_t* src, int64_t n) {
  int64_t e = 0;
#if ZAYA_BF16_SIMD
  for (; e + kW <= n; e += kW) store_f32(dst + e, H::load(src + e));
#endif
  for (; e < n; ++e) dst[e] = H::scalar(src[e]);
}

// out[r·NB + n] = Σ_e w[r·I + e]·x[n·I + e] for R consecutive rows of w and NB inputs. The main
// loop covers 2 vectors per row per step (one 64-byte line of bf16) and prefetches the same line
// of the next row block (`next`): a lookahead of one block (R·I·2 bytes) on every row stream. The
// hardware prefetcher alone, or a fixed 1 KB lookahead, left 15–25% of a core's read rate unused
// (rows of 1–2 KB are too short for it to ramp up). kPrefetch = false (one row read as part of a
// single sequential stream, dot_row) leaves it to the hardware prefetcher; the sums are the same.
template <class H, int R, int NB, bool kPrefetch = true>
void dot_block(float* out, const uint16_t* w, const uint16_t* next, const float* x, int64_t I) {
  int64_t e = 0;
#if ZAYA_BF16_SIMD
  // Two accumulators per (row, input), one per half of the line: twice the independent FMA
  // chains, so the FMA latency never throttles the stream.
  Vec acc[R][NB], acc2[R][NB];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = zero(), acc2[r][n] = zero();
  for (; e + 2 * kW <= I; e += 2 * kW) {
    if constexpr (kPrefetch)
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(next + r * I + e), _MM_HINT_T0);
    Vec xa[NB], xb[NB];
    for (int n = 0; n < NB; ++n)
      xa[n] = load_f32(x + n * I + e), xb[n] = load_f32(x + n * I + e + kW);
    for (int r = 0; r < R; ++r) {
      const Vec wa = H::load(w + r * I + e), wb = H::load(w + r * I + e + kW);
      for (int n = 0; n < NB; ++n) {
        acc[r][n] = fmadd(wa, xa[n], acc[r][n]);
        acc2[r][n] = fmadd(wb, xb[n], acc2[r][n]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = add(acc[r][n], acc2[r][n]);
  for (; e + kW <= I; e += kW) {
    Vec xv[NB];
    for (int n = 0; n < NB; ++n) xv[n] = load_f32(x + n * I + e);
    for (int r = 0; r < R; ++r) {
      const Vec wv = H::load(w + r * I + e);
      for (int n = 0; n < NB; ++n) acc[r][n] = fmadd(wv, xv[n], acc[r][n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) out[r * NB + n] = hsum(acc[r][n]);
#else
  for (int i = 0; i < R * NB; ++i) out[i] = 0.0f;
#endif
  // The tail (everything without SIMD), with explicit FMAs: whether the compiler contracts a
  // plain a += w·x depends on how it vectorised the loop, and dot_row must give the same bits.
  for (; e < I; ++e)
    for (int r = 0; r < R; ++r) {
      const float wv = H::scalar(w[r * I + e]);
      for (int n = 0; n < NB; ++n) out[r * NB + n] = std::fma(wv, x[n * I + e], out[r * NB + n]);
    }
}

// y[n0 … n0+NB, o0 … o0+R] for one row block and one group of inputs.
template <class H, int R, int NB>
void gemv_block(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O, int64_t O,
                int64_t I, int64_t o0, int64_t n0, bool accumulate) {
  float dots[R * NB];
  const int64_t next = std::min(o0 + R, O - R);  // the last block prefetches itself
  dot_block<H, R, NB>(dots, w_OI + o0 * I, w_OI + next * I, x_NI + n0 * I, I);
  for (int n = 0; n < NB; ++n)
    for (int r = 0; r < R; ++r) {
      float& out = y_NO[(n0 + n) * O + o0 + r];
      const float base = (accumulate ? out : 0.0f) + (b_O ? b_O[o0 + r] : 0.0f);
      out = base + dots[r * NB + n];
    }
}

// All inputs against rows [o0, o0 + R), in groups of up to kMaxInputs.
template <class H, int R>
void gemv_rows(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O, int64_t N,
               int64_t O, int64_t I, int64_t o0, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += kMaxInputs) {
    switch (std::min<int64_t>(kMaxInputs, N - n0)) {
      case 1:
        gemv_block<H, R, 1>(y_NO, x_NI, w_OI, b_O, O, I, o0, n0, accumulate);
        break;
      case 2:
        gemv_block<H, R, 2>(y_NO, x_NI, w_OI, b_O, O, I, o0, n0, accumulate);
        break;
      case 3:
        gemv_block<H, R, 3>(y_NO, x_NI, w_OI, b_O, O, I, o0, n0, accumulate);
        break;
      default:
        gemv_block<H, R, 4>(y_NO, x_NI, w_OI, b_O, O, I, o0, n0, accumulate);
        break;
    }
  }
}

// w[0, :]·x for one row without software prefetch: dot_block's own sums, so a sequence's logits
// do not depend on whether it decodes alone or in a batch.
template <class H>
float dot_row(const uint16_t* w, const float* x, int64_t I) {
  float out;
  dot_block<H, 1, 1, false>(&out, w, nullptr, x, I);
  return out;
}

template <class H>
void gemv_one_input(float* y_O, const float* x_I, const uint16_t* w_OI, const float* b_O, int64_t O,
                    int64_t I, bool accumulate) {
  const int64_t rows = kStealChunkBytes / std::max<int64_t>(1, 2 * I);
  for_chunks_stealing(O, rows, O * I > kParallelMin, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const float base = (accumulate ? y_O[o] : 0.0f) + (b_O ? b_O[o] : 0.0f);
      y_O[o] = base + dot_row<H>(w_OI + o * I, x_I, I);
    }
  });
}

// Streaming GEMV: static blocks of kRows rows per thread, leftover rows one at a time.
template <class H>
void gemv(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O, int64_t N,
          int64_t O, int64_t I, bool accumulate) {
  // Rows per step: kRows × kMaxInputs accumulators stay in registers (32 zmm / 16 ymm).
  constexpr int64_t kRows = kW == 16 ? 4 : 2;
  const int64_t blocks = (O + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (O * I > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t o0 = blk * kRows;
    if (o0 + kRows <= O) {
      gemv_rows<H, kRows>(y_NO, x_NI, w_OI, b_O, N, O, I, o0, accumulate);
    } else {
      for (int64_t o = o0; o < O; ++o)
        gemv_rows<H, 1>(y_NO, x_NI, w_OI, b_O, N, O, I, o, accumulate);
    }
  }
}

// Rows [o0, o0 + rows) of w widened into wt[rows, I], split over threads.
template <class H>
void widen_tile(float* wt, const uint16_t* w_OI, int64_t o0, int64_t rows, int64_t I) {
#pragma omp parallel for schedule(static) if (rows * I > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) widen<H>(wt + r * I, w_OI + (o0 + r) * I, I);
}

// Prefill: y = (accumulate ? y : 0) + b first, then per tile y[:, tile] += x · wtileᵀ.
template <class H>
void widened_gemm(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O, int64_t N,
                  int64_t O, int64_t I, bool accumulate) {
  float beta = accumulate ? 1.0f : 0.0f;
  if (b_O) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o)
        y_NO[n * O + o] = (accumulate ? y_NO[n * O + o] : 0.0f) + b_O[o];
    beta = 1.0f;
  }
  const int64_t tile = std::clamp<int64_t>(kScratchBytes / (4 * I), 1, O);
  thread_local std::vector<float> wt;  // [tile, I] widened rows, reused across calls
  if (wt.size() < size_t(tile * I)) wt.resize(size_t(tile * I));
  for (int64_t o0 = 0; o0 < O; o0 += tile) {
    const int64_t rows = std::min(tile, O - o0);
    widen_tile<H>(wt.data(), w_OI, o0, rows, I);
    gemm(false, true, N, rows, I, 1.0f, x_NI, I, wt.data(), I, beta, y_NO + o0, O);
  }
}

template <class H>
void forward(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O, int64_t N,
             int64_t O, int64_t I, bool accumulate) {
  if (N == 0 || O == 0) return;
  if (N == 1) {
    gemv_one_input<H>(y_NO, x_NI, w_OI, b_O, O, I, accumulate);
  } else if (N <= kStreamMaxN || I == 0) {  // (sgemm rejects k = 0 strides)
    gemv<H>(y_NO, x_NI, w_OI, b_O, N, O, I, accumulate);
  } else {
    widened_gemm<H>(y_NO, x_NI, w_OI, b_O, N, O, I, accumulate);
  }
}

}  // namespace

void widen_bf16(float* dst, const uint16_t* src, int64_t n) {
  widen<Bf16>(dst, src, n);
}
void widen_f16(float* dst, const uint16_t* src, int64_t n) {
  widen<F16>(dst, src, n);
}

void linear_bf16_forward(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O,
                         int64_t N, int64_t O, int64_t I, bool accumulate) {
  forward<Bf16>(y_NO, x_NI, w_OI, b_O, N, O, I, accumulate);
}
void linear_f16_forward(float* y_NO, const float* x_NI, const uint16_t* w_OI, const float* b_O,
                        int64_t N, int64_t O, int64_t I, bool accumulate) {
  forward<F16>(y_NO, x_NI, w_OI, b_O, N, O, I, accumulate);
}

}  // namespace zaya::ops::cpu
