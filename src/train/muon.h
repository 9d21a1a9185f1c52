// Muon update of one 2-D weight matrix (system.md §3):
//   buf ← μ·buf + g;  u = nesterov ? g + μ·buf : buf;  O = NewtonSchulz(u) (ops::newton_schulz);
//   w ← w − lr·(rms_scale·√max(rows, cols)·O + wd·w)   (decoupled weight decay).
// rms_scale = 0.2 matches the update's RMS to AdamW's, so one learning rate serves both.
// w, g, buf are F32 with rows·cols elements; scratch is F32 with rows·cols elements (u, then O).
// Every step is an op (ops::muon_momentum, ops::newton_schulz, ops::muon_apply).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zaya {

struct MuonParams {
  double lr = 0, momentum = 0.95, weight_decay = 0, rms_scale = 0.2;
  bool nesterov = true, symmetric = true;
  int ns_steps = 5;
};

void muon_update(const Tensor& w, const Tensor& g, const Tensor& buf, const Tensor& scratch,
                 int64_t rows, int64_t cols, const MuonParams& p);

}  // namespace zaya
