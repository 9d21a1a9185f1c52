// Exact (erf) GELU on the CPU, elementwise on any shape (docs/model.md §5.3): y = x·Φ(x),
// dx = dy·(Φ(x) + x·φ(x)). Φ(x) = ½(1 + erf(x/√2)) is evaluated as ½·erfc(−x/√2), the same
// function without the cancellation of 1 + erf for negative x. Also the decoder's SwiGLU middle
// silu_mul (swiglu.h: the experts' f32 SwiGLU, the same bits).
#include <cmath>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/swiglu.h"

namespace zaya::ops::cpu {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/√(2π)

template <class T>
inline T normal_cdf(T x) {
  return T(0.5) * std::erfc(-x * T(kInvSqrt2));
}

template <class T>
void forward(T* y, const T* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}

template <class T>
void backward(T* dx, const T* dy, const T* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * v * v);
    dx[i] = dy[i] * (normal_cdf(v) + v * pdf);
  }
}

// act[m] = silu(g) ⊙ u for [g ; u] = gu[m] (the decoder's f32 SwiGLU).
void silu_mul_rows(float* act_MH, const float* gu_MF, int64_t M, int64_t H) {
#pragma omp parallel for schedule(static) if (M * H > kParallelMin)
  for (int64_t m = 0; m < M; ++m)
    swiglu_row(act_MH + m * H, gu_MF + m * 2 * H, gu_MF + m * 2 * H + H, H);
}

}  // namespace

void gelu_forward(const Tensor& y, const Tensor& x) {
  ZAYA_DISPATCH_FLOAT(x.dtype, forward(y.ptr<scalar_t>(), x.ptr<scalar_t>(), x.numel()));
}

void gelu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x) {
  ZAYA_DISPATCH_FLOAT(
      x.dtype, backward(dx.ptr<scalar_t>(), dy.ptr<scalar_t>(), x.ptr<scalar_t>(), x.numel()));
}

void silu_mul(const Tensor& act, const Tensor& gu) {
  const int64_t M = act.shape[0], H = M ? act.numel() / M : 0;
  silu_mul_rows(act.ptr<float>(), gu.ptr<float>(), M, H);
}

}  // namespace zaya::ops::cpu
