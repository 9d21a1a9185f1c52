// Residual-scaled merge h = (o + bo) ⊙ ao + (hp + br) ⊙ ar (docs/model.md §3, §8.3) and the fused
// merge + RMSNorm, on the CPU. Parameter gradients are summed over rows per column block in double
// (for_column_blocks: thread-count independent bits). The fused ops call the RMSNorm row kernels of
// rmsnorm_row.h, as rmsnorm.cpp does, so they give the same bits as the two ops in sequence.
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/rmsnorm_row.h"

namespace zaya::ops::cpu {

namespace {

// Legend: N tokens, D model width. hp/ar/br (and their gradients) are null for sub-layer 0.
template <class T>
struct Merge {
  const T *o_ND, *hp_ND, *ao_D, *bo_D, *ar_D, *br_D;
};

template <class T>
Merge<T> merge_args(const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                    const Tensor& ar, const Tensor& br) {
  return {ptr_or_null<T>(o),  ptr_or_null<T>(hp), ptr_or_null<T>(ao),
          ptr_or_null<T>(bo), ptr_or_null<T>(ar), ptr_or_null<T>(br)};
}

template <class T>
inline void merge_row(T* h, const Merge<T>& m, int64_t n, int64_t D) {
  const T* o = m.o_ND + n * D;
  if (m.hp_ND) {
    const T* hp = m.hp_ND + n * D;
    for (int64_t j = 0; j < D; ++j)
      h[j] = (o[j] + m.bo_D[j]) * m.ao_D[j] + (hp[j] + m.br_D[j]) * m.ar_D[j];
  } else {
    for (int64_t j = 0; j < D; ++j) h[j] = (o[j] + m.bo_D[j]) * m.ao_D[j];
  }
}

// Optional RMSNorm weight gradient folded into the merge-backward pass (fused op only).
template <class T>
struct NormGrad {
  T* dw_D = nullptr;
  const T *dx_ND = nullptr, *h_ND = nullptr, *rstd_N = nullptr;
};

// One pass over column blocks: dao/dbo/dar/dbr (and dw) += Σ_n …, dhp += ar ⊙ dh, do_ = ao ⊙ dh.
// do_ is written last in each row so that it may alias dh.
template <class T>
void merge_backward_blocks(T* do_ND, T* dhp_ND, T* dao_D, T* dbo_D, T* dar_D, T* dbr_D,
                           const NormGrad<T>& ng, const T* dh_ND, const Merge<T>& m, int64_t N,
                           int64_t D) {
  for_column_blocks(N, D, [&](int64_t j0, int64_t j1) {
    double sw[kColBlock] = {}, sao[kColBlock] = {}, sbo[kColBlock] = {}, sar[kColBlock] = {},
           sbr[kColBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* dh = dh_ND + n * D;
      const T* o = m.o_ND + n * D;
      if (ng.dw_D) rmsnorm_dw_row(sw, ng.dx_ND + n * D, ng.h_ND + n * D, ng.rstd_N[n], j0, j1);
      for (int64_t j = j0; j < j1; ++j) {
        sao[j - j0] += double(o[j] + m.bo_D[j]) * double(dh[j]);
        sbo[j - j0] += double(m.ao_D[j]) * double(dh[j]);
      }
      if (m.hp_ND) {
        const T* hp = m.hp_ND + n * D;
        for (int64_t j = j0; j < j1; ++j) {
          sar[j - j0] += double(hp[j] + m.br_D[j]) * double(dh[j]);
          sbr[j - j0] += double(m.ar_D[j]) * double(dh[j]);
        }
        if (dhp_ND) {
          T* dhp = dhp_ND + n * D;
          for (int64_t j = j0; j < j1; ++j) dhp[j] += m.ar_D[j] * dh[j];
        }
      }
      if (do_ND) {
        T* d = do_ND + n * D;
        for (int64_t j = j0; j < j1; ++j) d[j] = m.ao_D[j] * dh[j];
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      if (ng.dw_D) ng.dw_D[j] += T(sw[j - j0]);
      if (dao_D) dao_D[j] += T(sao[j - j0]);
      if (dbo_D) dbo_D[j] += T(sbo[j - j0]);
      if (m.hp_ND && dar_D) dar_D[j] += T(sar[j - j0]);
      if (m.hp_ND && dbr_D) dbr_D[j] += T(sbr[j - j0]);
    }
  });
}

template <class T>
void merge_forward_rows(T* h_ND, const Merge<T>& m, int64_t N, int64_t D) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) merge_row(h_ND + n * D, m, n, D);
}

template <class T>
void merge_rmsnorm_forward_rows(T* h_ND, T* x_ND, T* rstd_N, const Merge<T>& m, const T* w_D,
                                int64_t N, int64_t D, float eps) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    T* h = h_ND + n * D;
    merge_row(h, m, n, D);
    rstd_N[n] = rmsnorm_forward_row(x_ND + n * D, h, w_D, D, eps);
  }
}

