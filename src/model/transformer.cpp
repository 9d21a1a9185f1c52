#include "model/transformer.h"

#include <utility>

#include "model/attention.h"
#include "model/moe.h"
#include "ops/ops.h"

namespace zaya {

namespace {

// For each sub-layer, the index of the MoE sub-layer before it (−1 if none): whose router
// state EDA reads.
std::vector<int64_t> previous_moe(const ZayaConfig& c) {
  std::vector<int64_t> prev(size_t(c.num_layers()), -1);
  int64_t last = -1;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    prev[size_t(i)] = last;
    if (!c.is_attention(i)) last = i;
  }
  return prev;
}

// The RoPE tables of attention sub-layer i: the windowed layers' own θ where it differs.
RopeTables rope_of(const Activations& a, const ZayaConfig& c, int64_t i) {
  if (c.rope_theta_of(i) == c.rope_theta) return {a.rope_cos, a.rope_sin};
  return {a.rope_cos_swa, a.rope_sin_swa};
}

Tensor router_state_before(const Activations& a, const std::vector<int64_t>& prev, int64_t i) {
  return prev[size_t(i)] < 0 ? Tensor{} : a.layers[size_t(prev[size_t(i)])].moe.r;
}

// The host's token ids (or targets), N of them, as a tensor to copy from.
Tensor host_i32(const int32_t* p, int64_t N) {
  return Tensor(const_cast<int32_t*>(p), {N});
}

// a.ids and a.targets = the host's micro-batch; `copy` is device_copy or device_copy_async.
void load_tokens(Activations& a, const int32_t* ids, const int32_t* targets,
                 void (*copy)(const Tensor&, const Tensor&) = device_copy) {
  const int64_t N = a.B * a.T;
  copy(a.ids.view({N}), host_i32(ids, N));
  copy(a.targets, host_i32(targets, N));  // a no-op when targets already are a.targets
}

// The forward pass once a.ids and a.targets hold the micro-batch, up to a.loss_rows. With head_dw,
// the LM head's backward for grad_scale too (a.g.dx, head_dw->embed).
void forward_loaded(const Model& m, Activations& a, const ModelWeights* head_dw = nullptr,
                    double grad_scale = 0, const LayerStart& layer_start = nullptr);

// The mean of a.loss_rows over the positions with a target (read back to the host).
double loss_mean(const Activations& a) {
  const int64_t scored = ops::count_scored(a.targets);
  return scored ? ops::sum(a.loss_rows) / double(scored) : 0.0;
}

}  // namespace

double model_forward(const Model& m, Activations& a, const int32_t* ids) {
  const int64_t N = a.B * a.T;
  device_copy(a.ids.view({N}), host_i32(ids, N));
  ops::shift_targets(a.targets, a.ids.view({N}), a.B, a.T);
  forward_loaded(m, a);
  return loss_mean(a);
}

double model_forward(const Model& m, Activations& a, const int32_t* ids, const int32_t* targets) {
  load_tokens(a, ids, targets);
  forward_loaded(m, a);
  return loss_mean(a);
}

double model_forward_and_head_backward(Model& m, Activations& a, const int32_t* ids,
                                       const int32_t* targets, double grad_scale) {
  ZAYA_ASSERT(m.has_grads(),
              "model_forward_and_head_backward before zero_grads() allocated the gradients");
  load_tokens(a, ids, targets);
  forward_loaded(m, a, &m.dw, grad_scale);
  return loss_mean(a);
}

void model_forward_and_head_backward(Model& m, Activations& a, const int32_t* ids,
                                     const int32_t* targets, double grad_scale,
                                     const Tensor& loss_sum, const LayerStart& layer_start) {
  ZAYA_ASSERT(m.has_grads(),
              "model_forward_and_head_backward before zero_grads() allocated the gradients");
  ZAYA_ASSERT(loss_sum.device == m.device(), "model_forward_and_head_backward: loss_sum on {}",
              device_name(loss_sum.device));
  load_tokens(a, ids, targets, device_copy_async);
  forward_loaded(m, a, &m.dw, grad_scale, layer_start);
  ops::sum_to(loss_sum, a.loss_rows);
}

