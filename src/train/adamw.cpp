// AdamW update (adamw.h).
#include "train/adamw.h"

#include <cmath>

#include "core/assert.h"

namespace zaya {

void adamw_update(float* w, const float* g, float* m, float* v, int64_t n, const AdamWParams& p) {
  ZAYA_ASSERT(p.step >= 1, "adamw_update: step {} (must be ≥ 1)", p.step);
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  const double decay = 1.0 - p.lr * p.weight_decay;
  const double step_size = p.lr / bc1, inv_sqrt_bc2 = 1.0 / std::sqrt(bc2);
  const double b1 = p.beta1, b2 = p.beta2, eps = p.eps;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[i];
    const double mi = b1 * double(m[i]) + (1.0 - b1) * gi;
    const double vi = b2 * double(v[i]) + (1.0 - b2) * gi * gi;
    m[i] = float(mi);
    v[i] = float(vi);
    w[i] = float(double(w[i]) * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps));
  }
}

}  // namespace zaya
