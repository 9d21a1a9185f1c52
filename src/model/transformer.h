// The whole ZAYA1 graph (spec §6): embedding → [merge + RMSNorm → CCA | MoE] × L → final merge +
// RMSNorm → tied LM head → cross-entropy (C4). Backward in strict reverse order (spec §8).
#pragma once
#include <cstdint>

#include "model/activations.h"
#include "model/model.h"

namespace zaya {

// Runs the forward pass on ids[B·T] (row-major [B,T]; every id must be in [0, V)), filling
// `a.logits` [B·T, V]. Returns the mean next-token loss over B·(T−1) positions (C4).
double model_forward(const Model& m, Activations& a, const int32_t* ids);

// Backward of (grad_scale · Σ per-position losses); for the gradient of the mean loss pass
// 1/(B·(T−1)). Parameter gradients accumulate into m.grads(). Destroys a.logits (reused for
// dlogits). Must follow model_forward on the same activations.
void model_backward(Model& m, Activations& a, double grad_scale);

}  // namespace zaya
