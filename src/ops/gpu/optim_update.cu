// The optimizers' elementwise updates on the GPU (ops.h "optimizer updates"), as
// ops/cpu/optim_update.cpp: AdamW and the Muon weight step compute in double per element and round
// once to f32 (the bias corrections are computed on the host with the CPU's std::pow), Muon's
// momentum is f32, and the balancing-bias AdamW reads its F64 class counts on the device (one
// block: the total is a block sum of exact integers, then one thread per expert). Each op is ONE
// kernel on device buffers: AdamW reads g, m, v, w once and writes m, v, w; Muon's momentum and
// Nesterov look-ahead are one pass (buf and the Newton–Schulz input together); the balancing-bias
// update reads the counts the optimizer copied to the device (nothing comes back to the host).
#include <cmath>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, int64_t n, double b1,
                             double b2, double eps, double decay, double step_size,
                             double inv_sqrt_bc2, float gs) {
  ZAYA_GPU_FOR(i, n) {
    const double gi = g[i] * gs;
    const double mi = b1 * double(m[i]) + (1.0 - b1) * gi;
    const double vi = b2 * double(v[i]) + (1.0 - b2) * gi * gi;
    m[i] = float(mi);
    v[i] = float(vi);
    w[i] = float(double(w[i]) * decay - step_size * mi / (sqrt(vi) * inv_sqrt_bc2 + eps));
  }
}

__global__ void __launch_bounds__(kBlock)
    balance_kernel(float* bias, float* m, float* v, const double* counts, int64_t n, int64_t K,
                   double beta1, double beta2, double eps, double lr, double weight_decay,
                   double bc1, double bc2) {
  __shared__ double red[kMaxWarpsPerBlock];
  double total = 0;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) total += counts[k];
  total = block_sum(total, red);  // exact: counts are integers
  if (total == 0) return;         // uniform over the block
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const double g = counts[e] / total - 1.0 / double(n);
    const double mi = beta1 * double(m[e]) + (1.0 - beta1) * g;
    const double vi = beta2 * double(v[e]) + (1.0 - beta2) * g * g;
    m[e] = float(mi);
    v[e] = float(vi);
    const double b = bias[e];
    bias[e] = float(b - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + weight_decay * b));
  }
}

__global__ void muon_momentum_kernel(float* buf, float* scratch, const float* g, int64_t n,
                                     float mu, bool nesterov) {
  ZAYA_GPU_FOR(i, n) {
    const float b = mu * buf[i] + g[i];
    buf[i] = b;
    scratch[i] = nesterov ? g[i] + mu * b : b;
  }
}

__global__ void muon_apply_kernel(float* w, const float* u, int64_t n, double lr, double decay,
                                  double scale) {
  ZAYA_GPU_FOR(i, n) w[i] = float(double(w[i]) * decay - lr * scale * double(u[i]));
}

}  // namespace

void adamw_update(const Tensor& w_t, const Tensor& g_t, const Tensor& m_t, const Tensor& v_t,
                  const AdamWParams& p) {
  const int64_t n = w_t.numel();
  if (n == 0) return;
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  const double decay = 1.0 - p.lr * p.weight_decay;
  const double step_size = p.lr / bc1, inv_sqrt_bc2 = 1.0 / std::sqrt(bc2);
  adamw_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(
      w_t.ptr<float>(), g_t.ptr<float>(), m_t.ptr<float>(), v_t.ptr<float>(), n, p.beta1, p.beta2,
      p.eps, decay, step_size, inv_sqrt_bc2, float(p.grad_scale));
  ZAYA_GPU_LAUNCH_CHECK();
}

void balance_update(const Tensor& bias_t, const Tensor& m_t, const Tensor& v_t,
                    const Tensor& counts_t, const BalanceParams& p) {
  const int64_t n = bias_t.numel(), K = counts_t.numel();
  if (n == 0) return;
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  balance_kernel<<<1, kBlock, 0, stream()>>>(
      bias_t.ptr<float>(), m_t.ptr<float>(), v_t.ptr<float>(), counts_t.ptr<double>(), n, K,
      p.beta1, p.beta2, p.eps, p.lr, p.weight_decay, bc1, bc2);
  ZAYA_GPU_LAUNCH_CHECK();
}

void muon_momentum(const Tensor& buf_t, const Tensor& scratch_t, const Tensor& g_t, double momentum,
                   bool nesterov) {
  const int64_t n = buf_t.numel();
  if (n == 0) return;
  muon_momentum_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(
      buf_t.ptr<float>(), scratch_t.ptr<float>(), g_t.ptr<float>(), n, float(momentum), nesterov);
  ZAYA_GPU_LAUNCH_CHECK();
}

void muon_apply(const Tensor& w_t, const Tensor& u_t, double lr, double decay, double scale) {
  const int64_t n = w_t.numel();
  if (n == 0) return;
  muon_apply_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(w_t.ptr<float>(), u_t.ptr<float>(), n,
                                                            lr, decay, scale);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
