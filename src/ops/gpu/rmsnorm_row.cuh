// Row kernels' building blocks shared by rmsnorm.cu, residual.cu (the fused merge + RMSNorm) and
// eda.cu: the GPU side of ops/cpu/rmsnorm_row.h. Both rmsnorm.cu and residual.cu call the same
// row functions here with the same launch geometry (row_geom), which is what makes the fused ops
// give the same bits as merge then RMSNorm on the GPU.
//
// Layout of a row kernel: a block owns whole rows (row n = blockIdx.x, blockIdx.x + gridDim.x, …)
// and each thread owns the same columns of every row: vector i = threadIdx.x + k·blockDim.x for
// k < K, columns [i·W, i·W + W) (W = 4: float4 loads, when the width is a multiple of 4 and every
// pointer is 16-byte aligned; W = 1 otherwise). A thread's slice of a row lives in registers, so
// each input is read from memory once, and a column sum over rows (dw += Σ_n …) accumulates in the
// thread's registers: each block writes its partial sums (double) to a Scratch buffer and
// finish_columns adds the blocks' partials in a fixed order (deterministic, no atomics).
// Row statistics (mean x², ⟨ĝ, n⟩) and column sums accumulate in double, as on the CPU.
#pragma once
#include <cstdint>
#include <type_traits>

#include "ops/gpu/common.cuh"
#include "ops/gpu/support.h"

namespace zaya::gpu::rows {

// Threads per block of a row kernel, at most (the kernels' __launch_bounds__).
constexpr int kMaxThreads = 512;
// Elements of a row per thread, at most (W·K): widths up to kMaxThreads·kMaxPerThread, the
// support's kMaxRowWidth.
constexpr int kMaxPerThread = 32;
static_assert(int64_t(kMaxThreads) * kMaxPerThread == ops::gpu::kMaxRowWidth);
// Blocks of a kernel that sums columns over rows (its partials are kColGrid × D doubles). A fixed
// number, so a column sum's order (and bits) is the same on every device.
constexpr int kColGrid = 512;
// Blocks of a row kernel without column sums (rows beyond it are strided).
constexpr int kRowGrid = 65535;

// ---------------------------------------------------------------- slices of a row
// Every element (k, e) of a thread's slice, unrolled (W and K are the enclosing template's):
// ZAYA_ROW_EACH(k, e) s.v[k][e] = …;
#define ZAYA_ROW_EACH(k, e) \
  _Pragma("unroll") for (int k = 0; k < K; ++k) _Pragma("unroll") for (int e = 0; e < W; ++e)

template <int W, int K>
struct Slice {
  float v[K][W];
};

template <int W>
__device__ __forceinline__ void load_vec(float (&d)[W], const float* p, int64_t i) {
  if constexpr (W == 4) {
    const float4 f = reinterpret_cast<const float4*>(p)[i];
    d[0] = f.x, d[1] = f.y, d[2] = f.z, d[3] = f.w;
  } else {
    d[0] = p[i];
  }
}

template <int W>
__device__ __forceinline__ void store_vec(float* p, int64_t i, const float (&s)[W]) {
  if constexpr (W == 4) {
    reinterpret_cast<float4*>(p)[i] = make_float4(s[0], s[1], s[2], s[3]);
  } else {
    p[i] = s[0];
  }
}

// This thread's slice of row p (nv vectors of W); zeros beyond the row.
template <int W, int K>
__device__ __forceinline__ void load(Slice<W, K>& s, const float* p, int64_t nv) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
    if (i < nv) {
      load_vec<W>(s.v[k], p, i);
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) s.v[k][e] = 0.f;
    }
  }
}

template <int W, int K>
__device__ __forceinline__ void store(float* p, const Slice<W, K>& s, int64_t nv) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
    if (i < nv) store_vec<W>(p, i, s.v[k]);
  }
}

// Per-thread column accumulators (double) and their partial-sum row part[blockIdx.x·D + col].
template <int W, int K>
struct Acc {
  double v[K][W];
  __device__ __forceinline__ void zero() { ZAYA_ROW_EACH(k, e) v[k][e] = 0.0; }
  __device__ __forceinline__ void store_partial(double* part, int64_t D) const {
    const int64_t nv = D / W;
    double* row = part + int64_t(blockIdx.x) * D;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < nv)
#pragma unroll
        for (int e = 0; e < W; ++e) row[i * W + e] = v[k][e];
    }
  }
};

// ---------------------------------------------------------------- launch geometry
struct RowGeom {
  int W = 1, K = 1, threads = 64;
};

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// W = 4 when D % 4 == 0 and every pointer given is 16-byte aligned (null pointers are ignored).
template <class... P>
bool vec4_ok(int64_t D, const P*... ptrs) {
  return D % 4 == 0 && (... && (ptrs == nullptr || aligned16(ptrs)));
}

// The smallest K (power of two) with at most kMaxThreads threads, threads a multiple of 64 (D ≤
// kMaxRowWidth: ops/gpu/support.h).
inline RowGeom row_geom(int64_t D, bool vec4) {
  RowGeom g;
  g.W = vec4 ? 4 : 1;
  const int64_t nv = D / g.W;
  while (int64_t(g.K) * kMaxThreads < nv && g.K * g.W < kMaxPerThread) g.K *= 2;
  int64_t t = (nv + g.K - 1) / g.K;
  t = (t + 63) / 64 * 64;
  g.threads = int(t < 64 ? 64 : t);
  return g;
}

