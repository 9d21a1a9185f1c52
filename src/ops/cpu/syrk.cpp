// sym_product (syrk.h): upper-triangle tiles through single-threaded BLAS calls, mirrored.
#include "ops/cpu/syrk.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

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

// Runs f with OpenMP's (so OpenBLAS's) thread count at 1 when called outside a parallel region:
// every task is then one single-threaded BLAS call of a shape fixed by the plan, whatever the team
// (OpenBLAS's bits depend on its thread count, ops/cpu/blas.h). The tiles call CBLAS themselves
// (blas_detail::call, ?syrk) rather than gemm(): in a team of one thread gemm() would cut a tile
// into its own panels, a different call shape from the one a larger team's tile gets.
template <class F>
void single_threaded(F&& f) {
  if (omp_in_parallel()) return f();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  f();
  omp_set_num_threads(threads);
}

// Finishes rows [r0, r1) of the [mi,nj] tile at (i0, j0) on or above the diagonal: adds the np
// partial sums (the same rows of partial[q·m·m ...], row stride m, q in order) onto the tile's
// upper part, then copies those rows' transpose below the diagonal (within a diagonal tile,
// i0 == j0, only the part right of the diagonal). The copy walks 8×8 sub-tiles through a
// transposed local buffer, so that the strided side is written row by row (a direct strided copy
// is ~4x slower at a 4 KiB row stride, m = 1024).
template <class T>
void finish_rows(T* c, int64_t ldc, const T* partial, int64_t np, int64_t m, int64_t i0, int64_t j0,
                 int64_t r0, int64_t r1, int64_t nj) {
  constexpr int64_t kSub = 8;
  const bool diagonal = i0 == j0;
  for (int64_t i = r0; i < r1; ++i) {
    T* row = c + (i0 + i) * ldc + j0;
    for (int64_t q = 0; q < np; ++q) {
      const T* p = partial + q * m * m + (i0 + i) * m + j0;
      for (int64_t j = diagonal ? i : 0; j < nj; ++j) row[j] += p[j];
    }
  }
  T buf[kSub][kSub];
  for (int64_t is = r0; is < r1; is += kSub)
    for (int64_t js = diagonal ? is : 0; js < nj; js += kSub) {
      const int64_t ie = std::min(r1, is + kSub), je = std::min(nj, js + kSub);
      if (ie - is == kSub && je - js == kSub && !(diagonal && is == js)) {
        // A whole sub-tile off the diagonal: fixed trip counts, so the copies unroll (about half
        // the time of the general loop below).
        const T* src = c + (i0 + is) * ldc + j0 + js;
        for (int64_t i = 0; i < kSub; ++i)
          for (int64_t j = 0; j < kSub; ++j) buf[j][i] = src[i * ldc + j];
        T* dst = c + (j0 + js) * ldc + i0 + is;
        for (int64_t j = 0; j < kSub; ++j)
          for (int64_t i = 0; i < kSub; ++i) dst[j * ldc + i] = buf[j][i];
        continue;
      }
      for (int64_t i = is; i < ie; ++i)
        for (int64_t j = js; j < je; ++j) buf[j - js][i - is] = c[(i0 + i) * ldc + j0 + j];
      for (int64_t j = js; j < je; ++j) {
        T* dst = c + (j0 + j) * ldc + i0;
        for (int64_t i = is; i < (diagonal ? std::min(ie, j) : ie); ++i)
          dst[i] = buf[j - js][i - is];
      }
    }
}

