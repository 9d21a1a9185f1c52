// linear_forward / linear_backward on the CPU: OpenBLAS sgemm/dgemm (row-major CBLAS).
#include <cblas.h>

#include "ops/check.h"
#include "ops/ops.h"

namespace zaya::ops {

namespace {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta,
          const Tensor& c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  auto ta = trans_a ? CblasTrans : CblasNoTrans;
  auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if (c.dtype == DType::F32) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, float(alpha), a.ptr<float>(), lda, b.ptr<float>(),
                ldb, float(beta), c.ptr<float>(), ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.ptr<double>(), lda, b.ptr<double>(), ldb,
                beta, c.ptr<double>(), ldc);
  }
}

}  // namespace

void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  check_float(y, x, w);
  ZAYA_ASSERT(x.numel() == N * I && y.numel() == N * O, "linear: x {} w {} y {}", x.shape_str(),
              w.shape_str(), y.shape_str());
  if (b.defined()) ZAYA_ASSERT(b.numel() == O && b.dtype == y.dtype, "linear: bias {}", b.shape_str());
  if (N == 0) return;
  double beta = accumulate ? 1.0 : 0.0;
  if (b.defined()) {
    ZAYA_DISPATCH_FLOAT(y.dtype, {
      scalar_t* yp = y.ptr<scalar_t>();
      const scalar_t* bp = b.ptr<scalar_t>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o) yp[n * O + o] = (accumulate ? yp[n * O + o] : 0) + bp[o];
    });
    beta = 1.0;
  }
  gemm(false, true, N, O, I, 1.0, x, I, w, I, beta, y, O);
}

void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                     const Tensor& x, const Tensor& w, bool accumulate_dx) {
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  check_float(dy, x, w);
  ZAYA_ASSERT(dy.numel() == N * O, "linear_backward: dy {} for x {} w {}", dy.shape_str(),
              x.shape_str(), w.shape_str());
  if (N == 0) return;
  if (dx.defined()) {
    ZAYA_ASSERT(dx.numel() == N * I, "linear_backward: dx {}", dx.shape_str());
    gemm(false, false, N, I, O, 1.0, dy, O, w, I, accumulate_dx ? 1.0 : 0.0, dx, I);
  }
  if (dw.defined()) {
    ZAYA_ASSERT(dw.numel() == O * I, "linear_backward: dw {}", dw.shape_str());
    gemm(true, false, O, I, N, 1.0, dy, O, x, I, 1.0, dw, I);
  }
  if (db.defined()) {
    ZAYA_ASSERT(db.numel() == O, "linear_backward: db {}", db.shape_str());
    ZAYA_DISPATCH_FLOAT(db.dtype, {
      scalar_t* dbp = db.ptr<scalar_t>();
      const scalar_t* dyp = dy.ptr<scalar_t>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o) dbp[o] += dyp[n * O + o];
    });
  }
}

}  // namespace zaya::ops