// Calls f(std::integral_constant<int, W>{}, std::integral_constant<int, K>{}) for g's W and K.
template <class F>
void dispatch(const RowGeom& g, F&& f) {
  using std::integral_constant;
  if (g.W == 4) {
    switch (g.K) {
      case 1:
        return f(integral_constant<int, 4>{}, integral_constant<int, 1>{});
      case 2:
        return f(integral_constant<int, 4>{}, integral_constant<int, 2>{});
      case 4:
        return f(integral_constant<int, 4>{}, integral_constant<int, 4>{});
      default:
        return f(integral_constant<int, 4>{}, integral_constant<int, 8>{});
    }
  }
  switch (g.K) {
    case 1:
      return f(integral_constant<int, 1>{}, integral_constant<int, 1>{});
    case 2:
      return f(integral_constant<int, 1>{}, integral_constant<int, 2>{});
    case 4:
      return f(integral_constant<int, 1>{}, integral_constant<int, 4>{});
    case 8:
      return f(integral_constant<int, 1>{}, integral_constant<int, 8>{});
    case 16:
      return f(integral_constant<int, 1>{}, integral_constant<int, 16>{});
    default:
      return f(integral_constant<int, 1>{}, integral_constant<int, 32>{});
  }
}

inline unsigned row_grid(int64_t N) {
  return unsigned(N < kRowGrid ? N : kRowGrid);
}
inline unsigned col_grid(int64_t N) {
  return unsigned(N < kColGrid ? N : kColGrid);
}

// ---------------------------------------------------------------- column sums, second pass
// out[j] += float(Σ_g part[g·D + j]) (times scale[j] in double when scale is given), g in order
// within each of kWays interleaved lanes, then the lanes in order: a fixed order for a given G.
constexpr int kFinishCols = 32, kFinishWays = 8;

// (A template, so that every .cu including this header may instantiate it without a clash.)
template <int kWays = kFinishWays>
__global__ void __launch_bounds__(kFinishCols* kWays)
    finish_columns_kernel(float* out, const double* part, int G, int64_t D, const float* scale) {
  __shared__ double s[kWays][kFinishCols];
  const int c = threadIdx.x % kFinishCols, way = threadIdx.x / kFinishCols;
  const int64_t j = int64_t(blockIdx.x) * kFinishCols + c;
  double acc = 0;
  if (j < D)
    for (int g = way; g < G; g += kWays) acc += part[int64_t(g) * D + j];
  s[way][c] = acc;
  __syncthreads();
  if (way == 0 && j < D) {
    double t = s[0][c];
    for (int w = 1; w < kWays; ++w) t += s[w][c];
    if (scale) t *= double(scale[j]);
    out[j] += float(t);
  }
}

inline void finish_columns(float* out, const double* part, int G, int64_t D,
                           const float* scale = nullptr) {
  if (!out || D == 0) return;
  finish_columns_kernel<kFinishWays>
      <<<blocks_for(D, kFinishCols, int64_t(1) << 31), kFinishCols * kFinishWays, 0, stream()>>>(
          out, part, G, D, scale);
  ZAYA_GPU_LAUNCH_CHECK();
}

// ---------------------------------------------------------------- RMSNorm of one row
// y = w ⊙ (ρ x), ρ = (mean x² + eps)^-1/2 with Σ x² in double; returns ρ. `red` is shared memory of
// kMaxWarpsPerBlock doubles; all threads of the block call this (it synchronises).
template <int W, int K>
__device__ __forceinline__ float rms_forward(Slice<W, K>& y, const Slice<W, K>& x,
                                             const Slice<W, K>& w, int64_t D, float eps,
                                             double* red) {
  double ss = 0;
  ZAYA_ROW_EACH(k, e) ss += double(x.v[k][e]) * double(x.v[k][e]);
  ss = block_sum(ss, red);
  const float r = float(1.0 / sqrt(ss / double(D) + double(eps)));
  ZAYA_ROW_EACH(k, e) y.v[k][e] = w.v[k][e] * (r * x.v[k][e]);
  return r;
}

// d = ρ(ĝ − n·c), ĝ = dy⊙w, n = ρx, c = Σ ĝ⊙n / D in double (the CPU's rmsnorm_backward_row).
// With accumulate, d += instead of =. All threads of the block call this (it synchronises).
template <int W, int K>
__device__ __forceinline__ void rms_backward(Slice<W, K>& d, const Slice<W, K>& dy,
                                             const Slice<W, K>& x, const Slice<W, K>& w, float r,
                                             int64_t D, bool accumulate, double* red) {
  double s = 0;
  ZAYA_ROW_EACH(k, e) s += double(dy.v[k][e] * w.v[k][e]) * double(r * x.v[k][e]);
  s = block_sum(s, red);
  const float c = float(s / double(D));
  ZAYA_ROW_EACH(k, e) {
    const float v = r * (dy.v[k][e] * w.v[k][e] - (r * x.v[k][e]) * c);
    d.v[k][e] = accumulate ? d.v[k][e] + v : v;
  }
}

// One row's share of dw = Σ_n dy ⊙ (ρ x): acc += dy·(ρ x) in double.
template <int W, int K>
__device__ __forceinline__ void rms_dw(Acc<W, K>& acc, const Slice<W, K>& dy, const Slice<W, K>& x,
                                       float r) {
  ZAYA_ROW_EACH(k, e) acc.v[k][e] += double(dy.v[k][e]) * double(r * x.v[k][e]);
}

}  // namespace zaya::gpu::rows
