// sym_product (syrk.h): upper-triangle tiles through single-threaded BLAS calls, mirrored.
#include "ops/cpu/syrk.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>

#include "core/assert.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

// The upper triangle of the [n,n] tile at c (row stride ldc) = alpha·P·Pᵀ + beta·tile, P [n,k]
// given as in sym_product.
template <class T>
void syrk_upper(bool trans, int64_t n, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                int64_t ldc) {
  const auto t = trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_ssyrk(CblasRowMajor, CblasUpper, t, n, k, alpha, x, ldx, beta, c, ldc);
  } else {
    cblas_dsyrk(CblasRowMajor, CblasUpper, t, n, k, alpha, x, ldx, beta, c, ldc);
  }
}

// c[(j0+j)·ldc + i0+i] = c[(i0+i)·ldc + j0+j] for the [mi,nj] tile at (i0, j0) (above the
// diagonal), or for j > i within a diagonal tile (i0 == j0). Walked in 16×16 sub-tiles so that the
// strided side stays in L1.
template <class T>
void mirror_tile(T* c, int64_t ldc, int64_t i0, int64_t j0, int64_t mi, int64_t nj) {
  constexpr int64_t kSub = 16;
  const bool diagonal = i0 == j0;
  for (int64_t is = 0; is < mi; is += kSub)
    for (int64_t js = diagonal ? is : 0; js < nj; js += kSub) {
      const int64_t ie = std::min(mi, is + kSub), je = std::min(nj, js + kSub);
      for (int64_t i = is; i < ie; ++i) {
        const T* src = c + (i0 + i) * ldc + j0;
        for (int64_t j = diagonal ? std::max(js, i + 1) : js; j < je; ++j)
          c[(j0 + j) * ldc + i0 + i] = src[j];
      }
    }
}

}  // namespace

template <class T>
void sym_product(bool trans, int64_t m, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                 int64_t ldc, int64_t block) {
  ZAYA_ASSERT(block > 0, "sym_product: block {}", block);
  if (m == 0) return;
  const int64_t nb = (m + block - 1) / block;
  // A row panel of P starts at row i0 of X (!trans) or at column i0 of X (trans).
  auto panel = [&](int64_t i0) { return trans ? x + i0 : x + i0 * ldx; };
  auto tile = [&](int64_t bi, int64_t bj) {
    const int64_t i0 = bi * block, j0 = bj * block;
    const int64_t mi = std::min(block, m - i0), nj = std::min(block, m - j0);
    T* cij = c + i0 * ldc + j0;
    if (bi == bj) {
      syrk_upper(trans, mi, k, alpha, panel(i0), ldx, beta, cij, ldc);
    } else {
      gemm(trans, !trans, mi, nj, k, alpha, panel(i0), ldx, panel(j0), ldx, beta, cij, ldc);
    }
    mirror_tile(c, ldc, i0, j0, mi, nj);
  };
  // The off-diagonal tiles (bi < bj: task bi·nb + bj, the others skipped) first, then the
  // diagonal ones, which cost half as much: the team's last tasks are its smallest.
#pragma omp parallel if (nb > 1 && m * m * k > kParallelMin)
  {
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t q = 0; q < nb * nb; ++q)
      if (q / nb < q % nb) tile(q / nb, q % nb);
#pragma omp for schedule(dynamic, 1)
    for (int64_t d = 0; d < nb; ++d) tile(d, d);
  }
}

template void sym_product<float>(bool, int64_t, int64_t, float, const float*, int64_t, float,
                                 float*, int64_t, int64_t);
template void sym_product<double>(bool, int64_t, int64_t, double, const double*, int64_t, double,
                                  double*, int64_t, int64_t);

}  // namespace zaya::ops::cpu
