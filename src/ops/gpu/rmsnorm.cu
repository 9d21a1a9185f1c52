// rmsnorm_forward / rmsnorm_backward on the GPU (ops/cpu/rmsnorm.cpp). Row kernels of
// ops/gpu/rmsnorm_row.cuh (shared with the fused merge_rmsnorm of residual.cu): a block owns rows,
// a thread the same columns of each row in registers, float4 loads where aligned; statistics in
// double. dw = Σ_n dy ⊙ (ρx) is summed per block in registers, then over the blocks in a fixed
// order (finish_columns): deterministic, no atomics.
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/rmsnorm_row.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;
using namespace zaya::gpu::rows;

namespace {

template <int W, int K>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(float* y, float* rstd, const float* x, const float* w, int64_t N, int64_t D,
                   float eps) {
  __shared__ double red[kMaxWarpsPerBlock];
  const int64_t nv = D / W;
  Slice<W, K> wv, xv, yv;
  load(wv, w, nv);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    load(xv, x + n * D, nv);
    const float r = rms_forward(yv, xv, wv, D, eps, red);
    store(y + n * D, yv, nv);
    if (threadIdx.x == 0) rstd[n] = r;
  }
}

// dx (optional; += with accumulate) and the per-block partials of dw (optional, part[G,D]).
template <int W, int K>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(float* dx, double* part, const float* dy, const float* x, const float* w,
                    const float* rstd, int64_t N, int64_t D, bool accumulate) {
  __shared__ double red[kMaxWarpsPerBlock];
  const int64_t nv = D / W;
  Slice<W, K> wv, dyv, xv, dxv;
  Acc<W, K> acc;
  acc.zero();
  load(wv, w, nv);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    load(dyv, dy + n * D, nv);
    load(xv, x + n * D, nv);
    const float r = rstd[n];
    if (dx) {  // the same for every thread of the block
      if (accumulate) load(dxv, dx + n * D, nv);
      rms_backward(dxv, dyv, xv, wv, r, D, accumulate, red);
      store(dx + n * D, dxv, nv);
    }
    if (part) rms_dw(acc, dyv, xv, r);
  }
  if (part) acc.store_partial(part, D);
}

}  // namespace

void rmsnorm_forward(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  if (N == 0) return;
  float* y_ND = y.ptr<float>();
  const float *x_ND = x.ptr<float>(), *w_D = w.ptr<float>();
  const RowGeom g = row_geom(D, vec4_ok(D, y_ND, x_ND, w_D));
  dispatch(g, [&](auto W_, auto K_) {
    forward_kernel<decltype(W_)::value, decltype(K_)::value>
        <<<row_grid(N), g.threads, 0, stream()>>>(y_ND, rstd.ptr<float>(), x_ND, w_D, N, D, eps);
  });
  ZAYA_GPU_LAUNCH_CHECK();
}

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate_dx) {
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  if (N == 0 || (!dx.defined() && !dw.defined())) return;
  float* dx_ND = ptr_or_null<float>(dx);
  const float *dy_ND = dy.ptr<float>(), *x_ND = x.ptr<float>(), *w_D = w.ptr<float>();
  const RowGeom g = row_geom(D, vec4_ok(D, dx_ND, dy_ND, x_ND, w_D));
  const unsigned G = dw.defined() ? col_grid(N) : row_grid(N);
  Scratch part(dw.defined() ? size_t(G) * size_t(D) * sizeof(double) : 0);
  dispatch(g, [&](auto W_, auto K_) {
    backward_kernel<decltype(W_)::value, decltype(K_)::value><<<G, g.threads, 0, stream()>>>(
        dx_ND, part.as<double>(), dy_ND, x_ND, w_D, rstd.ptr<float>(), N, D, accumulate_dx);
  });
  ZAYA_GPU_LAUNCH_CHECK();
  if (dw.defined()) finish_columns(dw.ptr<float>(), part.as<double>(), int(G), D);
}

}  // namespace zaya::ops::gpu
