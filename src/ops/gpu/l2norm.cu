// l2norm_scale_forward / l2norm_scale_backward on the GPU: per-head L2 normalisation to √d with the
// linear key temperature (docs/model.md §4.5, backward §8.5 step 3), mirroring ops/cpu/l2norm.cpp.
//
// One warp per head row x[n, h, :d]: norms, dot products and the per-head scale in double (as the
// CPU), each output rounded once. norm = max(‖x‖, floor); where the floor was hit (norm ≤ floor
// > 0) the backward is linear. dtemp[h] += √d·Σ_n ⟨x̂, dy⟩: the per-row dots go to scratch and one
// block per head sums them in a fixed order (no atomics). Each element of dx is read (dy) and
// written by the same lane, so dx may alias dy.
#include <cmath>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

struct NormDims {
  int64_t N;
  int H, d;
};

NormDims norm_dims(const Tensor& x) {
  return {x.size(0) * x.size(1), int(x.size(2)), int(x.size(3))};
}

__device__ __forceinline__ double head_scale(const float* temp, int64_t h, int d) {
  return sqrt(double(d)) * (temp ? double(temp[h]) : 1.0);
}

// Warp-uniform loop over the N·H rows (a warp's lanes always take part together).
#define ZAYA_FOR_ROW_OF_WARP(row, rows)                                                \
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp; \
       row < (rows); row += int64_t(gridDim.x) * (blockDim.x / kWarp))

__global__ void norm_forward_kernel(float* y, float* __restrict__ norm, const float* x,
                                    const float* __restrict__ temp, NormDims D, double floor) {
  const int lane = threadIdx.x % kWarp;
  ZAYA_FOR_ROW_OF_WARP(row, D.N * D.H) {
    const float* xr = x + row * D.d;
    double ss = 0;
    for (int i = lane; i < D.d; i += kWarp) ss += double(xr[i]) * double(xr[i]);
    ss = warp_sum(ss);
    const double s = sqrt(ss), nrm = s < floor ? floor : s;
    const double k = head_scale(temp, row % D.H, D.d) / nrm;
    if (lane == 0) norm[row] = float(nrm);
    for (int i = lane; i < D.d; i += kWarp) y[row * D.d + i] = float(double(xr[i]) * k);
  }
}

// dx = (s/‖x‖)(dy − x̂⟨x̂,dy⟩), or (s/floor)·dy where clamped; dots[row] = ⟨x̂, dy⟩ if wanted.
__global__ void norm_backward_kernel(float* dx, double* __restrict__ dots, const float* dy,
                                     const float* __restrict__ x, const float* __restrict__ norm,
                                     const float* __restrict__ temp, NormDims D, double floor) {
  const int lane = threadIdx.x % kWarp;
  ZAYA_FOR_ROW_OF_WARP(row, D.N * D.H) {
    const float* xr = x + row * D.d;
    const float* dyr = dy + row * D.d;
    const double nrm = double(norm[row]);
    double dot = 0;
    for (int i = lane; i < D.d; i += kWarp) dot += double(xr[i]) * double(dyr[i]);
    dot = warp_sum(dot) / nrm;
    const double k = head_scale(temp, row % D.H, D.d) / nrm;
    const bool clamped = floor > 0 && nrm <= floor;
    for (int i = lane; i < D.d; i += kWarp) {
      const double g = double(dyr[i]);
      dx[row * D.d + i] = float(clamped ? k * g : k * (g - double(xr[i]) / nrm * dot));
    }
    if (dots && lane == 0) dots[row] = dot;
  }
}

// dtemp[h] += √d · Σ_n dots[n·H + h]: block h, a fixed strided split and tree.
__global__ void dtemp_kernel(float* __restrict__ dtemp, const double* __restrict__ dots,
                             NormDims D) {
  __shared__ double partials[kMaxWarpsPerBlock];
  const int h = blockIdx.x;
  double s = 0;
  for (int64_t n = threadIdx.x; n < D.N; n += blockDim.x) s += dots[n * D.H + h];
  s = block_sum(s, partials);
  if (threadIdx.x == 0) dtemp[h] += float(sqrt(double(D.d)) * s);
}

unsigned row_blocks(int64_t rows) {
  return blocks_for(rows, kBlock / 32);
}

}  // namespace

void l2norm_scale_forward(const Tensor& y, const Tensor& norm, const Tensor& x, const Tensor& temp,
                          float floor) {
  const NormDims D = norm_dims(x);
  const int64_t rows = D.N * D.H;
  if (rows == 0) return;
  norm_forward_kernel<<<row_blocks(rows), kBlock, 0, stream()>>>(
      y.ptr<float>(), norm.ptr<float>(), x.ptr<float>(),
      temp.defined() ? temp.ptr<float>() : nullptr, D, double(floor));
  ZAYA_GPU_LAUNCH_CHECK();
}

void l2norm_scale_backward(const Tensor& dx, const Tensor& dtemp, const Tensor& dy, const Tensor& x,
                           const Tensor& norm, const Tensor& temp, float floor) {
  const NormDims D = norm_dims(x);
  const int64_t rows = D.N * D.H;
  if (rows == 0) return;
  const bool want_dtemp = dtemp.defined();
  Scratch dots(want_dtemp ? size_t(rows) * sizeof(double) : 0);
  norm_backward_kernel<<<row_blocks(rows), kBlock, 0, stream()>>>(
      dx.ptr<float>(), dots.as<double>(), dy.ptr<float>(), x.ptr<float>(), norm.ptr<float>(),
      temp.defined() ? temp.ptr<float>() : nullptr, D, double(floor));
  ZAYA_GPU_LAUNCH_CHECK();
  if (!want_dtemp) return;
  dtemp_kernel<<<unsigned(D.H), kBlock, 0, stream()>>>(dtemp.ptr<float>(), dots.as<double>(), D);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
