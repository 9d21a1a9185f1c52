// The CCA sub-layer (attention.h, docs/model.md §4): forward as explicit op calls in order,
// backward in strict reverse order, through the saved AttentionActs.
#include "model/attention.h"

#include "model/attention_window.h"
#include "ops/ops.h"

namespace zaya {

namespace {
// v is stored flat [B,T,Hk·d] for the shift; attention reads it as heads [B,T,Hk,d].
Tensor value_heads(const ZayaConfig& c, const Tensor& v) {
  return v.view({v.shape[0], v.shape[1], c.kv_heads(), c.head_dim()});
}
}  // namespace

void attention_layer_forward(const ZayaConfig& c, int64_t i, const AttentionWeights& w,
                             AttentionActs& a, const RopeTables& rope, const Tensor& x,
                             const Tensor& o) {
  ops::linear_forward(a.u, x, w.wqk, {});  // [q⁰ ; k⁰]
  ops::cca_conv_forward(a.z, a.y, a.u, w.conv0_w, w.conv0_b, w.conv1_w, w.conv1_b);
  ops::qk_mean_forward(a.q, a.k, a.z, a.u);
  ops::l2norm_scale_forward(a.qr, a.qn, a.q, {}, c.l2norm_floor());
  ops::l2norm_scale_forward(a.kr, a.kn, a.k, w.temp, c.l2norm_floor());
  ops::rope_forward(a.qr, rope.cos, rope.sin);
  ops::rope_forward(a.kr, rope.cos, rope.sin);
  ops::linear_forward(a.p, x, w.wv, {});  // [W_v1 x_t ; W_v2 x_t], shifted next
  ops::value_shift_forward(a.v, a.p);
  ops::attention_forward(a.att, a.lse, a.qr, a.kr, value_heads(c, a.v), attention_keys(c, i));
  ops::linear_forward(o, a.att, w.wo, {});
}

void attention_layer_backward(const ZayaConfig& c, int64_t i, const AttentionWeights& w,
                              const AttentionWeights& dw, const AttentionActs& a,
                              BackwardScratch& g, const RopeTables& rope, const Tensor& x,
                              const Tensor& dout, const Tensor& dx) {
  ops::linear_backward(g.datt, dw.wo, {}, dout, a.att, w.wo);
  ops::attention_backward(g.dqr, g.dkr, value_heads(c, g.dv), g.datt, a.qr, a.kr,
                          value_heads(c, a.v), a.att, a.lse, attention_keys(c, i));
  ops::value_shift_backward(g.dp, g.dv);
  ops::linear_backward(dx, dw.wv, {}, g.dp, x, w.wv);  // dx overwritten here
  ops::rope_backward(g.dqr, rope.cos, rope.sin);
  ops::rope_backward(g.dkr, rope.cos, rope.sin);
  ops::l2norm_scale_backward(g.dq, {}, g.dqr, a.q, a.qn, {}, c.l2norm_floor());
  ops::l2norm_scale_backward(g.dk, dw.temp, g.dkr, a.k, a.kn, w.temp, c.l2norm_floor());
  ops::qk_mean_backward(g.dz, g.du, g.dq, g.dk);
  ops::cca_conv_backward(g.du, dw.conv0_w, dw.conv0_b, dw.conv1_w, dw.conv1_b, g.dz, a.u, a.y,
                         w.conv0_w, w.conv1_w);
  ops::linear_backward(dx, dw.wqk, {}, g.du, x, w.wqk, /*accumulate_dx=*/true);
}

}  // namespace zaya
