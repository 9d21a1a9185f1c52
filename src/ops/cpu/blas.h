// Row-major GEMM through CBLAS (OpenBLAS): the one place the CPU ops call BLAS.
// C[m,n] = alpha·op(A)·op(B) + beta·C, where op(X) = Xᵀ when asked, op(A) is [m,k] and op(B) [k,n];
// lda/ldb/ldc are the row strides of A, B and C as stored.
#pragma once
#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace zaya::ops::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  if (m == 0 || n == 0) return;  // C is empty: nothing to do (BLAS may reject the strides)
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace zaya::ops::cpu
