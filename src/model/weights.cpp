#include "model/weights.h"

#include <string>

namespace zaya {

namespace {

struct Binder {
  const ParamLayout& layout;
  float* base;
  Tensor get(const std::string& name) const { return layout.at(name).view(base); }
  // Tensor `first` and those packed after it, viewed as one [rows, cols] block.
  Tensor span(const std::string& first, int64_t rows, int64_t cols) const {
    return Tensor(base + layout.at(first).offset, {rows, cols});
  }
  ResScale res(const std::string& p, bool with_residual) const {
    ResScale r{get(p + "hidden_states_scale"), get(p + "hidden_states_bias"), {}, {}};
    if (with_residual) r.ar = get(p + "residual_scale"), r.br = get(p + "residual_bias");
    return r;
  }
};

}  // namespace

ModelWeights bind_weights(const ZayaConfig& c, const ParamLayout& layout, float* base) {
  Binder b{layout, base};
  const int64_t D = c.hidden_size, d = c.head_dim(), Hk = c.kv_heads();
  ModelWeights w;
  w.embed = b.get("model.embed_tokens.weight");
  w.layers.resize(size_t(c.num_layers()));
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights& l = w.layers[size_t(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    l.input_norm = b.get(p + "input_norm.weight");
    l.res = b.res(p + "res_scale.", i > 0);
    if (c.is_attention(i)) {
      const std::string a = p + "self_attn.";
      AttentionWeights& at = l.attn;
      at.wqk = b.span(a + "qkv.linear_q.weight", c.conv_channels(), D);
      at.wv = b.span(a + "qkv.val_proj1.weight", Hk * d, D);
      at.conv0_w = b.get(a + "qkv.conv_qk.0.weight");
      at.conv0_b = b.get(a + "qkv.conv_qk.0.bias");
      at.conv1_w = b.get(a + "qkv.conv_qk.1.weight");
      at.conv1_b = b.get(a + "qkv.conv_qk.1.bias");
      at.temp = b.get(a + "qkv.temp");
      at.wo = b.get(a + "o_proj.weight");
    } else {
      const std::string r = p + "zaya_block.router.";
      const std::string e = p + "zaya_block.experts.local_experts.0.";
      const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[size_t(i)];
      MoeWeights& m = l.moe;
      m.down_w = b.get(r + "down_proj.weight");
      m.down_b = b.get(r + "down_proj.bias");
      if (c.has_eda_scale(i)) m.eda_scale = b.get(r + "router_states_scale");
      m.norm_w = b.get(r + "rmsnorm_eda.weight");
      m.m1_w = b.get(r + "router_mlp.0.weight");
      m.m1_b = b.get(r + "router_mlp.0.bias");
      m.m2_w = b.get(r + "router_mlp.2.weight");
      m.m2_b = b.get(r + "router_mlp.2.bias");
      m.m3_w = b.get(r + "router_mlp.4.weight");
      m.biases = b.get(r + "balancing_biases");
      m.fc1 = Tensor(base + layout.at(e + "linear_fc1.weight").offset, {E, F, D});
      m.fc2 = Tensor(base + layout.at(e + "linear_fc2.weight").offset, {E, D, F / 2});
    }
  }
  w.final_res = b.res("model.res_scale.", true);
  w.final_norm = b.get("model.final_norm.weight");
  return w;
}

}  // namespace zaya
