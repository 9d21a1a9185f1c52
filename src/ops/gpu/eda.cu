// Exponential depth averaging on the GPU (ops/cpu/eda.cpp): r[N,R] += γ[R] ⊙ rprev[N,R] in place;
// backward drprev += γ ⊙ dr and dγ += Σ_n dr ⊙ rprev. The row kernels of ops/gpu/rmsnorm_row.cuh:
// a thread owns the same columns of every row, so dγ is a per-block column sum in double in
// registers, then added over the blocks in a fixed order (finish_columns): deterministic.
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
    forward_kernel(float* r, const float* gamma, const float* rprev, int64_t N, int64_t R) {
  const int64_t nv = R / W;
  Slice<W, K> g, x, p;
  load(g, gamma, nv);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    load(x, r + n * R, nv);
    load(p, rprev + n * R, nv);
    ZAYA_ROW_EACH(k, e) x.v[k][e] += g.v[k][e] * p.v[k][e];
    store(r + n * R, x, nv);
  }
}

template <int W, int K>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(float* drprev, double* part, const float* dr, const float* rprev,
                    const float* gamma, int64_t N, int64_t R) {
  const int64_t nv = R / W;
  Slice<W, K> g, d, x;
  Acc<W, K> acc;
  acc.zero();
  load(g, gamma, nv);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    load(d, dr + n * R, nv);
    if (part) {
      load(x, rprev + n * R, nv);
      ZAYA_ROW_EACH(k, e) acc.v[k][e] += double(d.v[k][e]) * double(x.v[k][e]);
    }
    if (drprev) {
      load(x, drprev + n * R, nv);
      ZAYA_ROW_EACH(k, e) x.v[k][e] += g.v[k][e] * d.v[k][e];
      store(drprev + n * R, x, nv);
    }
  }
  if (part) acc.store_partial(part, R);
}

}  // namespace

void eda_forward(const Tensor& r, const Tensor& gamma, const Tensor& rprev) {
  const int64_t R = r.size(-1), N = R ? r.numel() / R : 0;
  if (N == 0) return;
  float* r_NR = r.ptr<float>();
  const float *g_R = gamma.ptr<float>(), *rp_NR = rprev.ptr<float>();
  const RowGeom geo = row_geom(R, vec4_ok(R, r_NR, g_R, rp_NR));
  dispatch(geo, [&](auto W_, auto K_) {
    forward_kernel<decltype(W_)::value, decltype(K_)::value>
        <<<row_grid(N), geo.threads, 0, stream()>>>(r_NR, g_R, rp_NR, N, R);
  });
  ZAYA_GPU_LAUNCH_CHECK();
}

void eda_backward(const Tensor& drprev, const Tensor& dgamma, const Tensor& dr, const Tensor& rprev,
                  const Tensor& gamma) {
  const int64_t R = dr.size(-1), N = R ? dr.numel() / R : 0;
  if (N == 0 || (!drprev.defined() && !dgamma.defined())) return;
  float* drp = ptr_or_null<float>(drprev);
  const float *dr_NR = dr.ptr<float>(), *rp_NR = rprev.ptr<float>(), *g_R = gamma.ptr<float>();
  const RowGeom geo = row_geom(R, vec4_ok(R, drp, dr_NR, rp_NR, g_R));
  const unsigned G = dgamma.defined() ? col_grid(N) : row_grid(N);
  Scratch part(dgamma.defined() ? size_t(G) * size_t(R) * sizeof(double) : 0);
  dispatch(geo, [&](auto W_, auto K_) {
    backward_kernel<decltype(W_)::value, decltype(K_)::value>
        <<<G, geo.threads, 0, stream()>>>(drp, part.as<double>(), dr_NR, rp_NR, g_R, N, R);
  });
  ZAYA_GPU_LAUNCH_CHECK();
  if (dgamma.defined()) finish_columns(dgamma.ptr<float>(), part.as<double>(), int(G), R);
}

}  // namespace zaya::ops::gpu
