// Cross-entropy on the GPU (ops/cpu/xent.cpp), logits[N,V] with V up to 262,272.
// Forward: one block per row, one pass over the row with an online max: each thread keeps its
// running max m (f32, exact) and Σ exp(ℓ − m) in double (the CPU accumulates in double); the
// threads' (m, s) are combined in the block as S = Σ s·e^(m − M), lse = M + log S in double. Each
// exponential is expf of the exactly-formed difference (relative error ~1e-7 per term).
// Backward: dlogits = scale·(e^(ℓ − lse) − onehot), elementwise (each element read, then written:
// dlogits may alias logits); the target's p − 1 as expm1 (no cancellation when p → 1); ignored
// rows (target −1) are zero. float4 loads where the row width and pointers allow.
#include <cmath>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr int kXentThreads = 512;

struct Online {
  float m = -INFINITY;
  double s = 0;
  __device__ __forceinline__ void add(float x) {
    if (x > m) {
      s = s * exp(double(m) - double(x)) + 1.0;  // rare; e^(−∞) = 0 on the first one
      m = x;
    } else if (x > -INFINITY) {  // a −∞ logit adds nothing (and no ∞ − ∞)
      s += double(expf(float(double(x) - double(m))));
    } else if (x != x) {
      s = x;  // NaN propagates, as on the CPU
    }
  }
};

template <int W>
__global__ void __launch_bounds__(kXentThreads)
    forward_kernel(float* loss, float* lse_out, const float* logits, const int32_t* target,
                   int64_t N, int64_t V) {
  __shared__ double red[kMaxWarpsPerBlock];
  __shared__ float redf[kMaxWarpsPerBlock];
  const int64_t nv = V / W;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* l = logits + n * V;
    Online o;
    if constexpr (W == 4) {
      const float4* l4 = reinterpret_cast<const float4*>(l);
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const float4 f = l4[i];
        o.add(f.x), o.add(f.y), o.add(f.z), o.add(f.w);
      }
    } else {
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) o.add(l[i]);
    }
    const float M = block_max(o.m, redf);
    // This thread's share rescaled to the row max (s = 0 for a thread without elements).
    const double mine = o.s == 0 ? 0.0 : o.s * exp(double(o.m) - double(M));
    const double S = block_sum(mine, red);
    if (threadIdx.x == 0) {
      const double lse = double(M) + log(S);
      lse_out[n] = float(lse);
      const int32_t t = target[n];
      // A target outside [-1, V) (the CPU op's assertion) reads nothing: its loss is NaN, which
      // the trainer's non-finite check reports.
      loss[n] = t < 0 ? 0.f : t >= V ? __uint_as_float(0x7fc00000u) : float(lse - double(l[t]));
    }
  }
}

__device__ __forceinline__ float xent_grad(float l, float lse, float scale, bool is_target) {
  const float a = float(double(l) - double(lse));
  return scale * (is_target ? expm1f(a) : expf(a));
}

// Blocks (segment, row): segment blockIdx.y of each row's nv vectors.
template <int W>
__global__ void __launch_bounds__(kBlock)
    backward_kernel(float* dlogits, const float* logits, const float* lse, const int32_t* target,
                    float scale, int64_t N, int64_t V, int64_t per_seg) {
  const int64_t nv = V / W;
  const int64_t i0 = int64_t(blockIdx.y) * per_seg;
  const int64_t i1 = i0 + per_seg < nv ? i0 + per_seg : nv;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int64_t t = target[n];
    const float r = lse[n];
    const float* l = logits + n * V;
    float* d = dlogits + n * V;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
      float v[W];
      if constexpr (W == 4) {
        const float4 f = reinterpret_cast<const float4*>(l)[i];
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
      } else {
        v[0] = l[i];
      }
#pragma unroll
      for (int e = 0; e < W; ++e) v[e] = t < 0 ? 0.f : xent_grad(v[e], r, scale, i * W + e == t);
      if constexpr (W == 4)
        reinterpret_cast<float4*>(d)[i] = make_float4(v[0], v[1], v[2], v[3]);
      else
        d[i] = v[0];
    }
  }
}

bool vec4(int64_t V, const void* a, const void* b) {
  return V % 4 == 0 && (reinterpret_cast<uintptr_t>(a) & 15u) == 0 &&
         (reinterpret_cast<uintptr_t>(b) & 15u) == 0;
}

}  // namespace

void xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                  const Tensor& target) {
  const int64_t V = logits.size(-1), N = V ? logits.numel() / V : 0;
  if (N == 0) return;
  const float* l = logits.ptr<float>();
  const unsigned grid = unsigned(N < 65535 ? N : 65535);
  if (vec4(V, l, l))
    forward_kernel<4><<<grid, kXentThreads, 0, stream()>>>(loss.ptr<float>(), lse.ptr<float>(), l,
                                                           target.ptr<int32_t>(), N, V);
  else
    forward_kernel<1><<<grid, kXentThreads, 0, stream()>>>(loss.ptr<float>(), lse.ptr<float>(), l,
                                                           target.ptr<int32_t>(), N, V);
  ZAYA_GPU_LAUNCH_CHECK();
}

void xent_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                   const Tensor& target, double scale) {
  const int64_t V = logits.size(-1), N = V ? logits.numel() / V : 0;
  if (N == 0 || V == 0) return;
  float* d = dlogits.ptr<float>();
  const float* l = logits.ptr<float>();
  const bool v4 = vec4(V, d, l);
  const int64_t nv = V / (v4 ? 4 : 1);
  // Enough blocks to fill the device when N is small: split each row into segments of ≥ 4 vectors
  // per thread (the result does not depend on the split).
  const unsigned rows = unsigned(N < 65535 ? N : 65535);
  int64_t segs = (4 * int64_t(multiprocessor_count()) + rows - 1) / rows;
  const int64_t max_segs = (nv + 4 * kBlock - 1) / (4 * kBlock);
  segs = segs < max_segs ? segs : max_segs;
  segs = segs < 1 ? 1 : (segs > 65535 ? 65535 : segs);
  const int64_t per_seg = (nv + segs - 1) / segs;
  const dim3 grid{rows, unsigned(segs)};
  if (v4)
    backward_kernel<4><<<grid, kBlock, 0, stream()>>>(d, l, lse.ptr<float>(), target.ptr<int32_t>(),
                                                      float(scale), N, V, per_seg);
  else
    backward_kernel<1><<<grid, kBlock, 0, stream()>>>(d, l, lse.ptr<float>(), target.ptr<int32_t>(),
                                                      float(scale), N, V, per_seg);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
