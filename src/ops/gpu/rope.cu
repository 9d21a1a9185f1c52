// rope_forward / rope_backward on the GPU: partial NeoX rotary embedding in place (docs/model.md §4.6,
// backward §8.5 step 2), mirroring ops/cpu/rope.cpp. One thread per rotated pair (n, h, i < m):
// (x_i, x_{i+m}) turns by sign·angle of (n mod T, i); dims ≥ r = 2m pass through. The tables are
// F32 (fp32 RoPE, docs/model.md §0.2.7) and come from rope_tables (ops/gpu/rope.cpp: the CPU's values, copied).
#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

__global__ void rotate_kernel(float* __restrict__ x, const float* __restrict__ cos,
                              const float* __restrict__ sin, int64_t BT, int64_t T, int64_t H,
                              int64_t d, int64_t m, float sign) {
  ZAYA_GPU_FOR(e, BT * H * m) {
    const int64_t i = e % m, nh = e / m, n = nh / H;
    const float c = cos[(n % T) * m + i], s = sign * sin[(n % T) * m + i];
    float* v = x + nh * d;
    const float a = v[i], b = v[i + m];
    v[i] = a * c - b * s;
    v[i + m] = b * c + a * s;
  }
}

void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, float sign) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), d = x.size(3), m = cos.size(1);
  const int64_t n = B * T * H * m;
  if (n == 0) return;
  rotate_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(x.ptr<float>(), cos.ptr<float>(),
                                                        sin.ptr<float>(), B * T, T, H, d, m, sign);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  rope_apply(x, cos, sin, 1.0f);
}

void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin) {
  rope_apply(dx, cos, sin, -1.0f);
}

}  // namespace zaya::ops::gpu
