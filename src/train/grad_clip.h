// Gradient clipping by global norm (system.md §3). The norm is over every trainable parameter's
// gradient (buffers excluded), summed in double in a fixed blocked order, so its bits do not
// depend on the thread count.
#pragma once
#include "model/model.h"

namespace zaya {

// Σ g[i]² in double over n elements, in fixed blocks (bits independent of the thread count).
double sum_squares(const float* g, int64_t n);

// ‖g‖₂ over all trainable gradients of m (NaN/Inf when any gradient is non-finite).
double global_grad_norm(const Model& m);

// g ← s·g for every trainable gradient.
void scale_grads(Model& m, double s);

// Returns the pre-clip global norm; when max_norm > 0 and the norm exceeds it, scales the
// gradients by max_norm / norm so their norm becomes max_norm. A non-finite norm is returned
// as is and the gradients are left untouched (the caller skips the step).
double clip_grad_norm(Model& m, double max_norm);

}  // namespace zaya
