// Residual-scaled merge h = (o + bo) ⊙ ao + (hp + br) ⊙ ar (ops/cpu/residual.cpp) and the fused
// merge + RMSNorm on the GPU: the seed system's fused add+norm, one pass per row with each input
// read once (the row kernels of ops/gpu/rmsnorm_row.cuh: a thread's columns in registers, float4
// loads where aligned, block reductions in double). The fused ops run the same row functions with
// the same geometry as rmsnorm.cu, so they give the bits of the two ops in sequence. Parameter
// gradients (dao, dbo, dar, dbr, dw) are per-block column sums in double, added over the blocks in
// a fixed order (finish_columns). dbo and dbr are ao·Σdh and ar·Σdh (one sum serves both; equal to
// the CPU's Σ ao·dh up to double rounding).
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/rmsnorm_row.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;
using namespace zaya::gpu::rows;

namespace {

// The merge's inputs; hp, ar, br are null for sub-layer 0.
struct Merge {
  const float *o, *hp, *ao, *bo, *ar, *br;
};

// The merge's [D] parameters, this thread's columns.
template <int W, int K>
struct MergeParams {
  Slice<W, K> ao, bo, ar, br;
  __device__ __forceinline__ void load_all(const Merge& m, int64_t nv) {
    load(ao, m.ao, nv);
    load(bo, m.bo, nv);
    if (m.hp) {
      load(ar, m.ar, nv);
      load(br, m.br, nv);
    }
  }
};

// h = (o + bo)·ao (+ (hp + br)·ar) for row n.
template <int W, int K>
__device__ __forceinline__ void merge_row(Slice<W, K>& h, const Merge& m,
                                          const MergeParams<W, K>& p, int64_t n, int64_t D) {
  const int64_t nv = D / W;
  Slice<W, K> o;
  load(o, m.o + n * D, nv);
  if (m.hp) {
    Slice<W, K> hp;
    load(hp, m.hp + n * D, nv);
    ZAYA_ROW_EACH(k, e) {
      h.v[k][e] =
          (o.v[k][e] + p.bo.v[k][e]) * p.ao.v[k][e] + (hp.v[k][e] + p.br.v[k][e]) * p.ar.v[k][e];
    }
  } else {
    ZAYA_ROW_EACH(k, e) h.v[k][e] = (o.v[k][e] + p.bo.v[k][e]) * p.ao.v[k][e];
  }
}

// h always; with kNorm also x = RMSNorm(h; w) and rstd.
template <int W, int K, bool kNorm>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(float* h, float* x, float* rstd, Merge m, const float* w, int64_t N, int64_t D,
                   float eps) {
  __shared__ double red[kMaxWarpsPerBlock];
  const int64_t nv = D / W;
  MergeParams<W, K> p;
  p.load_all(m, nv);
  Slice<W, K> wv, hv, xv;
  if (kNorm) load(wv, w, nv);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    merge_row(hv, m, p, n, D);
    store(h + n * D, hv, nv);
    if (kNorm) {
      const float r = rms_forward(xv, hv, wv, D, eps, red);
      store(x + n * D, xv, nv);
      if (threadIdx.x == 0) rstd[n] = r;
    }
  }
}

// The outputs of a merge backward (null = skipped) and the fused op's RMSNorm inputs.
struct MergeGrads {
  float *do_, *dhp;
  bool dao, dsum, dar, dw;  // which column sums are needed (dsum: Σ dh for dbo/dbr)
};
struct NormIn {
  const float *dx, *h, *w, *rstd;
};

// Partials part[4][G][D]: Σ(o+bo)·dh, Σ dh, Σ(hp+br)·dh, Σ dx·(ρh).
enum { kPartAo = 0, kPartSum = 1, kPartAr = 2, kPartW = 3, kParts = 4 };

