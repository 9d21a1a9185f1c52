// RMSNorm row kernels shared by rmsnorm.cpp and the fused merge_rmsnorm in residual.cpp. Both call
// these same functions, which is what makes the fused ops bitwise equal to merge then RMSNorm.
// Row statistics (mean x², ⟨ĝ, n⟩) and the dw sums accumulate in double.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

// y[D] = w ⊙ (ρ x), ρ = (mean x² + eps)^-1/2; returns ρ (the saved rstd).
template <class T>
inline T rmsnorm_forward_row(T* y, const T* x, const T* w, int64_t D, float eps) {
  double ss = 0;
  for (int64_t j = 0; j < D; ++j) ss += double(x[j]) * double(x[j]);
  const T r = T(1.0 / std::sqrt(ss / double(D) + double(eps)));
  for (int64_t j = 0; j < D; ++j) y[j] = w[j] * (r * x[j]);
  return r;
}

// dx[D] = ρ(ĝ − n·mean(ĝ⊙n)), ĝ = dy⊙w, n = ρx (+= with accumulate).
template <class T>
inline void rmsnorm_backward_row(T* dx, const T* dy, const T* x, const T* w, T r, int64_t D,
                                 bool accumulate) {
  double s = 0;  // Σ ĝ ⊙ n
  for (int64_t j = 0; j < D; ++j) s += double(dy[j] * w[j]) * double(r * x[j]);
  const T c = T(s / double(D));
  if (accumulate) {
    for (int64_t j = 0; j < D; ++j) dx[j] += r * (dy[j] * w[j] - (r * x[j]) * c);
  } else {
    for (int64_t j = 0; j < D; ++j) dx[j] = r * (dy[j] * w[j] - (r * x[j]) * c);
  }
}

// The row loop of the above over x[N,D], dy[N,D], rstd[N] → dx[N,D].
template <class T>
void rmsnorm_backward_rows(T* dx_ND, const T* dy_ND, const T* x_ND, const T* w_D, const T* rstd_N,
                           int64_t N, int64_t D, bool accumulate) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n)
    rmsnorm_backward_row(dx_ND + n * D, dy_ND + n * D, x_ND + n * D, w_D, rstd_N[n], D, accumulate);
}

// One row's share of dw = Σ_n dy ⊙ (ρ x), for the columns [j0, j1) of a reduction block:
// acc[j − j0] += dy[j]·(ρ x[j]) in double.
template <class T>
inline void rmsnorm_dw_row(double* acc, const T* dy, const T* x, T r, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) acc[j - j0] += double(dy[j]) * double(r * x[j]);
}

}  // namespace zaya::ops::cpu
