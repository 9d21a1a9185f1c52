// AdamW update of one tensor (torch.optim.AdamW semantics, decoupled weight decay):
//   w ← w·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//   w ← w − lr·m̂/(√v̂ + ε),  m̂ = m/(1−β1ᵗ),  v̂ = v/(1−β2ᵗ),  t = 1, 2, … the step number.
// w, g, m, v are F32 [n]; the arithmetic per element is double.
#pragma once
#include <cstdint>

namespace zaya {

struct AdamWParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // t ≥ 1, for the bias corrections
};

void adamw_update(float* w, const float* g, float* m, float* v, int64_t n, const AdamWParams& p);

}  // namespace zaya
