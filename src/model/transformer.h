// The whole ZAYA1 graph (docs/model.md §6): embedding → [merge + RMSNorm → CCA | MoE] × L → final
// merge + RMSNorm → tied LM head → cross-entropy. Backward in strict reverse order (§8). Runs on
// the model's device: the activations must live there too; ids and targets are host arrays.
#pragma once
#include <cstdint>
#include <functional>

#include "model/activations.h"
#include "model/model.h"

namespace zaya {

// Runs the forward pass on ids[B·T] (row-major [B,T]; every id must be in [0, V)) and scores its
// logits against targets[B·T] (the token each position should predict; −1: none) with the fused
// LM head, which keeps no [B·T, V] buffer; `a.logits` [B·T, V] is filled only when the
// activations were made with keep_logits. Returns the mean cross-entropy over the positions that
// have a target. Training passes a window's first T tokens as ids and the T after its first as
// targets.
double model_forward(const Model& m, Activations& a, const int32_t* ids, const int32_t* targets);

// `zaya eval`'s reading (docs/model.md §11): each row is its own target sequence, position t
// predicts ids[t+1]; the mean over the B·(T−1) positions 0..T−2.
double model_forward(const Model& m, Activations& a, const int32_t* ids);

// Training's forward: model_forward(m, a, ids, targets) with the LM head's backward for grad_scale
// done in the same pass (ops::lm_head_xent_forward_backward: one logits product per row block, 3
// GEMMs of N·V·D where forward + backward take 4). The gradient of the final norm's output goes to
// the backward scratch (a.g.dx) and the head's share of the embedding gradient is added to
// m.grads() now, so zero_grads() must come first; model_backward(m, a, grad_scale), with the same
// grad_scale, then starts after the head. Same gradients as model_forward + model_backward up to
// rounding.
double model_forward_and_head_backward(Model& m, Activations& a, const int32_t* ids,
                                       const int32_t* targets, double grad_scale);
// The trainer's form: the same pass without a host synchronisation on a GPU. The ids and targets
// are copied asynchronously (device_copy_async: the host arrays must stay unchanged until a
// gpu::Fence recorded after this call has passed; page-locked memory makes the copy a DMA), and the
// loss is not read back: loss_sum (F64 [1] on the model's device) = Σ of the per-position losses
// (ops::sum_to), to be divided by the positions with a target, ops::count_scored of the targets.
// On the CPU the same bits as the form above: mean = loss_sum / scored.
// layer_start, when given, is called as the forward is about to read parameters: with −1 before
// the embedding, i before layer i, num_layers() before the final merge and the LM head (the
// ZeRO-1 overlap finishes the all-gather of those parameters there: Optimizer::parameters_needed).
using LayerStart = std::function<void(int64_t layer)>;
void model_forward_and_head_backward(Model& m, Activations& a, const int32_t* ids,
                                     const int32_t* targets, double grad_scale,
                                     const Tensor& loss_sum,
                                     const LayerStart& layer_start = nullptr);

// Backward of (grad_scale · Σ per-position losses); for the gradient of the mean loss pass
// 1/(positions with a target). Parameter gradients accumulate into m.grads(). The LM head's
// logits are recomputed tile by tile (a.logits, when kept, is left as it is), unless
// model_forward_and_head_backward already did the head. Must follow model_forward (or
// model_forward_and_head_backward) on the same activations.
//
// layer_done, when given, is called as the gradients become final: with i after layer i's
// backward (layer i's parameters', and for the last layer also the final merge's), then with −1
// after the embedding's (the end). The ZeRO-1 overlap starts its buckets' reduce-scatters there
// (Optimizer::gradients_ready); the work it queues runs between the layers.
using LayerDone = std::function<void(int64_t layer)>;
void model_backward(Model& m, Activations& a, double grad_scale,
                    const LayerDone& layer_done = nullptr);

}  // namespace zaya
