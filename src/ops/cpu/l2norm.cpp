// l2norm_scale_forward / l2norm_scale_backward on the CPU: per-head L2 normalisation to √d with
// the linear key temperature (docs/model.md §4.5, backward §8.5 step 3).
//
// x[B,T,H,d] → y = s_h · x/‖x‖, s_h = √d·temp[h] (or √d without temp); norm[B,T,H] = ‖x‖ saved.
// No eps (docs/model.md §13) unless a floor is given (native semantics: ‖x‖ clamped below at it). Norms, dot
// products and the per-head scale are computed in double, then each output is rounded once. dtemp
// is reduced in a fixed token order, independent of threading.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

struct NormDims {
  int64_t N, H, d;
};

NormDims norm_dims(const Tensor& x) {
  return {x.size(0) * x.size(1), x.size(2), x.size(3)};
}

template <class S>
double head_scale(const S* temp, int64_t h, int64_t d) {
  return std::sqrt(double(d)) * (temp ? double(temp[h]) : 1.0);
}

template <class S>
void norm_forward(S* y, S* norm, const S* x, const S* temp, NormDims D, double floor) {
  const int64_t H = D.H, d = D.d;
#pragma omp parallel for schedule(static) if (D.N * H * d > kParallelMin)
  for (int64_t nh = 0; nh < D.N * H; ++nh) {
    const S* xr = x + nh * d;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(xr[i]) * double(xr[i]);
    const double nrm = std::max(std::sqrt(ss), floor), k = head_scale(temp, nh % H, d) / nrm;
    norm[nh] = S(nrm);
    for (int64_t i = 0; i < d; ++i) y[nh * d + i] = S(double(xr[i]) * k);
  }
}

template <class S>
void norm_backward(S* dx, S* dtemp, const S* dy, const S* x, const S* norm, const S* temp,
                   NormDims D, double floor) {
  const int64_t H = D.H, d = D.d;
  std::vector<double> dots(dtemp ? D.N * H : 0);  // ⟨x̂, dy⟩ per (token, head), for dtemp
#pragma omp parallel for schedule(static) if (D.N * H * d > kParallelMin)
  for (int64_t nh = 0; nh < D.N * H; ++nh) {
    const S* xr = x + nh * d;
    const S* dyr = dy + nh * d;
    const double nrm = double(norm[nh]);
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += double(xr[i]) * double(dyr[i]);
    dot /= nrm;
    // dx = (s/‖x‖)(dy − x̂⟨x̂,dy⟩); dy is read before dx is written, so they may alias.
    const double k = head_scale(temp, nh % H, d) / nrm;
    const bool clamped = floor > 0 && nrm <= floor;  // y = (s/floor)·x: linear
    for (int64_t i = 0; i < d; ++i)
      dx[nh * d + i] =
          S(clamped ? k * double(dyr[i]) : k * (double(dyr[i]) - double(xr[i]) / nrm * dot));
    if (dtemp) dots[nh] = dot;
  }
  if (!dtemp) return;
  const double root_d = std::sqrt(double(d));
  for (int64_t h = 0; h < H; ++h) {
    double s = 0;
    for (int64_t n = 0; n < D.N; ++n) s += dots[n * H + h];
    dtemp[h] += S(root_d * s);
  }
}

}  // namespace

void l2norm_scale_forward(const Tensor& y, const Tensor& norm, const Tensor& x, const Tensor& temp,
                          float floor) {
  const NormDims D = norm_dims(x);
  ZAYA_DISPATCH_FLOAT(
      x.dtype, norm_forward<scalar_t>(y.ptr<scalar_t>(), norm.ptr<scalar_t>(), x.ptr<scalar_t>(),
                                      ptr_or_null<scalar_t>(temp), D, double(floor)));
}

void l2norm_scale_backward(const Tensor& dx, const Tensor& dtemp, const Tensor& dy, const Tensor& x,
                           const Tensor& norm, const Tensor& temp, float floor) {
  const NormDims D = norm_dims(x);
  ZAYA_DISPATCH_FLOAT(
      x.dtype, norm_backward<scalar_t>(dx.ptr<scalar_t>(), ptr_or_null<scalar_t>(dtemp),
                                       dy.ptr<scalar_t>(), x.ptr<scalar_t>(), norm.ptr<scalar_t>(),
                                       ptr_or_null<scalar_t>(temp), D, double(floor)));
}

}  // namespace zaya::ops::cpu
