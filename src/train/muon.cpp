// Muon update (muon.h): momentum, Newton–Schulz and the weight step, each an op.
#include "train/muon.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace zaya {

void muon_update(const Tensor& w, const Tensor& g, const Tensor& buf, const Tensor& scratch,
                 int64_t count, int64_t rows, int64_t cols, const MuonParams& p) {
  ops::muon_momentum(buf, scratch, g, p.momentum, p.nesterov);
  const Tensor u = count == 1 ? scratch.view({rows, cols}) : scratch.view({count, rows, cols});
  ops::newton_schulz(u, u, p.ns_steps, p.symmetric, p.bf16);  // in place: O overwrites u
  const double scale = p.rms_scale * std::sqrt(double(std::max(rows, cols)));
  ops::muon_apply(w, scratch, p.lr, 1.0 - p.lr * p.weight_decay, scale);
}

}  // namespace zaya
