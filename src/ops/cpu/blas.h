// Row-major GEMM through CBLAS (OpenBLAS): the one place the CPU ops call BLAS.
// C[m,n] = alpha·op(A)·op(B) + beta·C, where op(X) = Xᵀ when asked, op(A) is [m,k] and op(B) [k,n];
// lda/ldb/ldc are the row strides of A, B and C as stored.
//
// Threading and determinism: OpenBLAS (Debian's OpenMP build) blocks its work by its thread count,
// so one sgemm call gives different bits on 1 and 2 threads. Here a large product is cut into
// panels of C's rows (or columns, when C is wide) whose size depends only on the shape; the panels
// run in our own OpenMP team, each as one single-threaded BLAS call (OpenBLAS runs single-threaded
// inside a parallel region, and when the team's size is 1). Each element of C is one panel's
// sum, so the bits do not depend on the thread count, and BLAS never starts a second team.
#pragma once
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace zaya::ops::cpu {

namespace blas_detail {

template <class T>
void call(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// Products below this many multiply-adds run as one call on the calling thread.
inline constexpr int64_t kPanelMinWork = int64_t(1) << 21;
// Panel size along the split dimension: a function of the shape only, a multiple of 64, at least
// 256 and about a quarter of the extent (every panel repacks the other operand, so panels stay
// large: at the model's GEMM shapes on 2 threads this split stays within ~5% of OpenBLAS's own
// threading, where 64-row panels lost much more).
inline int64_t panel_size(int64_t extent) {
  const int64_t target = (extent + 3) / 4;
  return std::clamp((target + 63) / 64 * 64, int64_t(256), int64_t(2048));
}

// One BLAS call with OpenMP's thread count at 1, so OpenBLAS does not start its own team.
template <class T>
void call_single_threaded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                          const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                          int64_t ldc) {
  if (omp_in_parallel())
    return call(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  call(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  omp_set_num_threads(threads);
}

}  // namespace blas_detail

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  using namespace blas_detail;
  if (m == 0 || n == 0) return;  // C is empty: nothing to do (BLAS may reject the strides)
  const bool split_rows = m >= n;
  const int64_t extent = split_rows ? m : n, panel = panel_size(extent);
  const int64_t panels = (extent + panel - 1) / panel;
  if (panels == 1 || m * n * k < kPanelMinWork || omp_in_parallel()) {
    call_single_threaded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t i0 = p * panel, len = std::min(panel, extent - i0);
    if (split_rows) {  // rows i0… of C and op(A): A is [m,k] (row i0) or stored [k,m] (column i0)
      call(trans_a, trans_b, len, n, k, alpha, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb, beta,
           c + i0 * ldc, ldc);
    } else {  // columns i0… of C and op(B): B is [k,n] (column i0) or stored [n,k] (row i0)
      call(trans_a, trans_b, m, len, k, alpha, a, lda, trans_b ? b + i0 * ldb : b + i0, ldb, beta,
           c + i0, ldc);
    }
  }
}

}  // namespace zaya::ops::cpu
