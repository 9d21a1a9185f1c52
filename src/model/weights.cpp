// bind_weights (weights.h): bind_params over an F32 arena, then the packed GEMM views.
#include "model/weights.h"

#include "core/assert.h"

namespace zaya {

namespace {

// `first` and the tensors packed after it, viewed as one block of `dims` (the layout keeps them
// adjacent; `last` is the final one of the run, checked to end where the block does).
Tensor packed(const Tensor& first, const Tensor& last, std::initializer_list<int64_t> dims) {
  Tensor t(first.data, first.dtype, dims);
  t.device = first.device;
  ZAYA_ASSERT(static_cast<const char*>(last.data) + last.nbytes() ==
                  static_cast<const char*>(first.data) + t.nbytes(),
              "weights: tensors of one GEMM are not adjacent in the layout");
  return t;
}

}  // namespace

ModelWeights bind_weights(const ZayaConfig& c, const ParamLayout& layout, float* base,
                          Device device) {
  const ParamViews v =
      bind_params(c, layout, [&](const ParamSpec& s) { return s.view(base, device); });
  const int64_t D = c.hidden_size, d = c.head_dim(), Hk = c.kv_heads();
  ModelWeights w;
  w.embed = v.embed;
  w.final_res = v.final_res;
  w.final_norm = v.final_norm;
  w.layers.resize(v.layers.size());
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerParams& p = v.layers[size_t(i)];
    LayerWeights& l = w.layers[size_t(i)];
    l.input_norm = p.input_norm;
    l.res = p.res;
    if (c.is_attention(i)) {
      const AttentionParams& a = p.attn;
      l.attn = {packed(a.wq, a.wk, {c.conv_channels(), D}),
                packed(a.wv1, a.wv2, {Hk * d, D}),
                a.conv0_w,
                a.conv0_b,
                a.conv1_w,
                a.conv1_b,
                a.temp,
                a.wo};
    } else {
      const MoeParams& e = p.moe;
      const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[size_t(i)];
      MoeWeights& m = l.moe;
      m.down_w = e.down_w;
      m.down_b = e.down_b;
      m.eda_scale = e.eda_scale;
      m.norm_w = e.norm_w;
      m.m1_w = e.m1_w;
      m.m1_b = e.m1_b;
      m.m2_w = e.m2_w;
      m.m2_b = e.m2_b;
      m.m3_w = e.m3_w;
      m.biases = e.biases;
      m.fc1 = packed(e.fc1.front(), e.fc1.back(), {E, F, D});  // all experts
      m.fc2 = packed(e.fc2.front(), e.fc2.back(), {E, D, F / 2});
    }
  }
  return w;
}

}  // namespace zaya