// Per row: (kNorm) dh += RMSNorm backward of dx, written back to dh; then do_ = ao·dh,
// dhp += ar·dh and the column sums. do_ may alias dh: each thread reads its elements of dh before
// it writes them, and writes do_ last.
template <int W, int K, bool kNorm>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(MergeGrads gr, double* part, float* dh, Merge m, NormIn ni, int64_t N,
                    int64_t D) {
  __shared__ double red[kMaxWarpsPerBlock];
  const int64_t nv = D / W;
  MergeParams<W, K> p;
  p.load_all(m, nv);
  Slice<W, K> wv, t;
  if (kNorm) load(wv, ni.w, nv);
  Acc<W, K> s_ao, s_sum, s_ar, s_w;
  s_ao.zero(), s_sum.zero(), s_ar.zero(), s_w.zero();
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    load(t, dh + n * D, nv);
    if (kNorm) {
      Slice<W, K> dxv, hv;
      load(dxv, ni.dx + n * D, nv);
      load(hv, ni.h + n * D, nv);
      const float r = ni.rstd[n];
      rms_backward(t, dxv, hv, wv, r, D, /*accumulate=*/true, red);
      if (gr.dw) rms_dw(s_w, dxv, hv, r);
      if (gr.do_ != dh) store(dh + n * D, t, nv);  // aliased: do_ overwrites it below
    }
    if (gr.dao) {
      Slice<W, K> o;
      load(o, m.o + n * D, nv);
      ZAYA_ROW_EACH(k, e) {
        s_ao.v[k][e] += double(o.v[k][e] + p.bo.v[k][e]) * double(t.v[k][e]);
      }
    }
    if (gr.dsum) {
      ZAYA_ROW_EACH(k, e) s_sum.v[k][e] += double(t.v[k][e]);
    }
    if (m.hp) {
      if (gr.dar) {
        Slice<W, K> hp;
        load(hp, m.hp + n * D, nv);
        ZAYA_ROW_EACH(k, e) {
          s_ar.v[k][e] += double(hp.v[k][e] + p.br.v[k][e]) * double(t.v[k][e]);
        }
      }
      if (gr.dhp) {
        Slice<W, K> d;
        load(d, gr.dhp + n * D, nv);
        ZAYA_ROW_EACH(k, e) d.v[k][e] += p.ar.v[k][e] * t.v[k][e];
        store(gr.dhp + n * D, d, nv);
      }
    }
    if (gr.do_) {
      Slice<W, K> d;
      ZAYA_ROW_EACH(k, e) d.v[k][e] = p.ao.v[k][e] * t.v[k][e];
      store(gr.do_ + n * D, d, nv);
    }
  }
  if (!part) return;  // the same for every thread; no synchronisation follows
  const int64_t GD = int64_t(gridDim.x) * D;
  if (gr.dao) s_ao.store_partial(part + kPartAo * GD, D);
  if (gr.dsum) s_sum.store_partial(part + kPartSum * GD, D);
  if (gr.dar) s_ar.store_partial(part + kPartAr * GD, D);
  if (gr.dw) s_w.store_partial(part + kPartW * GD, D);
}

Merge merge_args(const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                 const Tensor& ar, const Tensor& br) {
  return {o.ptr<float>(),  ptr_or_null<float>(hp), ao.ptr<float>(),
          bo.ptr<float>(), ptr_or_null<float>(ar), ptr_or_null<float>(br)};
}

// The geometry of a row kernel over all of these pointers (float4 only if all are aligned).
RowGeom merge_geom(int64_t D, const Merge& m, const float* a, const float* b, const float* c,
                   const float* d, const float* e) {
  return row_geom(D, vec4_ok(D, m.o, m.hp, m.ao, m.bo, m.ar, m.br, a, b, c, d, e));
}

void launch_forward(bool norm, float* h, float* x, float* rstd, const Merge& m, const float* w,
                    int64_t N, int64_t D, float eps) {
  if (N == 0) return;
  // Same geometry rule as rmsnorm_forward on (h, x, w) when o/hp/params are aligned alike.
  const RowGeom g = merge_geom(D, m, h, x, w, nullptr, nullptr);
  dispatch(g, [&](auto W_, auto K_) {
    constexpr int W = decltype(W_)::value, K = decltype(K_)::value;
    if (norm)
      forward_kernel<W, K, true>
          <<<row_grid(N), g.threads, 0, stream()>>>(h, x, rstd, m, w, N, D, eps);
    else
      forward_kernel<W, K, false>
          <<<row_grid(N), g.threads, 0, stream()>>>(h, x, rstd, m, w, N, D, eps);
  });
  ZAYA_GPU_LAUNCH_CHECK();
}

struct ParamGrads {
  float *dao, *dbo, *dar, *dbr, *dw;
};

