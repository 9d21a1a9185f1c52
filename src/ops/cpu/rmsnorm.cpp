// rmsnorm_forward / rmsnorm_backward on the CPU (spec §3, §8.2). Row statistics (mean x², ⟨ĝ, n⟩)
// accumulate in double; dw is summed over rows per block of columns in double, so its bits do not
// depend on the thread count. residual.cpp's fused merge_rmsnorm repeats these row formulas
// exactly.
#include <algorithm>
#include <cmath>

#include "ops/check.h"
#include "ops/ops.h"

namespace zaya::ops {

namespace {

constexpr int64_t kParallelMin = 1 << 15;  // smaller calls run serially: a team costs more

constexpr int64_t kColBlock = 64;  // columns per reduction task (any value gives the same bits)

template <class T>
void forward_rows(T* y_ND, T* rstd_N, const T* x_ND, const T* w_D, int64_t N, int64_t D,
                  float eps) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = x_ND + n * D;
    T* y = y_ND + n * D;
    double ss = 0;
    for (int64_t j = 0; j < D; ++j) ss += double(x[j]) * double(x[j]);
    const T r = T(1.0 / std::sqrt(ss / double(D) + double(eps)));
    rstd_N[n] = r;
    for (int64_t j = 0; j < D; ++j) y[j] = w_D[j] * (r * x[j]);
  }
}

template <class T>
void backward_dx_rows(T* dx_ND, const T* dy_ND, const T* x_ND, const T* w_D, const T* rstd_N,
                      int64_t N, int64_t D, bool accumulate) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* dy = dy_ND + n * D;
    const T* x = x_ND + n * D;
    T* dx = dx_ND + n * D;
    const T r = rstd_N[n];
    double s = 0;  // Σ ĝ ⊙ n
    for (int64_t j = 0; j < D; ++j) s += double(dy[j] * w_D[j]) * double(r * x[j]);
    const T c = T(s / double(D));
    if (accumulate) {
      for (int64_t j = 0; j < D; ++j) dx[j] += r * (dy[j] * w_D[j] - (r * x[j]) * c);
    } else {
      for (int64_t j = 0; j < D; ++j) dx[j] = r * (dy[j] * w_D[j] - (r * x[j]) * c);
    }
  }
}

template <class T>
void backward_dw(T* dw_D, const T* dy_ND, const T* x_ND, const T* rstd_N, int64_t N, int64_t D) {
  const int64_t blocks = (D + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j0 = b * kColBlock, j1 = std::min(D, j0 + kColBlock);
    double acc[kColBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* dy = dy_ND + n * D;
      const T* x = x_ND + n * D;
      const T r = rstd_N[n];
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += double(dy[j]) * double(r * x[j]);
    }
    for (int64_t j = j0; j < j1; ++j) dw_D[j] += T(acc[j - j0]);
  }
}

}  // namespace

void rmsnorm_forward(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  check_float(x, y, rstd, w);
  ZAYA_ASSERT(y.defined() && rstd.defined() && w.defined(),
              "rmsnorm_forward: y, rstd and w are required");
  check_numel(y, N * D, "rmsnorm_forward: y");
  check_numel(rstd, N, "rmsnorm_forward: rstd");
  check_numel(w, D, "rmsnorm_forward: w");
  ZAYA_DISPATCH_FLOAT(x.dtype, forward_rows(y.ptr<scalar_t>(), rstd.ptr<scalar_t>(),
                                            x.ptr<scalar_t>(), w.ptr<scalar_t>(), N, D, eps));
}

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate_dx) {
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  check_float(x, dx, dw, dy, w, rstd);
  ZAYA_ASSERT(dy.defined() && w.defined() && rstd.defined(),
              "rmsnorm_backward: dy, w and rstd are required");
  check_numel(dy, N * D, "rmsnorm_backward: dy");
  check_numel(w, D, "rmsnorm_backward: w");
  check_numel(rstd, N, "rmsnorm_backward: rstd");
  if (dx.defined()) check_numel(dx, N * D, "rmsnorm_backward: dx");
  if (dw.defined()) check_numel(dw, D, "rmsnorm_backward: dw");
  ZAYA_DISPATCH_FLOAT(x.dtype, {
    const scalar_t* dy_ND = dy.ptr<scalar_t>();
    const scalar_t* x_ND = x.ptr<scalar_t>();
    const scalar_t* rstd_N = rstd.ptr<scalar_t>();
    if (dx.defined())
      backward_dx_rows(dx.ptr<scalar_t>(), dy_ND, x_ND, w.ptr<scalar_t>(), rstd_N, N, D,
                       accumulate_dx);
    if (dw.defined()) backward_dw(dw.ptr<scalar_t>(), dy_ND, x_ND, rstd_N, N, D);
  });
}

}  // namespace zaya::ops