namespace {

void forward_loaded(const Model& m, Activations& a, const ModelWeights* head_dw, double grad_scale,
                    const LayerStart& layer_start) {
  ZAYA_ASSERT(a.device() == m.device(), "model_forward: a {} model with {} activations",
              device_name(m.device()), device_name(a.device()));
  const ZayaConfig& c = m.config();
  const ModelWeights& w = m.w;
  const int64_t N = a.B * a.T;
  const float eps = float(c.norm_epsilon);
  if (a.rope_theta != c.rope_theta)
    ops::rope_tables(a.rope_cos, a.rope_sin, 0, c.rope_theta, c.rotary_dim());
  a.rope_theta = c.rope_theta;
  if (a.rope_cos_swa.defined() && a.rope_theta_swa != c.swa_rope_theta)
    ops::rope_tables(a.rope_cos_swa, a.rope_sin_swa, 0, c.swa_rope_theta, c.rotary_dim());
  a.rope_theta_swa = c.swa_rope_theta;
  const Tensor ids_flat = a.ids.view({N});
  if (layer_start) layer_start(-1);
  ops::embedding_forward(a.emb, ids_flat, w.embed);

  const auto prev = previous_moe(c);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerActs& l = a.layers[size_t(i)];
    const LayerWeights& lw = w.layers[size_t(i)];
    const Tensor o_prev = i == 0 ? a.emb : a.layers[size_t(i - 1)].o;
    const Tensor h_prev = i == 0 ? Tensor{} : a.layers[size_t(i - 1)].h;
    if (layer_start) layer_start(i);
    ops::merge_rmsnorm_forward(l.h, l.x, l.rstd, o_prev, h_prev, lw.res.ao, lw.res.bo, lw.res.ar,
                               lw.res.br, lw.input_norm, eps);
    if (c.is_attention(i))
      attention_layer_forward(c, i, lw.attn, l.attn, rope_of(a, c, i), l.x, l.o);
    else
      moe_layer_forward(c, lw.moe, l.moe, l.x, router_state_before(a, prev, i), l.o);
    stash_layer(l);  // bf16 storage: the sub-layer's own tensors into their copies
  }
  const LayerActs& last = a.layers.back();
  if (layer_start) layer_start(c.num_layers());
  ops::merge_rmsnorm_forward(a.h_final, a.x_final, a.rstd_final, last.o, last.h, w.final_res.ao,
                             w.final_res.bo, w.final_res.ar, w.final_res.br, w.final_norm, eps);
  // The tied LM head and the loss in blocks (no [N,V] buffer), in training with its backward; the
  // logits only where kept.
  if (head_dw)
    ops::lm_head_xent_forward_backward(a.loss_rows, a.lse, a.g.dx, head_dw->embed, a.x_final,
                                       w.embed, a.targets, grad_scale);
  else
    ops::lm_head_xent_forward(a.loss_rows, a.lse, a.x_final, w.embed, a.targets);
  a.head_grad_done = head_dw != nullptr;
  a.head_grad_scale = grad_scale;
  if (a.logits.defined()) ops::linear_forward(a.logits, a.x_final, w.embed, {});
}

}  // namespace

void model_backward(Model& m, Activations& a, double grad_scale, const LayerDone& layer_done) {
  const ZayaConfig& c = m.config();
  const ModelWeights& w = m.w;
  ZAYA_ASSERT(m.has_grads(), "model_backward before zero_grads() allocated the gradients");
  ZAYA_ASSERT(a.device() == m.device(), "model_backward: a {} model with {} activations",
              device_name(m.device()), device_name(a.device()));
  const ModelWeights& dw = m.dw;
  BackwardScratch& g = a.g;
  const int64_t N = a.B * a.T;

  if (a.head_grad_done)  // model_forward_and_head_backward did the head
    ZAYA_ASSERT(a.head_grad_scale == grad_scale,
                "model_backward: grad_scale {} but the forward did the LM head for {}", grad_scale,
                a.head_grad_scale);
  else
    ops::lm_head_xent_backward(g.dx, dw.embed, a.x_final, w.embed, a.lse, a.targets, grad_scale);
  a.head_grad_done = false;  // a second model_backward would redo the head

  Tensor dh_cur = g.dh_a, dh_prev = g.dh_b;  // gradients of h_i and h_{i−1}
  ops::fill_zero(dh_cur);
  ops::fill_zero(dh_prev);
  const LayerActs& last = a.layers.back();
  ops::merge_rmsnorm_backward(g.dout, dh_prev, dw.final_res.ao, dw.final_res.bo, dw.final_res.ar,
                              dw.final_res.br, dw.final_norm, dh_cur, g.dx, a.h_final, last.o,
                              last.h, w.final_res.ao, w.final_res.bo, w.final_res.ar,
                              w.final_res.br, w.final_norm, a.rstd_final);
  std::swap(dh_cur, dh_prev);

  const auto prev = previous_moe(c);
  Tensor carry_in, carry_buf = g.dcarry_in, carry_out = g.dcarry_out;
  for (int64_t i = c.num_layers() - 1; i >= 0; --i) {
    const LayerActs& l = a.layers[size_t(i)];
    const LayerWeights& lw = w.layers[size_t(i)];
    const LayerWeights& ldw = dw.layers[size_t(i)];
    unstash_layer(l);
    if (c.is_attention(i)) {
      attention_layer_backward(c, i, lw.attn, ldw.attn, l.attn, g, rope_of(a, c, i), l.x, g.dout,
                               g.dx);
    } else {
      const int64_t R = l.moe.r.shape[1];
      const Tensor out = carry_out.prefix({N, R});
      bool carried =
          moe_layer_backward(c, lw.moe, ldw.moe, l.moe, g, l.x, router_state_before(a, prev, i),
                             g.dout, carry_in, out, g.dx);
      carry_in = carried ? out : Tensor{};
      std::swap(carry_buf, carry_out);
    }
    const bool first = i == 0;
    const Tensor o_prev = first ? a.emb : a.layers[size_t(i - 1)].o;
    const Tensor h_prev = first ? Tensor{} : a.layers[size_t(i - 1)].h;
    if (!first) ops::fill_zero(dh_prev);
    ops::merge_rmsnorm_backward(g.dout, first ? Tensor{} : dh_prev, ldw.res.ao, ldw.res.bo,
                                ldw.res.ar, ldw.res.br, ldw.input_norm, dh_cur, g.dx, l.h, o_prev,
                                h_prev, lw.res.ao, lw.res.bo, lw.res.ar, lw.res.br, lw.input_norm,
                                l.rstd);
    std::swap(dh_cur, dh_prev);
    if (layer_done) layer_done(i);
  }
  ops::embedding_backward(dw.embed, g.dout, a.ids.view({N}), c.pad_token_id);
  if (layer_done) layer_done(-1);
}

}  // namespace zaya
