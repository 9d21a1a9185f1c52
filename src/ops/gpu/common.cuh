// Device-side helpers shared by the kernels of ops/gpu/*.cu: launch geometry, warp and block
// reductions that work for 32-lane (NVIDIA, AMD gfx11) and 64-lane (AMD gfx9) warps, bf16 as raw
// bits, and the row/column conventions of ops/ops.h. Include after ops/backend.h.
#pragma once
#include <cstdint>

#include "ops/gpu/runtime.h"

namespace zaya::gpu {

// Lanes per warp, as the device code sees it (a compile-time constant per target).
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE)
constexpr int kWarp = __AMDGCN_WAVEFRONT_SIZE;
#else
constexpr int kWarp = 32;
#endif
// The largest warp of any target: block sizes are multiples of it, so a block holds whole warps
// everywhere, and shared arrays of per-warp partials have kMaxWarpsPerBlock entries.
constexpr int kMaxWarp = 64;
constexpr int kBlock = 256;  // the default block size of elementwise and row kernels
constexpr int kMaxWarpsPerBlock = 1024 / 32;

// Blocks for n elements at `per_block` each (at least 1; a grid-stride loop covers the rest).
inline unsigned blocks_for(int64_t n, int per_block = kBlock, int64_t cap = 65535) {
  int64_t b = (n + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return unsigned(b < cap ? b : cap);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += ZAYA_SHFL_XOR(v, m);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += ZAYA_SHFL_XOR(v, m);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v = fmaxf(v, ZAYA_SHFL_XOR(v, m));
  return v;
}

// Sum of v over the block, returned to every thread. `partials` is shared memory of
// kMaxWarpsPerBlock entries; the call synchronises the block (all threads must reach it).
template <class T>
__device__ __forceinline__ T block_sum(T v, T* partials) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  v = warp_sum(v);
  __syncthreads();  // partials may still be read by a previous call
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < warps; ++w) total += partials[w];  // same order in every thread
  return total;
}

__device__ __forceinline__ float block_max(float v, float* partials) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  float m = partials[0];
  for (int w = 1; w < warps; ++w) m = fmaxf(m, partials[w]);
  return m;
}

// bf16 ↔ f32 on raw bits (core/dtype.h's rounding: nearest, ties to even; NaN stays NaN).
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// Loads element i of a float or bf16 array as f32 (weights that stay in their stored dtype).
__device__ __forceinline__ float load_f32(const float* p, int64_t i) {
  return p[i];
}
__device__ __forceinline__ float load_f32(const uint16_t* p, int64_t i) {
  return bf16_bits_to_float(p[i]);
}
// An F32 array read as bf16 (train.precision = bf16: GEMM operands rounded as they are loaded).
struct RoundedF32 {
  float v;
};
__device__ __forceinline__ float round_to_bf16(float f) {
  return bf16_bits_to_float(float_to_bf16_bits(f));
}
__device__ __forceinline__ float load_f32(const RoundedF32* p, int64_t i) {
  return round_to_bf16(p[i].v);
}

// Grid-stride loop over [0, n).
#define ZAYA_GPU_FOR(i, n)                                                         \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < int64_t(n); \
       i += int64_t(blockDim.x) * gridDim.x)

}  // namespace zaya::gpu
