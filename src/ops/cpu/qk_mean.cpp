// qk_mean_forward / qk_mean_backward on the CPU: the qk-mean skip term of CCA (docs/model.md §4.3,
// backward §8.5 step 4).
//
// Per token, u = [q⁰ (Hq·d) ; k⁰ (Hk·d)] and z (conv output) have C = (Hq+Hk)·d channels;
// G = Hq/Hk query heads share kv head g(h) = ⌊h/G⌋:
//   Q[h] = z_q[h] + ½(q⁰[h] + k⁰[g(h)]),   K[g] = z_k[g] + ½(mean_{h∈g} q⁰[h] + k⁰[g]).
// Tokens are independent: parallel over them, no reductions.
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

struct QkDims {
  int64_t N, Hq, Hk, d;
};

QkDims qk_dims(const Tensor& Q, const Tensor& K) {
  return {Q.size(0) * Q.size(1), Q.size(2), K.size(2), Q.size(3)};
}

template <class S>
void qk_forward(S* Q, S* K, const S* z, const S* u, QkDims D) {
  const int64_t Hq = D.Hq, Hk = D.Hk, d = D.d, G = Hq / Hk, C = (Hq + Hk) * d;
  const S half = S(0.5), group = S(G);
#pragma omp parallel for schedule(static) if (D.N * C > kParallelMin)
  for (int64_t n = 0; n < D.N; ++n) {
    const S* zr = z + n * C;
    const S* q0 = u + n * C;
    const S* k0 = q0 + Hq * d;
    S* Qr = Q + n * Hq * d;
    S* Kr = K + n * Hk * d;
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < d; ++i)
        Qr[h * d + i] = zr[h * d + i] + half * (q0[h * d + i] + k0[(h / G) * d + i]);
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t i = 0; i < d; ++i) {
        S sum = 0;
        for (int64_t h = g * G; h < (g + 1) * G; ++h) sum += q0[h * d + i];
        Kr[g * d + i] = zr[(Hq + g) * d + i] + half * (sum / group + k0[g * d + i]);
      }
  }
}

template <class S>
void qk_backward(S* dz, S* du, const S* dQ, const S* dK, QkDims D) {
  const int64_t Hq = D.Hq, Hk = D.Hk, d = D.d, G = Hq / Hk, C = (Hq + Hk) * d;
  const S half = S(0.5), group = S(G);
#pragma omp parallel for schedule(static) if (D.N * C > kParallelMin)
  for (int64_t n = 0; n < D.N; ++n) {
    const S* dQr = dQ + n * Hq * d;
    const S* dKr = dK + n * Hk * d;
    S* dzr = dz + n * C;
    S* dq0 = du + n * C;
    S* dk0 = dq0 + Hq * d;
    for (int64_t j = 0; j < Hq * d; ++j) dzr[j] = dQr[j];
    for (int64_t j = 0; j < Hk * d; ++j) dzr[Hq * d + j] = dKr[j];
    // dq⁰[h] = ½dQ[h] + dK[g(h)]/(2G);  dk⁰[g] = ½(Σ_{h∈g} dQ[h] + dK[g]).
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < d; ++i)
        dq0[h * d + i] = half * (dQr[h * d + i] + dKr[(h / G) * d + i] / group);
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t i = 0; i < d; ++i) {
        S sum = 0;
        for (int64_t h = g * G; h < (g + 1) * G; ++h) sum += dQr[h * d + i];
        dk0[g * d + i] = half * (sum + dKr[g * d + i]);
      }
  }
}

}  // namespace

void qk_mean_forward(const Tensor& Q, const Tensor& K, const Tensor& z, const Tensor& u) {
  const QkDims D = qk_dims(Q, K);
  ZAYA_DISPATCH_FLOAT(Q.dtype, qk_forward<scalar_t>(Q.ptr<scalar_t>(), K.ptr<scalar_t>(),
                                                    z.ptr<scalar_t>(), u.ptr<scalar_t>(), D));
}

void qk_mean_backward(const Tensor& dz, const Tensor& du, const Tensor& dQ, const Tensor& dK) {
  const QkDims D = qk_dims(dQ, dK);
  ZAYA_DISPATCH_FLOAT(dQ.dtype, qk_backward<scalar_t>(dz.ptr<scalar_t>(), du.ptr<scalar_t>(),
                                                      dQ.ptr<scalar_t>(), dK.ptr<scalar_t>(), D));
}

}  // namespace zaya::ops::cpu
