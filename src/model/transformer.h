// The whole ZAYA1 graph (spec §6): embedding → [merge + RMSNorm → CCA | MoE] × L → final merge +
// RMSNorm → tied LM head → cross-entropy (C4). Backward in strict reverse order (spec §8). Runs on
// the model's device: the activations must live there too; ids and targets are host arrays.
#pragma once
#include <cstdint>

#include "model/activations.h"
#include "model/model.h"

namespace zaya {

// Runs the forward pass on ids[B·T] (row-major [B,T]; every id must be in [0, V)) and scores its
// logits against targets[B·T] (the token each position should predict; −1: none) with the fused
// LM head, which keeps no [B·T, V] buffer; `a.logits` [B·T, V] is filled only when the
// activations were made with keep_logits. Returns the mean cross-entropy over the positions that
// have a target (C4). Training passes a window's first T tokens as ids and the T after its first as
// targets.
double model_forward(const Model& m, Activations& a, const int32_t* ids, const int32_t* targets);

// `zaya eval`'s reading (system.md §1): each row is its own target sequence, position t predicts
// ids[t+1]; the mean over the B·(T−1) positions 0..T−2.
double model_forward(const Model& m, Activations& a, const int32_t* ids);

// Backward of (grad_scale · Σ per-position losses); for the gradient of the mean loss pass
// 1/(positions with a target). Parameter gradients accumulate into m.grads(). The LM head's
// logits are recomputed tile by tile (a.logits, when kept, is left as it is). Must follow
// model_forward on the same activations.
void model_backward(Model& m, Activations& a, double grad_scale);

}  // namespace zaya
