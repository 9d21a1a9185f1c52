// The parameter layout (param_layout.h): one pass over the config adds every tensor in the
// packing order, with its kind, initialisation and sub-layer.
#include "model/param_layout.h"

#include "core/assert.h"
#include "model/param_names.h"

namespace zaya {

const ParamSpec& ParamLayout::at(const std::string& name) const {
  auto it = index.find(name);
  ZAYA_ASSERT(it != index.end(), "no parameter named {}", name);
  return specs[it->second];
}

namespace {

struct Builder {
  ParamLayout layout;
  int64_t layer = -1;  // of the tensors added next
  void add(std::string name, std::vector<int64_t> shape, ParamKind kind, ParamInit init) {
    ParamSpec s{std::move(name), std::move(shape), kind, init, layer, layout.total};
    layout.total += size_t(s.numel());
    layout.index[s.name] = layout.specs.size();
    layout.specs.push_back(std::move(s));
  }
  // The four residual-scaling vectors of a merge (two for sub-layer 0).
  void res_scale(const std::string& prefix, int64_t D, bool with_residual) {
    const names::ResNames n = names::res(prefix);
    add(n.ao, {D}, ParamKind::Vector, ParamInit::One);
    add(n.bo, {D}, ParamKind::Vector, ParamInit::Zero);
    if (!with_residual) return;
    add(n.ar, {D}, ParamKind::Vector, ParamInit::One);
    add(n.br, {D}, ParamKind::Vector, ParamInit::Zero);
  }
};

}  // namespace

ParamLayout make_param_layout(const ZayaConfig& c) {
  Builder b;
  const int64_t D = c.hidden_size, d = c.head_dim(), Hq = c.q_heads(), Hk = c.kv_heads();
  const int64_t C = c.conv_channels();
  ZAYA_CHECK_INPUT((Hk * d) % 2 == 0,
                   "config.json: num_key_value_heads·head_dim = {} must be even (the value "
                   "projection is split into current and previous-token halves)",
                   Hk * d);
  b.add(names::kEmbed, {c.vocab_size, D}, ParamKind::Embedding, ParamInit::Normal);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const names::LayerNames n = names::layer(i);
    b.layer = i;
    b.add(n.input_norm, {D}, ParamKind::Vector, ParamInit::One);
    b.res_scale(n.res_prefix, D, i > 0);
    if (c.is_attention(i)) {
      b.add(n.q, {Hq * d, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.k, {Hk * d, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.v1, {Hk * d / 2, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.v2, {Hk * d / 2, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.conv0_w, {C, 1, 2}, ParamKind::Conv, ParamInit::Normal);
      b.add(n.conv0_b, {C}, ParamKind::Vector, ParamInit::Zero);
      b.add(n.conv1_w, {C, d, 2}, ParamKind::Conv, ParamInit::Normal);
      b.add(n.conv1_b, {C}, ParamKind::Vector, ParamInit::Zero);
      b.add(n.temp, {Hk}, ParamKind::Vector, ParamInit::Zero);
      b.add(n.o, {D, Hq * d}, ParamKind::Matrix, ParamInit::Normal);
    } else {
      const int64_t R = c.zaya_mlp_expansion[i], K = c.router_classes(i);
      const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[i];
      b.add(n.down_w, {R, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.down_b, {R}, ParamKind::Vector, ParamInit::Zero);
      if (c.has_eda_scale(i)) b.add(n.eda_scale, {R}, ParamKind::Vector, ParamInit::One);
      b.add(n.eda_norm, {R}, ParamKind::Vector, ParamInit::One);
      b.add(n.m1_w, {R, R}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.m1_b, {R}, ParamKind::Vector, ParamInit::Zero);
      b.add(n.m2_w, {R, R}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.m2_b, {R}, ParamKind::Vector, ParamInit::Zero);
      b.add(n.m3_w, {K, R}, ParamKind::Matrix, ParamInit::Normal);
      b.add(n.biases, {K}, ParamKind::Buffer, ParamInit::BalancingBias);
      for (int64_t x = 0; x < E; ++x) b.add(n.fc1(x), {F, D}, ParamKind::Expert, ParamInit::Normal);
      for (int64_t x = 0; x < E; ++x)
        b.add(n.fc2(x), {D, F / 2}, ParamKind::Expert, ParamInit::Normal);
    }
  }
  b.layer = -1;
  b.res_scale(names::kFinalRes, D, true);
  b.add(names::kFinalNorm, {D}, ParamKind::Vector, ParamInit::One);
  return std::move(b.layout);
}

}  // namespace zaya
