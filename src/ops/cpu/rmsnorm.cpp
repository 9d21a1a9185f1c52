// rmsnorm_forward / rmsnorm_backward on the CPU (docs/model.md §3, §8.2). The row formulas live in
// rmsnorm_row.h, shared with residual.cpp's fused merge_rmsnorm. dw is summed over rows per block
// of columns in double (for_column_blocks), so its bits do not depend on the thread count.
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/rmsnorm_row.h"

namespace zaya::ops::cpu {

namespace {

template <class T>
void forward_rows(T* y_ND, T* rstd_N, const T* x_ND, const T* w_D, int64_t N, int64_t D,
                  float eps) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n)
    rstd_N[n] = rmsnorm_forward_row(y_ND + n * D, x_ND + n * D, w_D, D, eps);
}

template <class T>
void backward_dw(T* dw_D, const T* dy_ND, const T* x_ND, const T* rstd_N, int64_t N, int64_t D) {
  for_column_blocks(N, D, [&](int64_t j0, int64_t j1) {
    double acc[kColBlock] = {};
    for (int64_t n = 0; n < N; ++n)
      rmsnorm_dw_row(acc, dy_ND + n * D, x_ND + n * D, rstd_N[n], j0, j1);
    for (int64_t j = j0; j < j1; ++j) dw_D[j] += T(acc[j - j0]);
  });
}

}  // namespace

void rmsnorm_forward(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  ZAYA_DISPATCH_FLOAT(x.dtype, forward_rows(y.ptr<scalar_t>(), rstd.ptr<scalar_t>(),
                                            x.ptr<scalar_t>(), w.ptr<scalar_t>(), N, D, eps));
}

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate_dx) {
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  ZAYA_DISPATCH_FLOAT(x.dtype, {
    const scalar_t* dy_ND = dy.ptr<scalar_t>();
    const scalar_t* x_ND = x.ptr<scalar_t>();
    const scalar_t* rstd_N = rstd.ptr<scalar_t>();
    if (dx.defined())
      rmsnorm_backward_rows(dx.ptr<scalar_t>(), dy_ND, x_ND, w.ptr<scalar_t>(), rstd_N, N, D,
                            accumulate_dx);
    if (dw.defined()) backward_dw(dw.ptr<scalar_t>(), dy_ND, x_ND, rstd_N, N, D);
  });
}

}  // namespace zaya::ops::cpu
