// qk_mean_forward / qk_mean_backward on the GPU: the qk-mean skip term of CCA (docs/model.md §4.3, backward
// §8.5 step 4), mirroring ops/cpu/qk_mean.cpp. One thread per channel of a token (C = (Hq+Hk)·d
// per token); the mean over a kv group's G query heads is summed in the CPU's order.
//   Q[h] = z_q[h] + ½(q⁰[h] + k⁰[g(h)]),   K[g] = z_k[g] + ½(mean_{h∈g} q⁰[h] + k⁰[g]).
#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

struct QkDims {
  int64_t N;
  int Hq, Hk, d;
};

QkDims qk_dims(const Tensor& Q, const Tensor& K) {
  return {Q.size(0) * Q.size(1), int(Q.size(2)), int(K.size(2)), int(Q.size(3))};
}

__global__ void qk_forward_kernel(float* __restrict__ Q, float* __restrict__ K,
                                  const float* __restrict__ z, const float* __restrict__ u,
                                  QkDims D) {
  const int G = D.Hq / D.Hk, qw = D.Hq * D.d;
  const int64_t C = int64_t(D.Hq + D.Hk) * D.d;
  const float half = 0.5f, group = float(G);
  ZAYA_GPU_FOR(e, D.N * C) {
    const int64_t n = e / C;
    const int j = int(e % C);
    const float* q0 = u + n * C;
    const float* k0 = q0 + qw;
    if (j < qw) {
      const int h = j / D.d, i = j % D.d;
      Q[n * qw + j] = z[e] + half * (q0[j] + k0[(h / G) * D.d + i]);
    } else {
      const int jj = j - qw, g = jj / D.d, i = jj % D.d;
      float sum = 0;
      for (int h = g * G; h < (g + 1) * G; ++h) sum += q0[h * D.d + i];
      K[n * (C - qw) + jj] = z[e] + half * (sum / group + k0[jj]);
    }
  }
}

// dz = [dQ ; dK];  dq⁰[h] = ½(dQ[h] + dK[g(h)]/G);  dk⁰[g] = ½(Σ_{h∈g} dQ[h] + dK[g]).
__global__ void qk_backward_kernel(float* __restrict__ dz, float* __restrict__ du,
                                   const float* __restrict__ dQ, const float* __restrict__ dK,
                                   QkDims D) {
  const int G = D.Hq / D.Hk, qw = D.Hq * D.d;
  const int64_t C = int64_t(D.Hq + D.Hk) * D.d, kw = C - qw;
  const float half = 0.5f, group = float(G);
  ZAYA_GPU_FOR(e, D.N * C) {
    const int64_t n = e / C;
    const int j = int(e % C);
    const float* dQr = dQ + n * qw;
    const float* dKr = dK + n * kw;
    if (j < qw) {
      const int h = j / D.d, i = j % D.d;
      dz[e] = dQr[j];
      du[e] = half * (dQr[j] + dKr[(h / G) * D.d + i] / group);
    } else {
      const int jj = j - qw, g = jj / D.d, i = jj % D.d;
      float sum = 0;
      for (int h = g * G; h < (g + 1) * G; ++h) sum += dQr[h * D.d + i];
      dz[e] = dKr[jj];
      du[e] = half * (sum + dKr[jj]);
    }
  }
}

}  // namespace

void qk_mean_forward(const Tensor& Q, const Tensor& K, const Tensor& z, const Tensor& u) {
  const QkDims D = qk_dims(Q, K);
  const int64_t n = D.N * (D.Hq + D.Hk) * D.d;
  if (n == 0) return;
  qk_forward_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(Q.ptr<float>(), K.ptr<float>(),
                                                            z.ptr<float>(), u.ptr<float>(), D);
  ZAYA_GPU_LAUNCH_CHECK();
}

void qk_mean_backward(const Tensor& dz, const Tensor& du, const Tensor& dQ, const Tensor& dK) {
  const QkDims D = qk_dims(dQ, dK);
  const int64_t n = D.N * (D.Hq + D.Hk) * D.d;
  if (n == 0) return;
  qk_backward_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dz.ptr<float>(), du.ptr<float>(),
                                                             dQ.ptr<float>(), dK.ptr<float>(), D);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
