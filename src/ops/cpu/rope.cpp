// rope_tables / rope_forward / rope_backward on the CPU: partial NeoX rotary embedding (docs/model.md §4.6,
// backward §8.5 step 2).
//
// Tables are F32 and built with every step in fp32 (fp32 RoPE, docs/model.md §0.2.7), as S1 does:
//   e_i = float(2i)/float(r),  inv_freq_i = 1.0f / powf(float(θ), e_i),
//   angle_{t,i} = float(pos0 + t) · inv_freq_i  (one fp32 multiply),  cos/sin = cosf/sinf(angle).
// cosf/sinf are the C library's fp32 functions (glibc: correctly rounded in practice); PyTorch's
// vectorised fp32 cos/sin may differ from them by an ulp, which is within rounding of the spec.
// x[B,T,H,d]: pairs (i, i+m), m = r/2, rotate by the angle of (t, i); dims ≥ r pass through.
// Backward is the same rotation by −angle. x may be F32 or F64; table values are cast to it.
#include <cmath>

#include "ops/backend.h"

namespace zaya::ops::cpu {

void rope_tables(const Tensor& cos, const Tensor& sin, int64_t pos0, double theta, int64_t r) {
  const int64_t T = cos.size(0), m = r / 2;
  float* cp = cos.ptr<float>();
  float* sp = sin.ptr<float>();
  const float base = float(theta);
  for (int64_t t = 0; t < T; ++t) {
    const float pos = float(pos0 + t);
    for (int64_t i = 0; i < m; ++i) {
      const float e = float(2 * i) / float(r);
      const float inv_freq = 1.0f / std::pow(base, e);  // float overloads: powf
      const float angle = pos * inv_freq;
      cp[t * m + i] = std::cos(angle);  // cosf
      sp[t * m + i] = std::sin(angle);  // sinf
    }
  }
}

namespace {

// Rotates every head of x[N = B·T, H, d] by sign·angle: row n uses table row n mod T.
template <class S>
void rotate(S* x, const float* cos, const float* sin, int64_t BT, int64_t T, int64_t H, int64_t d,
            int64_t m, S sign) {
#pragma omp parallel for schedule(static) if (BT * H * m > 65536)
  for (int64_t n = 0; n < BT; ++n) {
    const float* cr = cos + (n % T) * m;
    const float* sr = sin + (n % T) * m;
    for (int64_t h = 0; h < H; ++h) {
      S* v = x + (n * H + h) * d;
      for (int64_t i = 0; i < m; ++i) {
        const S c = S(cr[i]), s = sign * S(sr[i]);
        const S a = v[i], b = v[i + m];
        v[i] = a * c - b * s;
        v[i + m] = b * c + a * s;
      }
    }
  }
}

void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, double sign) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), d = x.size(3);
  const int64_t m = cos.size(1);
  ZAYA_DISPATCH_FLOAT(
      x.dtype, rotate<scalar_t>(x.ptr<scalar_t>(), cos.ptr<float>(), sin.ptr<float>(), B * T, T, H,
                                d, m, scalar_t(sign)));
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  rope_apply(x, cos, sin, 1.0);
}

void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin) {
  rope_apply(dx, cos, sin, -1.0);
}

}  // namespace zaya::ops::cpu
