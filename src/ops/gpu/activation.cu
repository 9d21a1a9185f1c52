// Exact (erf) GELU on the GPU (ops/cpu/activation.cpp), elementwise on any shape: y = x·Φ(x),
// dx = dy·(Φ(x) + x·φ(x)), Φ(x) = ½·erfc(−x/√2) in f32 as the CPU; and the decoder's SwiGLU
// middle silu_mul, act = g / (1 + e^−g) · u in f32. float4 loads where every pointer is aligned.
#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;    // 1/√2
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/√(2π)

__device__ __forceinline__ float normal_cdf(float x) {
  return 0.5f * erfcf(-x * kInvSqrt2);
}

struct GeluForward {
  __device__ __forceinline__ float operator()(float x, float) const { return x * normal_cdf(x); }
};
struct GeluBackward {
  __device__ __forceinline__ float operator()(float v, float dy) const {
    const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    return dy * (normal_cdf(v) + v * pdf);
  }
};

// out[i] = f(a[i], b[i]) (b may be null: f gets 0) over n elements, 4 at a time when aligned.
template <class F, bool kVec>
__global__ void map_kernel(float* out, const float* a, const float* b, int64_t n, F f) {
  if constexpr (kVec) {
    ZAYA_GPU_FOR(i, n / 4) {
      const float4 x = reinterpret_cast<const float4*>(a)[i];
      const float4 y = b ? reinterpret_cast<const float4*>(b)[i] : make_float4(0, 0, 0, 0);
      reinterpret_cast<float4*>(out)[i] =
          make_float4(f(x.x, y.x), f(x.y, y.y), f(x.z, y.z), f(x.w, y.w));
    }
    // The n % 4 tail, by the first threads of the grid.
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, i = n / 4 * 4 + t;
    if (i < n) out[i] = f(a[i], b ? b[i] : 0.f);
  } else {
    ZAYA_GPU_FOR(i, n) out[i] = f(a[i], b ? b[i] : 0.f);
  }
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <class F>
void map(float* out, const float* a, const float* b, int64_t n, F f) {
  if (n == 0) return;
  if (aligned16(out) && aligned16(a) && (!b || aligned16(b)))
    map_kernel<F, true><<<blocks_for((n + 3) / 4), kBlock, 0, stream()>>>(out, a, b, n, f);
  else
    map_kernel<F, false><<<blocks_for(n), kBlock, 0, stream()>>>(out, a, b, n, f);
  ZAYA_GPU_LAUNCH_CHECK();
}

__device__ __forceinline__ float silu_mul1(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

// act[m, j] = silu(gu[m, j]) · gu[m, H + j]: rows m = blockIdx.y (strided), columns over x.
template <int W>
__global__ void silu_mul_kernel(float* act, const float* gu, int64_t M, int64_t H) {
  const int64_t hv = H / W;
  for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
    const float* g = gu + m * 2 * H;
    float* a = act + m * H;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < hv;
         i += int64_t(blockDim.x) * gridDim.x) {
      if constexpr (W == 4) {
        const float4 x = reinterpret_cast<const float4*>(g)[i];
        const float4 u = reinterpret_cast<const float4*>(g + H)[i];
        reinterpret_cast<float4*>(a)[i] = make_float4(silu_mul1(x.x, u.x), silu_mul1(x.y, u.y),
                                                      silu_mul1(x.z, u.z), silu_mul1(x.w, u.w));
      } else {
        a[i] = silu_mul1(g[i], g[H + i]);
      }
    }
  }
}

}  // namespace

void gelu_forward(const Tensor& y, const Tensor& x) {
  map(y.ptr<float>(), x.ptr<float>(), nullptr, x.numel(), GeluForward{});
}

void gelu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x) {
  map(dx.ptr<float>(), x.ptr<float>(), dy.ptr<float>(), x.numel(), GeluBackward{});
}

void silu_mul(const Tensor& act, const Tensor& gu) {
  const int64_t M = act.shape[0], H = M ? act.numel() / M : 0;
  if (M == 0 || H == 0) return;
  float* a = act.ptr<float>();
  const float* g = gu.ptr<float>();
  const bool v4 = H % 4 == 0 && aligned16(a) && aligned16(g);
  const int64_t hv = v4 ? H / 4 : H;
  const dim3 grid{blocks_for(hv), unsigned(M < 65535 ? M : 65535)};
  if (v4)
    silu_mul_kernel<4><<<grid, kBlock, 0, stream()>>>(a, g, M, H);
  else
    silu_mul_kernel<1><<<grid, kBlock, 0, stream()>>>(a, g, M, H);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
