#include "model/moe.h"

#include <optional>

#include "ops/ops.h"
#include "ops/precision.h"

namespace zaya {

namespace {
// Native semantics: a token routed to the skip class (the last of K classes, with MoD) outputs 0,
// not p·x, so its weight (forward) and weight gradient (backward) are zeroed. v[N], choice[N] I32.
void zero_skip_entries(const Tensor& v, const Tensor& choice, const ZayaConfig& c, int64_t K) {
  if (!c.zaya_use_mod) return;
  ops::zero_where_class(v, choice, K - 1);
}

// The MoE grouping's offsets (host memory: MoeActs::offsets) as the ops take them.
Tensor host_offsets(const MoeActs& a) {
  return Tensor(const_cast<int32_t*>(a.offsets.data()), {int64_t(a.offsets.size())});
}
}  // namespace

void moe_layer_forward(const ZayaConfig& c, const MoeWeights& w, MoeActs& a, const Tensor& x,
                       const Tensor& rprev, const Tensor& o) {
  // The router's matrix products stay in fp32 whatever train.precision is (ops/precision.h).
  std::optional<ops::MatmulPrecisionScope> router_fp32(std::in_place, x.device,
                                                       ops::MatmulPrecision::F32);
  ops::linear_forward(a.r, x, w.down_w, w.down_b);
  if (w.eda_scale.defined()) {
    ZAYA_ASSERT(rprev.defined(), "EDA scale without an earlier MoE layer");
    ops::eda_forward(a.r, w.eda_scale, rprev);
  }
  ops::rmsnorm_forward(a.rn, a.rrstd, a.r, w.norm_w, float(c.norm_epsilon));  // the model's eps
  ops::linear_forward(a.a1p, a.rn, w.m1_w, w.m1_b);
  ops::gelu_forward(a.a1, a.a1p);
  ops::linear_forward(a.a2p, a.a1, w.m2_w, w.m2_b);
  ops::gelu_forward(a.a2, a.a2p);
  ops::linear_forward(a.logits, a.a2, w.m3_w, {});
  ops::router_select_forward(a.probs, a.choice, a.weight, a.logits, w.biases);
  if (c.skip_outputs_zero()) zero_skip_entries(a.weight, a.choice, c, a.logits.shape[1]);
  router_fp32.reset();
  ops::moe_forward(o, a.f, a.gu, a.act, x, a.choice, a.weight, w.fc1, w.fc2, a.order,
                   host_offsets(a));
}

bool moe_layer_backward(const ZayaConfig& c, const MoeWeights& w, const MoeWeights& dw,
                        const MoeActs& a, BackwardScratch& g, const Tensor& x, const Tensor& rprev,
                        const Tensor& dout, const Tensor& carry_in, const Tensor& carry_out,
                        const Tensor& dx) {
  const int64_t N = a.r.shape[0], R = a.r.shape[1], K = a.logits.shape[1];
  const Tensor dweight = g.dweight, dlogits = g.dlogits.prefix({N, K});
  const Tensor da2 = g.da2.prefix({N, R}), da2p = g.da2p.prefix({N, R});
  const Tensor da1 = g.da1.prefix({N, R}), da1p = g.da1p.prefix({N, R});
  const Tensor drn = g.drn.prefix({N, R}), dr = g.dr.prefix({N, R});

  ops::fill_zero(dx);  // moe_backward and the trunk both accumulate into dx
  ops::moe_backward(dx, dw.fc1, dw.fc2, dweight, dout, x, a.choice, a.weight, w.fc1, w.fc2, a.f,
                    a.gu, a.act, a.order, host_offsets(a));
  if (c.skip_outputs_zero()) zero_skip_entries(dweight, a.choice, c, K);  // no gradient either
  const ops::MatmulPrecisionScope router_fp32(x.device, ops::MatmulPrecision::F32);
  ops::router_select_backward(dlogits, dweight, a.probs, a.choice);
  ops::linear_backward(da2, dw.m3_w, {}, dlogits, a.a2, w.m3_w);
  ops::gelu_backward(da2p, da2, a.a2p);
  ops::linear_backward(da1, dw.m2_w, dw.m2_b, da2p, a.a1, w.m2_w);
  ops::gelu_backward(da1p, da1, a.a1p);
  ops::linear_backward(drn, dw.m1_w, dw.m1_b, da1p, a.rn, w.m1_w);
  // Total router-state gradient = own use (through the RMSNorm) + the next layer's EDA read.
  if (carry_in.defined()) ops::copy(dr, carry_in);
  ops::rmsnorm_backward(dr, dw.norm_w, drn, a.r, w.norm_w, a.rrstd, carry_in.defined());
  bool carried = false;
  if (w.eda_scale.defined()) {
    ops::fill_zero(carry_out);
    ops::eda_backward(carry_out, dw.eda_scale, dr, rprev, w.eda_scale);
    carried = true;
  }
  ops::linear_backward(dx, dw.down_w, dw.down_b, dr, x, w.down_w, /*accumulate_dx=*/true);
  return carried;
}

}  // namespace zaya
