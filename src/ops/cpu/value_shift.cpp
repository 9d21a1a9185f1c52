// value_shift_forward / value_shift_backward on the CPU: CCA values with a one-token shift (spec
// §4.4, backward §8.5 step 8).
//
// p[B,T,W] (W = Hk·d, any trailing shape) → v[B,T,W]: the first half of the last dims is the
// current token's, the second half the previous token's (zero at t = 0). The op works on the flat
// W, so a head that straddles the two halves is handled by construction. v and p must not overlap.
#include <cstring>

#include "ops/backend.h"
#include "ops/check.h"

namespace zaya::ops::cpu {

namespace {

struct ShiftDims {
  int64_t B, T, W;
};

ShiftDims shift_dims(const Tensor& in) {
  const int64_t B = in.size(0), T = in.size(1);
  return {B, T, B * T > 0 ? in.numel() / (B * T) : 0};
}

// out[b,t,:half] = in[b,t,:half]; out[b,t,half:] = in[b,t+step,half:] (zero outside 0…T−1).
template <class S>
void shift(S* out, const S* in, ShiftDims D, int64_t step) {
  const int64_t T = D.T, W = D.W, half = W / 2;
#pragma omp parallel for schedule(static) if (D.B * T * W > 262144)
  for (int64_t bt = 0; bt < D.B * T; ++bt) {
    const int64_t t = bt % T, src = t + step;
    std::memcpy(out + bt * W, in + bt * W, sizeof(S) * half);
    if (src >= 0 && src < T)
      std::memcpy(out + bt * W + half, in + (bt + step) * W + half, sizeof(S) * half);
    else
      std::memset(out + bt * W + half, 0, sizeof(S) * half);
  }
}

}  // namespace

void value_shift_forward(const Tensor& v, const Tensor& p) {
  const ShiftDims D = shift_dims(p);
  ZAYA_DISPATCH_FLOAT(p.dtype, shift<scalar_t>(v.ptr<scalar_t>(), p.ptr<scalar_t>(), D, -1));
}

void value_shift_backward(const Tensor& dp, const Tensor& dv) {
  const ShiftDims D = shift_dims(dv);
  ZAYA_DISPATCH_FLOAT(dv.dtype, shift<scalar_t>(dp.ptr<scalar_t>(), dv.ptr<scalar_t>(), D, +1));
}

}  // namespace zaya::ops::cpu
