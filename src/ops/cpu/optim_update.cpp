// The optimizers' elementwise updates on the CPU (ops.h "optimizer updates"): AdamW, and Muon's
// momentum and weight steps around newton_schulz (muon.cpp). Each element is independent, so the
// parallel loops give the same bits on any thread count; AdamW and the Muon weight step compute in
// double and round once to f32, Muon's momentum is f32 (as torch's Muon).
#include <cmath>

#include "ops/backend.h"
#include "ops/check.h"

namespace zaya::ops::cpu {

void adamw_update(const Tensor& w_t, const Tensor& g_t, const Tensor& m_t, const Tensor& v_t,
                  const AdamWParams& p) {
  float* w = w_t.ptr<float>();
  const float* g = g_t.ptr<float>();
  float* m = m_t.ptr<float>();
  float* v = v_t.ptr<float>();
  const int64_t n = w_t.numel();
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  const double decay = 1.0 - p.lr * p.weight_decay;
  const double step_size = p.lr / bc1, inv_sqrt_bc2 = 1.0 / std::sqrt(bc2);
  const double b1 = p.beta1, b2 = p.beta2, eps = p.eps;
  const float gs = float(p.grad_scale);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[i] * gs;
    const double mi = b1 * double(m[i]) + (1.0 - b1) * gi;
    const double vi = b2 * double(v[i]) + (1.0 - b2) * gi * gi;
    m[i] = float(mi);
    v[i] = float(vi);
    w[i] = float(double(w[i]) * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps));
  }
}

void balance_update(const Tensor& bias_t, const Tensor& m_t, const Tensor& v_t,
                    const Tensor& counts_t, const BalanceParams& p) {
  float* bias = bias_t.ptr<float>();
  float* m = m_t.ptr<float>();
  float* v = v_t.ptr<float>();
  const double* counts = counts_t.ptr<double>();
  const int64_t n = bias_t.numel(), K = counts_t.numel();
  double total = 0;
  for (int64_t k = 0; k < K; ++k) total += counts[k];
  if (total == 0) return;
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  for (int64_t e = 0; e < n; ++e) {
    const double g = counts[e] / total - 1.0 / double(n);
    const double mi = p.beta1 * double(m[e]) + (1.0 - p.beta1) * g;
    const double vi = p.beta2 * double(v[e]) + (1.0 - p.beta2) * g * g;
    m[e] = float(mi);
    v[e] = float(vi);
    const double b = bias[e];
    bias[e] = float(b - p.lr * ((mi / bc1) / (std::sqrt(vi / bc2) + p.eps) + p.weight_decay * b));
  }
}

void muon_momentum(const Tensor& buf_t, const Tensor& scratch_t, const Tensor& g_t, double momentum,
                   bool nesterov) {
  float* buf = buf_t.ptr<float>();
  float* scratch = scratch_t.ptr<float>();
  const float* g = g_t.ptr<float>();
  const int64_t n = buf_t.numel();
  const float mu = float(momentum);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    buf[i] = mu * buf[i] + g[i];
    scratch[i] = nesterov ? g[i] + mu * buf[i] : buf[i];
  }
}

void muon_apply(const Tensor& w_t, const Tensor& u_t, double lr, double decay, double scale) {
  float* w = w_t.ptr<float>();
  const float* u = u_t.ptr<float>();
  const int64_t n = w_t.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) w[i] = float(double(w[i]) * decay - lr * scale * double(u[i]));
}

}  // namespace zaya::ops::cpu
