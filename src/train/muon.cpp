// Muon update (muon.h).
#include "train/muon.h"

#include <algorithm>
#include <cmath>

#include "core/tensor.h"
#include "ops/ops.h"

namespace zaya {

void muon_update(float* w, const float* g, float* buf, float* scratch, int64_t rows, int64_t cols,
                 const MuonParams& p) {
  const int64_t n = rows * cols;
  const float mu = float(p.momentum);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    buf[i] = mu * buf[i] + g[i];
    scratch[i] = p.nesterov ? g[i] + mu * buf[i] : buf[i];
  }
  Tensor u(scratch, {rows, cols});
  ops::newton_schulz(u, u, p.ns_steps, p.symmetric);  // in place: O overwrites u
  const double scale = p.rms_scale * std::sqrt(double(std::max(rows, cols)));
  const double decay = 1.0 - p.lr * p.weight_decay;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i)
    w[i] = float(double(w[i]) * decay - p.lr * scale * double(scratch[i]));
}

}  // namespace zaya
