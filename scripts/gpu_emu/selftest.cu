// The emulator's self-test (run.sh --selftest): a block sum must be right, and three bugs must be
// reported: __syncthreads after some threads returned, a full-warp shuffle with exited lanes, a
// grid over the limits. Exits 1 if any is missed.
#include <cstdio>
#include <stdexcept>
#include "ops/gpu/common.cuh"
using namespace zaya::gpu;
__global__ void sum_kernel(float* out, const float* x, int n) {
  __shared__ float part[kMaxWarpsPerBlock];
  float v = threadIdx.x < unsigned(n) ? x[threadIdx.x] : 0.f;
  float s = block_sum(v, part);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
__global__ void bad_sync(float* out) {
  if (threadIdx.x >= 100) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
__global__ void bad_shfl(float* out) {
  if (threadIdx.x % 32 < 16) out[threadIdx.x] = warp_sum(1.0f);
}
int main() {
  float x[256], out[256];
  for (int i = 0; i < 256; ++i) x[i] = float(i);
  sum_kernel<<<3, 256, 0, stream()>>>(out, x, 200);
  std::printf("sum %g (want %g) %g\n", out[0], 199.0 * 200 / 2, out[2]);
  if (out[0] != 19900.f || out[2] != 19900.f) return 1;
  try {
    bad_sync<<<1, 256, 0, stream()>>>(out);
    std::printf("bad_sync NOT caught\n");
    return 1;
  } catch (const std::exception& e) {
    std::printf("caught: %s\n", e.what());
  }
  try {
    bad_shfl<<<1, 64, 0, stream()>>>(out);
    std::printf("bad_shfl NOT caught\n");
    return 1;
  } catch (const std::exception& e) {
    std::printf("caught: %s\n", e.what());
  }
  try {
    bad_sync<<<dim3(1, 70000), 64, 0, stream()>>>(out);
    std::printf("grid NOT caught\n");
    return 1;
  } catch (const std::exception& e) {
    std::printf("caught: %s\n", e.what());
  }
  return 0;
}