// Per-thread buffer of the partial sums over depth chunks 1.. (chunk 0 goes to C), grown on
// demand.
template <class T>
T* partial_buffer(size_t n) {
  thread_local std::vector<T> v;
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

SymPlan sym_plan(int64_t /*m*/, int64_t k) {
  return {kSymBlock, k >= 2 * kSymMinDepth ? 2 : 1};
}

template <class T>
void sym_product(bool trans, int64_t m, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                 int64_t ldc, SymPlan plan) {
  ZAYA_ASSERT(plan.block > 0 && plan.chunks > 0, "sym_product: block {} chunks {}", plan.block,
              plan.chunks);
  if (m == 0) return;
  const int64_t block = plan.block, nb = (m + block - 1) / block;
  // Depth chunks of kc (the last one shorter), none empty.
  const int64_t kc = std::max<int64_t>(1, (k + plan.chunks - 1) / plan.chunks);
  const int64_t nk = k == 0 ? 1 : (k + kc - 1) / kc;
  constexpr int64_t kStrip = 64;
  const int64_t strips = (std::min(block, m) + kStrip - 1) / kStrip;
  T* partial = nk > 1 ? partial_buffer<T>(size_t((nk - 1) * m * m)) : nullptr;
  // P's rows i0.. and depth l0.. start at x[i0·ldx + l0] (!trans) or x[l0·ldx + i0] (trans).
  auto panel = [&](int64_t i0, int64_t l0) {
    return trans ? x + l0 * ldx + i0 : x + i0 * ldx + l0;
  };
  // One task: depth chunk q of tile (bi, bj), bi ≤ bj; chunk 0 onto C (with beta), chunk q > 0
  // into partial sum q−1.
  auto task = [&](int64_t bi, int64_t bj, int64_t q) {
    const int64_t i0 = bi * block, j0 = bj * block, l0 = q * kc;
    const int64_t mi = std::min(block, m - i0), nj = std::min(block, m - j0);
    const int64_t kq = std::min(kc, k - l0);
    T* dst = q == 0 ? c + i0 * ldc + j0 : partial + (q - 1) * m * m + i0 * m + j0;
    const int64_t ld = q == 0 ? ldc : m;
    const T b = q == 0 ? beta : T(0);
    single_threaded([&] {
      if (bi == bj) {
        syrk_upper(trans, mi, kq, alpha, panel(i0, l0), ldx, b, dst, ld);
      } else {
        blas_detail::call(trans, !trans, mi, nj, kq, alpha, panel(i0, l0), ldx, panel(j0, l0), ldx,
                          b, dst, ld);
      }
    });
  };
  // The off-diagonal tiles' tasks (tile bi·nb + bj with bi < bj, the others skipped) first, then
  // the diagonal ones, which cost half as much: the team's last tasks are its smallest. Then each
  // tile on or above the diagonal is summed and mirrored.
#pragma omp parallel if (nb * nk > 1 && m * m * k > kParallelMin)
  {
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t t = 0; t < nb * nb * nk; ++t) {
      const int64_t bi = t / nk / nb, bj = t / nk % nb;
      if (bi < bj) task(bi, bj, t % nk);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nb * nk; ++t) task(t / nk, t / nk, t % nk);
      // Strips of kStrip rows of each tile on or above the diagonal (kStrip divides block or not:
      // the strips of a tile are [r, min(mi, r + kStrip))).
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nb * nb * strips; ++t) {
      const int64_t bi = t / strips / nb, bj = t / strips % nb, r0 = t % strips * kStrip;
      const int64_t mi = std::min(block, m - bi * block);
      if (bi <= bj && r0 < mi)
        finish_rows(c, ldc, partial, nk - 1, m, bi * block, bj * block, r0,
                    std::min(mi, r0 + kStrip), std::min(block, m - bj * block));
    }
  }
}

template <class T>
void sym_product(bool trans, int64_t m, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                 int64_t ldc) {
  sym_product(trans, m, k, alpha, x, ldx, beta, c, ldc, sym_plan(m, k));
}

int64_t sym_multiply_block(int64_t m) {
  // About a quarter of m (10 of 16 tiles computed), a multiple of 64, at least 128: at m = 512
  // (bench_muon's 4:1 shapes) 128 beat both 256 and 512, and 64 was no better.
  return std::max<int64_t>(128, (m / 4 + 63) / 64 * 64);
}

template <class T>
void sym_multiply(int64_t m, const T* p, int64_t ldp, const T* r, int64_t ldr, T* c, int64_t ldc,
                  int64_t block) {
  ZAYA_ASSERT(block > 0, "sym_multiply: block {}", block);
  if (m == 0) return;
  const int64_t nb = (m + block - 1) / block, tiles = nb * (nb + 1) / 2;
  constexpr int64_t kStrip = 64;
  const int64_t strips = (std::min(block, m) + kStrip - 1) / kStrip;
  // Tile t of the upper triangle, row by row: (bi, bj) with bi ≤ bj.
  auto tile = [&](int64_t t, int64_t& bi, int64_t& bj) {
    bi = 0;
    while (t >= nb - bi) t -= nb - bi, ++bi;
    bj = bi + t;
  };
#pragma omp parallel if (tiles > 1 && m * m * m > kParallelMin)
  {
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles; ++t) {
      int64_t bi, bj;
      tile(t, bi, bj);
      const int64_t i0 = bi * block, j0 = bj * block;
      const int64_t mi = std::min(block, m - i0), nj = std::min(block, m - j0);
      single_threaded([&] {
        blas_detail::call(false, false, mi, nj, m, T(1), p + i0 * ldp, ldp, r + j0, ldr, T(0),
                          c + i0 * ldc + j0, ldc);
      });
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles * strips; ++t) {
      int64_t bi, bj;
      tile(t / strips, bi, bj);
      const int64_t r0 = t % strips * kStrip, mi = std::min(block, m - bi * block);
      if (r0 < mi)
        finish_rows<T>(c, ldc, nullptr, 0, m, bi * block, bj * block, r0, std::min(mi, r0 + kStrip),
                       std::min(block, m - bj * block));
    }
  }
}

template <class T>
void sym_multiply(int64_t m, const T* p, int64_t ldp, const T* r, int64_t ldr, T* c, int64_t ldc) {
  sym_multiply(m, p, ldp, r, ldr, c, ldc, sym_multiply_block(m));
}

#define ZAYA_SYM_PRODUCT(T)                                                                   \
  template void sym_product<T>(bool, int64_t, int64_t, T, const T*, int64_t, T, T*, int64_t); \
  template void sym_product<T>(bool, int64_t, int64_t, T, const T*, int64_t, T, T*, int64_t,  \
                               SymPlan);                                                      \
  template void sym_multiply<T>(int64_t, const T*, int64_t, const T*, int64_t, T*, int64_t,   \
                                int64_t);                                                     \
  template void sym_multiply<T>(int64_t, const T*, int64_t, const T*, int64_t, T*, int64_t);
ZAYA_SYM_PRODUCT(float)
ZAYA_SYM_PRODUCT(double)
#undef ZAYA_SYM_PRODUCT

}  // namespace zaya::ops::cpu