void launch_backward(bool norm, float* do_, float* dhp, const ParamGrads& pg, float* dh,
                     const Merge& m, const NormIn& ni, int64_t N, int64_t D) {
  if (N == 0) return;
  const bool hp = m.hp != nullptr;
  MergeGrads gr{do_,
                hp ? dhp : nullptr,
                pg.dao != nullptr,
                pg.dbo != nullptr || (hp && pg.dbr != nullptr),
                hp && pg.dar != nullptr,
                norm && pg.dw != nullptr};
  const bool sums = gr.dao || gr.dsum || gr.dar || gr.dw;
  if (!norm && !sums && !gr.do_ && !gr.dhp) return;
  const unsigned G = sums ? col_grid(N) : row_grid(N);
  Scratch part(sums ? size_t(kParts) * G * size_t(D) * sizeof(double) : 0);
  const RowGeom g = merge_geom(D, m, do_, gr.dhp, dh, ni.dx, ni.h);
  dispatch(g, [&](auto W_, auto K_) {
    constexpr int W = decltype(W_)::value, K = decltype(K_)::value;
    if (norm)
      backward_kernel<W, K, true>
          <<<G, g.threads, 0, stream()>>>(gr, part.as<double>(), dh, m, ni, N, D);
    else
      backward_kernel<W, K, false>
          <<<G, g.threads, 0, stream()>>>(gr, part.as<double>(), dh, m, ni, N, D);
  });
  ZAYA_GPU_LAUNCH_CHECK();
  if (!sums) return;
  const double* p = part.as<double>();
  const int64_t GD = int64_t(G) * D;
  if (gr.dw) finish_columns(pg.dw, p + kPartW * GD, int(G), D);
  if (gr.dao) finish_columns(pg.dao, p + kPartAo * GD, int(G), D);
  if (gr.dsum) {
    finish_columns(pg.dbo, p + kPartSum * GD, int(G), D, m.ao);
    if (hp) finish_columns(pg.dbr, p + kPartSum * GD, int(G), D, m.ar);
  }
  if (gr.dar) finish_columns(pg.dar, p + kPartAr * GD, int(G), D);
}

}  // namespace

void residual_merge_forward(const Tensor& h, const Tensor& o, const Tensor& hp, const Tensor& ao,
                            const Tensor& bo, const Tensor& ar, const Tensor& br) {
  const int64_t D = o.size(-1), N = D ? o.numel() / D : 0;
  launch_forward(false, h.ptr<float>(), nullptr, nullptr, merge_args(o, hp, ao, bo, ar, br),
                 nullptr, N, D, 0.f);
}

void residual_merge_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                             const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                             const Tensor& dh, const Tensor& o, const Tensor& hp, const Tensor& ao,
                             const Tensor& bo, const Tensor& ar, const Tensor& br) {
  const int64_t D = o.size(-1), N = D ? o.numel() / D : 0;
  launch_backward(false, ptr_or_null<float>(do_), ptr_or_null<float>(dhp),
                  {ptr_or_null<float>(dao), ptr_or_null<float>(dbo), ptr_or_null<float>(dar),
                   ptr_or_null<float>(dbr), nullptr},
                  dh.ptr<float>(), merge_args(o, hp, ao, bo, ar, br), NormIn{}, N, D);
}

void merge_rmsnorm_forward(const Tensor& h, const Tensor& x, const Tensor& rstd, const Tensor& o,
                           const Tensor& hp, const Tensor& ao, const Tensor& bo, const Tensor& ar,
                           const Tensor& br, const Tensor& w, float eps) {
  const int64_t D = o.size(-1), N = D ? o.numel() / D : 0;
  launch_forward(true, h.ptr<float>(), x.ptr<float>(), rstd.ptr<float>(),
                 merge_args(o, hp, ao, bo, ar, br), w.ptr<float>(), N, D, eps);
}

void merge_rmsnorm_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                            const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                            const Tensor& dw, const Tensor& dh, const Tensor& dx, const Tensor& h,
                            const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                            const Tensor& ar, const Tensor& br, const Tensor& w,
                            const Tensor& rstd) {
  const int64_t D = o.size(-1), N = D ? o.numel() / D : 0;
  launch_backward(true, ptr_or_null<float>(do_), ptr_or_null<float>(dhp),
                  {ptr_or_null<float>(dao), ptr_or_null<float>(dbo), ptr_or_null<float>(dar),
                   ptr_or_null<float>(dbr), ptr_or_null<float>(dw)},
                  dh.ptr<float>(), merge_args(o, hp, ao, bo, ar, br),
                  NormIn{dx.ptr<float>(), h.ptr<float>(), w.ptr<float>(), rstd.ptr<float>()}, N, D);
}

}  // namespace zaya::ops::gpu
