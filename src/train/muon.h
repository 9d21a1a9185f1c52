// Muon update of one 2-D weight matrix (docs/training.md):
//   buf ← μ·buf + g;  u = nesterov ? g + μ·buf : buf;  O = NewtonSchulz(u) (ops::newton_schulz);
//   w ← w − lr·(rms_scale·√max(rows, cols)·O + wd·w)   (decoupled weight decay).
// rms_scale = 0.2 matches the update's RMS to AdamW's, so one learning rate serves both.
// w, g, buf are F32 with count·rows·cols elements: `count` matrices [rows,cols] one after another
// (a layer's experts), each orthogonalised on its own by one batched newton_schulz [count,rows,
// cols] (the same result as count separate updates); scratch is F32 with as many (u, then O).
// Every step is an op (ops::muon_momentum, ops::newton_schulz, ops::muon_apply). bf16: Newton–
// Schulz's products in BF16 on the GPU (ops::newton_schulz; the CPU ignores it).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zaya {

struct MuonParams {
  double lr = 0, momentum = 0.95, weight_decay = 0, rms_scale = 0.2;
  bool nesterov = true, symmetric = true, bf16 = false;
  int ns_steps = 5;
};

void muon_update(const Tensor& w, const Tensor& g, const Tensor& buf, const Tensor& scratch,
                 int64_t count, int64_t rows, int64_t cols, const MuonParams& p);

}  // namespace zaya
