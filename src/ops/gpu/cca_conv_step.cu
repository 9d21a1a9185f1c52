// cca_conv_step_forward on the GPU: the two-stage CCA conv (docs/model.md §4.2) continued from a carried
// state, for decoding (docs/model.md §4.8), mirroring ops/cpu/cca_conv_step.cpp. Activations F32; w0 and w1
// F32 or BF16 (raw bits, widened in registers); no backward.
//
// Legend: L new positions, C channels, d group width. ext = [s0 ; s1 ; u_0 … u_{L−1}]; y row r
// (r = 0 … L, position j = r − 1) = b0 + w0[c,0,0]·ext[r] + w0[c,0,1]·ext[r+1]. One kernel writes
// y and advances the state (the thread of column c that reads state[·][c] also rewrites it);
// stage 1 is a warp-per-channel GEMV for short chunks (decode: w1 streamed once) and the tiled
// product of cca_conv_forward (ops/gpu/cca_conv.h) for longer ones. Sum orders differ from the
// CPU's (equal to rounding).
#include "ops/backend.h"
#include "ops/gpu/cca_conv.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr int kMaxGemvRows = 16;  // chunks up to this many positions use the GEMV

// Slot e = s·C + c of L·C: slot 0 of column c writes y rows 0 and 1 (the rows that read the
// state) and then the new state; slot s ≥ 1 writes y row s + 1.
template <class W>
__global__ void step_stage0_kernel(float* __restrict__ y, float* __restrict__ state,
                                   const float* __restrict__ u, const W* __restrict__ w0,
                                   const float* __restrict__ b0, int64_t L, int64_t C) {
  ZAYA_GPU_FOR(e, L * C) {
    const int64_t s = e / C, c = e % C;
    const float k0 = load_f32(w0, 2 * c), k1 = load_f32(w0, 2 * c + 1), bias = b0[c];
    if (s == 0) {
      const float s0 = state[c], s1 = state[C + c], u0 = u[c];
      y[c] = bias + k0 * s0 + k1 * s1;
      y[C + c] = bias + k0 * s1 + k1 * u0;
      // The new state: ext rows L and L+1.
      state[c] = L == 1 ? s1 : u[(L - 2) * C + c];
      state[C + c] = u[(L - 1) * C + c];
    } else {
      const int64_t r = s + 1;  // ext[r] = u_{r−2}, ext[r+1] = u_{r−1}
      y[r * C + c] = bias + k0 * u[(r - 2) * C + c] + k1 * u[(r - 1) * C + c];
    }
  }
}

// z[t, c] = b1[c] + Σ_e w1[c][e]·pair_t[e] over e < 2d (e = 2i + k: y_{t−1+k}[g·d+i]), one warp
// per channel: each lane reads its weights once and keeps L ≤ kMaxGemvRows sums. The channel loop
// is warp-uniform and grid-strided: the host sizes the grid for 32-lane warps, so 64-lane warps
// (AMD gfx9) take two channels each.
template <class W>
__global__ void step_gemv_kernel(float* __restrict__ z, const float* __restrict__ y,
                                 const W* __restrict__ w1, const float* __restrict__ b1, int L,
                                 int64_t C, int d) {
  const int warps = blockDim.x / kWarp, lane = threadIdx.x % kWarp;
  for (int64_t c = int64_t(blockIdx.x) * warps + threadIdx.x / kWarp; c < C;
       c += int64_t(gridDim.x) * warps) {
    const int64_t g = c / d;
    const W* w = w1 + c * 2 * d;
    const float* yg = y + g * d;
    float acc[kMaxGemvRows];
#pragma unroll
    for (int t = 0; t < kMaxGemvRows; ++t) acc[t] = 0;
    for (int e = lane; e < 2 * d; e += kWarp) {
      const float wv = load_f32(w, e);
      const float* col = yg + (e & 1) * C + (e >> 1);  // y row t + k at t = 0
#pragma unroll
      for (int t = 0; t < kMaxGemvRows; ++t)
        if (t < L) acc[t] += wv * col[int64_t(t) * C];
    }
    const float bias = b1[c];
#pragma unroll
    for (int t = 0; t < kMaxGemvRows; ++t) {
      if (t < L) {  // L is the same for the whole warp
        const float s = warp_sum(acc[t]);
        if (lane == 0) z[int64_t(t) * C + c] = bias + s;
      }
    }
  }
}

template <class W>
void step(const Tensor& z, const Tensor& state, const Tensor& u, const W* w0, const Tensor& b0,
          const Tensor& w1, const Tensor& b1, int64_t L, int64_t C, int64_t d) {
  Scratch y_buf(size_t((L + 1) * C) * sizeof(float));
  float* y = y_buf.as<float>();
  step_stage0_kernel<<<blocks_for(L * C), kBlock, 0, stream()>>>(
      y, state.ptr<float>(), u.ptr<float>(), w0, b0.ptr<float>(), L, C);
  ZAYA_GPU_LAUNCH_CHECK();
  const bool bf16 = w1.dtype == DType::BF16;
  if (L <= kMaxGemvRows) {
    const unsigned blocks = blocks_for(C, kBlock / 32);  // channels per block of 32-lane warps
    if (bf16)
      step_gemv_kernel<<<blocks, kBlock, 0, stream()>>>(z.ptr<float>(), y, w1.ptr<uint16_t>(),
                                                        b1.ptr<float>(), int(L), C, int(d));
    else
      step_gemv_kernel<<<blocks, kBlock, 0, stream()>>>(z.ptr<float>(), y, w1.ptr<float>(),
                                                        b1.ptr<float>(), int(L), C, int(d));
    ZAYA_GPU_LAUNCH_CHECK();
  } else if (bf16) {
    cca_stage1_forward(z.ptr<float>(), y, w1.ptr<uint16_t>(), b1.ptr<float>(), 1, L, C, d);
  } else {
    cca_stage1_forward(z.ptr<float>(), y, w1.ptr<float>(), b1.ptr<float>(), 1, L, C, d);
  }
}

}  // namespace

void cca_conv_step_forward(const Tensor& z, const Tensor& state, const Tensor& u, const Tensor& w0,
                           const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  const int64_t L = u.size(0), C = u.size(1), d = w1.size(1);
  if (L == 0 || C == 0) return;
  if (w0.dtype == DType::BF16)
    step(z, state, u, w0.ptr<uint16_t>(), b0, w1, b1, L, C, d);
  else
    step(z, state, u, w0.ptr<float>(), b0, w1, b1, L, C, d);
}

}  // namespace zaya::ops::gpu