// Rows of o: returns D and sets N.
int64_t merge_dims(int64_t* N, const Tensor& o) {
  const int64_t D = o.size(-1);
  *N = D ? o.numel() / D : 0;
  return D;
}

}  // namespace

void residual_merge_forward(const Tensor& h, const Tensor& o, const Tensor& hp, const Tensor& ao,
                            const Tensor& bo, const Tensor& ar, const Tensor& br) {
  int64_t N;
  const int64_t D = merge_dims(&N, o);
  ZAYA_DISPATCH_FLOAT(
      o.dtype,
      merge_forward_rows(h.ptr<scalar_t>(), merge_args<scalar_t>(o, hp, ao, bo, ar, br), N, D));
}

void residual_merge_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                             const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                             const Tensor& dh, const Tensor& o, const Tensor& hp, const Tensor& ao,
                             const Tensor& bo, const Tensor& ar, const Tensor& br) {
  int64_t N;
  const int64_t D = merge_dims(&N, o);
  ZAYA_DISPATCH_FLOAT(o.dtype, {
    using T = scalar_t;
    merge_backward_blocks<T>(ptr_or_null<T>(do_), ptr_or_null<T>(dhp), ptr_or_null<T>(dao),
                             ptr_or_null<T>(dbo), ptr_or_null<T>(dar), ptr_or_null<T>(dbr),
                             NormGrad<T>{}, dh.ptr<T>(), merge_args<T>(o, hp, ao, bo, ar, br), N,
                             D);
  });
}

void merge_rmsnorm_forward(const Tensor& h, const Tensor& x, const Tensor& rstd, const Tensor& o,
                           const Tensor& hp, const Tensor& ao, const Tensor& bo, const Tensor& ar,
                           const Tensor& br, const Tensor& w, float eps) {
  int64_t N;
  const int64_t D = merge_dims(&N, o);
  ZAYA_DISPATCH_FLOAT(
      o.dtype, merge_rmsnorm_forward_rows(
                   h.ptr<scalar_t>(), x.ptr<scalar_t>(), rstd.ptr<scalar_t>(),
                   merge_args<scalar_t>(o, hp, ao, bo, ar, br), w.ptr<scalar_t>(), N, D, eps));
}

void merge_rmsnorm_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                            const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                            const Tensor& dw, const Tensor& dh, const Tensor& dx, const Tensor& h,
                            const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                            const Tensor& ar, const Tensor& br, const Tensor& w,
                            const Tensor& rstd) {
  int64_t N;
  const int64_t D = merge_dims(&N, o);
  ZAYA_DISPATCH_FLOAT(o.dtype, {
    using T = scalar_t;
    T* dh_ND = dh.ptr<T>();
    const T *dx_ND = dx.ptr<T>(), *h_ND = h.ptr<T>(), *w_D = w.ptr<T>(), *rstd_N = rstd.ptr<T>();
    rmsnorm_backward_rows(dh_ND, dx_ND, h_ND, w_D, rstd_N, N, D, /*accumulate=*/true);
    NormGrad<T> ng{ptr_or_null<T>(dw), dx_ND, h_ND, rstd_N};
    merge_backward_blocks<T>(ptr_or_null<T>(do_), ptr_or_null<T>(dhp), ptr_or_null<T>(dao),
                             ptr_or_null<T>(dbo), ptr_or_null<T>(dar), ptr_or_null<T>(dbr), ng,
                             dh_ND, merge_args<T>(o, hp, ao, bo, ar, br), N, D);
  });
}

}  // namespace zaya::ops::cpu
