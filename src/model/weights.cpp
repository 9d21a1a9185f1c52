#include "model/weights.h"

#include <string>

#include "model/param_names.h"

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
    const names::ResNames n = names::res(p);
    ResScale r{get(n.ao), get(n.bo), {}, {}};
    if (with_residual) r.ar = get(n.ar), r.br = get(n.br);
    return r;
  }
};

}  // namespace

ModelWeights bind_weights(const ZayaConfig& c, const ParamLayout& layout, float* base) {
  Binder b{layout, base};
  const int64_t D = c.hidden_size, d = c.head_dim(), Hk = c.kv_heads();
  ModelWeights w;
  w.embed = b.get(names::kEmbed);
  w.layers.resize(size_t(c.num_layers()));
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights& l = w.layers[size_t(i)];
    const names::LayerNames n = names::layer(i);
    l.input_norm = b.get(n.input_norm);
    l.res = b.res(n.res_prefix, i > 0);
    if (c.is_attention(i)) {
      AttentionWeights& at = l.attn;
      at.wqk = b.span(n.q, c.conv_channels(), D);  // q then k, packed
      at.wv = b.span(n.v1, Hk * d, D);             // v1 then v2, packed
      at.conv0_w = b.get(n.conv0_w);
      at.conv0_b = b.get(n.conv0_b);
      at.conv1_w = b.get(n.conv1_w);
      at.conv1_b = b.get(n.conv1_b);
      at.temp = b.get(n.temp);
      at.wo = b.get(n.o);
    } else {
      const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[size_t(i)];
      MoeWeights& m = l.moe;
      m.down_w = b.get(n.down_w);
      m.down_b = b.get(n.down_b);
      if (c.has_eda_scale(i)) m.eda_scale = b.get(n.eda_scale);
      m.norm_w = b.get(n.eda_norm);
      m.m1_w = b.get(n.m1_w);
      m.m1_b = b.get(n.m1_b);
      m.m2_w = b.get(n.m2_w);
      m.m2_b = b.get(n.m2_b);
      m.m3_w = b.get(n.m3_w);
      m.biases = b.get(n.biases);
      m.fc1 = Tensor(base + layout.at(n.fc1(0)).offset, {E, F, D});  // all experts, packed
      m.fc2 = Tensor(base + layout.at(n.fc2(0)).offset, {E, D, F / 2});
    }
  }
  w.final_res = b.res(names::kFinalRes, true);
  w.final_norm = b.get(names::kFinalNorm);
  return w;
}

}  // namespace zaya
