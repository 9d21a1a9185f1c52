// Exponential depth averaging on the CPU (docs/model.md §5.2, §8.8): r[N,R] += γ[R] ⊙ rprev[N,R] in place;
// backward drprev += γ ⊙ dr and dγ += Σ_n dr ⊙ rprev, the latter summed per column block in double
// (for_column_blocks: thread-count independent bits).
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

template <class T>
void forward(T* r_NR, const T* g_R, const T* rp_NR, int64_t N, int64_t R) {
#pragma omp parallel for schedule(static) if (N * R > kParallelMin)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < R; ++j) r_NR[n * R + j] += g_R[j] * rp_NR[n * R + j];
}

// drp_NR / dg_R may be null (not needed).
template <class T>
void backward(T* drp_NR, T* dg_R, const T* dr_NR, const T* rp_NR, const T* g_R, int64_t N,
              int64_t R) {
  for_column_blocks(N, R, [&](int64_t j0, int64_t j1) {
    double acc[kColBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* dr = dr_NR + n * R;
      const T* rp = rp_NR + n * R;
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += double(dr[j]) * double(rp[j]);
      if (drp_NR)
        for (int64_t j = j0; j < j1; ++j) drp_NR[n * R + j] += g_R[j] * dr[j];
    }
    if (dg_R)
      for (int64_t j = j0; j < j1; ++j) dg_R[j] += T(acc[j - j0]);
  });
}

}  // namespace

void eda_forward(const Tensor& r, const Tensor& gamma, const Tensor& rprev) {
  const int64_t R = r.size(-1), N = R ? r.numel() / R : 0;
  ZAYA_DISPATCH_FLOAT(
      r.dtype, forward(r.ptr<scalar_t>(), gamma.ptr<scalar_t>(), rprev.ptr<scalar_t>(), N, R));
}

void eda_backward(const Tensor& drprev, const Tensor& dgamma, const Tensor& dr, const Tensor& rprev,
                  const Tensor& gamma) {
  const int64_t R = dr.size(-1), N = R ? dr.numel() / R : 0;
  ZAYA_DISPATCH_FLOAT(
      dr.dtype, backward(ptr_or_null<scalar_t>(drprev), ptr_or_null<scalar_t>(dgamma),
                         dr.ptr<scalar_t>(), rprev.ptr<scalar_t>(), gamma.ptr<scalar_t>(), N, R));
}

}  // namespace zaya::ops::cpu
