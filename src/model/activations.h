// Activations: everything the forward pass saves for backward, plus the backward scratch, for one
// micro-batch shape [B, T]. One allocation (sized by a measuring pass), views everywhere.
// The allocation lives on one device (the model's). N = B·T tokens. Per sub-layer the residual
// stream h, the normed mixer input x, its rstd and the mixer output o are kept; attention and MoE
// sub-layers add their own saved tensors.
//
// Storage (ActivationStorage; train.activations): F32 keeps every saved tensor in f32. BF16 keeps
// the large ones that a sub-layer reads only inside its own forward and backward (the mixer input
// x; attention's u y z q k qr kr p v att; the experts' f gu act: LayerActs::stashed) as bf16
// copies: the sub-layer computes them in an f32 working area shared by all sub-layers,
// stash_layer rounds them into its copies (to nearest even) after its forward, and unstash_layer
// widens them back before its backward. What other sub-layers read (h, o, the router state r and
// the router's own tensors, the per-row ones, the integer ones) stays f32 in each sub-layer. So
// the forward and the loss are the same bits either way, and the backward sees the stashed
// tensors rounded to bf16, as a bf16 mixed-precision trainer saves them. With BF16 a stashed
// tensor's view in LayerActs is the working area: it holds that sub-layer's values from its
// forward to the next sub-layer's forward, or from its unstash_layer to the next one.
#pragma once
#include <vector>

#include "core/arena.h"
#include "io/zaya_config.h"

namespace zaya {

struct AttentionActs {
  Tensor u;       // [B,T,C]   x·W_qkᵀ = [q⁰ ; k⁰]
  Tensor y;       // [B,T+1,C] stage-0 conv output at j = −1 … T−1
  Tensor z;       // [B,T,C]   stage-1 conv output
  Tensor q, k;    // [B,T,Hq,d], [B,T,Hk,d] after qk-mean, before normalisation
  Tensor qn, kn;  // [B,T,Hq] / [B,T,Hk] L2 norms
  Tensor qr, kr;  // [B,T,Hq,d], [B,T,Hk,d] normalised, scaled, rotated
  Tensor p;       // [B,T,Hk·d] x·W_vᵀ before the shift
  Tensor v;       // [B,T,Hk·d] shifted values (heads of d consecutive entries)
  Tensor att;     // [B,T,Hq,d] attention output (input of o_proj)
  Tensor lse;     // [B,Hq,T]
};

struct MoeActs {
  Tensor r;          // [N,R] router state after EDA (what the next MoE layer reads)
  Tensor rn, rrstd;  // [N,R] router RMSNorm output, [N] its rstd
  Tensor a1p, a1;    // [N,R] pre-/post-GELU
  Tensor a2p, a2;    // [N,R]
  Tensor logits;     // [N,K]
  Tensor probs;      // [N,K]
  Tensor choice;     // [N] I32
  Tensor weight;     // [N]
  Tensor f;          // [N,D] unweighted expert (or skip) output
  Tensor gu;         // [N,F]
  Tensor act;        // [N,F/2]
  Tensor order;      // [N] I32: the tokens grouped by class (ops::moe_forward, for backward)
  std::vector<int32_t> offsets;  // [E+2], host memory: where each class (E = skip) starts
};

enum class ActivationStorage { F32, BF16 };

const char* activation_storage_name(ActivationStorage s);  // "fp32" | "bf16"

// A tensor kept as a bf16 copy (ActivationStorage::BF16): `work` is its f32 view in the shared
// working area, `stored` the sub-layer's own BF16 copy of the same shape.
struct StashedTensor {
  Tensor work, stored;
};

struct LayerActs {
  Tensor h;     // [N,D] residual stream after this sub-layer's merge
  Tensor x;     // [N,D] RMSNorm(h): the mixer input
  Tensor rstd;  // [N]
  Tensor o;     // [N,D] mixer output
  AttentionActs attn;
  MoeActs moe;
  std::vector<StashedTensor> stashed;  // empty with ActivationStorage::F32
};

// After sub-layer l's forward: its working tensors rounded into their bf16 copies; before its
// backward: the copies widened back into the working area. No-ops with F32 storage.
void stash_layer(const LayerActs& l);
void unstash_layer(const LayerActs& l);

// Backward scratch shared by all sub-layers (sized for the largest).
struct BackwardScratch {
  Tensor dh_a, dh_b;  // [N,D] residual-stream gradients (ping-pong)
  Tensor dx;          // [N,D] gradient of the mixer input
  Tensor dout;        // [N,D] gradient of the mixer output
  // attention
  Tensor datt, dqr, dkr, dv, dq, dk, dz, du, dp;
  // router
  Tensor dweight, dlogits, da2, da2p, da1, da1p, drn, dr, dcarry_in, dcarry_out;
};

struct Activations {
  int64_t B = 0, T = 0;
  Tensor ids;                 // [B,T] I32 input tokens
  Tensor targets;             // [N] I32 next token, −1 at the last position of a row
  Tensor emb;                 // [N,D] embedding rows (o₋₁)
  Tensor rope_cos, rope_sin;  // [T, r/2] F32
  // The RoPE tables depend only on T and the config's rope_theta: a forward fills them when
  // rope_theta is not the one they hold (the first; on a GPU a host computation and an upload
  // that waits for the stream), later ones reuse them.
  double rope_theta = -1;
  // The windowed layers' tables (θ = swa_rope_theta), allocated only when some attention sub-layer
  // has a θ other than rope_theta; filled like the above.
  Tensor rope_cos_swa, rope_sin_swa;
  double rope_theta_swa = -1;
  std::vector<LayerActs> layers;
  Tensor h_final, x_final, rstd_final;  // [N,D], [N,D], [N]
  // [N,V] only with keep_logits (zaya eval --logits, tests that read them): model_forward then also
  // writes the logits; undefined otherwise. The loss never needs them: the fused LM head
  // (ops::lm_head_xent_forward/backward, lm_head_xent_forward_backward) works in blocks.
  Tensor logits;
  Tensor lse, loss_rows;  // [N], [N]
  BackwardScratch g;
  // Set by model_forward_and_head_backward (training): the LM head's gradient is already in g.dx
  // and the embedding's gradient, for this grad scale; model_backward then starts after the head.
  // Any other forward clears it.
  bool head_grad_done = false;
  double head_grad_scale = 0;

  Activations(const ZayaConfig& c, int64_t B, int64_t T, Device device = Device::Cpu,
              bool keep_logits = false, ActivationStorage storage = ActivationStorage::F32);
  Device device() const { return mem_.device(); }
  ActivationStorage storage() const { return storage_; }
  size_t bytes() const { return mem_.size(); }
  // Bytes one Activations(c, B, T, device, keep_logits, storage) allocates (to choose a
  // micro-batch that fits in memory).
  static size_t bytes_needed(const ZayaConfig& c, int64_t B, int64_t T, bool keep_logits = false,
                             ActivationStorage storage = ActivationStorage::F32);

 private:
  Activations() = default;
  Buffer mem_;
  ActivationStorage storage_ = ActivationStorage::F32;
};

}  // namespace zaya
