#include "model/param_layout.h"

#include "core/assert.h"

namespace zaya {

const ParamSpec& ParamLayout::at(const std::string& name) const {
  auto it = index.find(name);
  ZAYA_ASSERT(it != index.end(), "no parameter named {}", name);
  return specs[it->second];
}

namespace {

struct Builder {
  ParamLayout layout;
  void add(std::string name, std::vector<int64_t> shape, ParamKind kind, ParamInit init) {
    ParamSpec s{std::move(name), std::move(shape), kind, init, layout.total};
    layout.total += size_t(s.numel());
    layout.index[s.name] = layout.specs.size();
    layout.specs.push_back(std::move(s));
  }
  // The four residual-scaling vectors of a merge (two for sub-layer 0).
  void res_scale(const std::string& prefix, int64_t D, bool with_residual) {
    add(prefix + "hidden_states_scale", {D}, ParamKind::Vector, ParamInit::One);
    add(prefix + "hidden_states_bias", {D}, ParamKind::Vector, ParamInit::Zero);
    if (!with_residual) return;
    add(prefix + "residual_scale", {D}, ParamKind::Vector, ParamInit::One);
    add(prefix + "residual_bias", {D}, ParamKind::Vector, ParamInit::Zero);
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
  b.add("model.embed_tokens.weight", {c.vocab_size, D}, ParamKind::Embedding, ParamInit::Normal);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    b.add(p + "input_norm.weight", {D}, ParamKind::Vector, ParamInit::One);
    b.res_scale(p + "res_scale.", D, i > 0);
    if (c.is_attention(i)) {
      const std::string a = p + "self_attn.";
      b.add(a + "qkv.linear_q.weight", {Hq * d, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(a + "qkv.linear_k.weight", {Hk * d, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(a + "qkv.val_proj1.weight", {Hk * d / 2, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(a + "qkv.val_proj2.weight", {Hk * d / 2, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(a + "qkv.conv_qk.0.weight", {C, 1, 2}, ParamKind::Conv, ParamInit::Normal);
      b.add(a + "qkv.conv_qk.0.bias", {C}, ParamKind::Vector, ParamInit::Zero);
      b.add(a + "qkv.conv_qk.1.weight", {C, d, 2}, ParamKind::Conv, ParamInit::Normal);
      b.add(a + "qkv.conv_qk.1.bias", {C}, ParamKind::Vector, ParamInit::Zero);
      b.add(a + "qkv.temp", {Hk}, ParamKind::Vector, ParamInit::Zero);
      b.add(a + "o_proj.weight", {D, Hq * d}, ParamKind::Matrix, ParamInit::Normal);
    } else {
      const std::string r = p + "zaya_block.router.";
      const int64_t R = c.zaya_mlp_expansion[i], K = c.router_classes(i);
      const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[i];
      b.add(r + "down_proj.weight", {R, D}, ParamKind::Matrix, ParamInit::Normal);
      b.add(r + "down_proj.bias", {R}, ParamKind::Vector, ParamInit::Zero);
      if (c.has_eda_scale(i))
        b.add(r + "router_states_scale", {R}, ParamKind::Vector, ParamInit::One);
      b.add(r + "rmsnorm_eda.weight", {R}, ParamKind::Vector, ParamInit::One);
      b.add(r + "router_mlp.0.weight", {R, R}, ParamKind::Matrix, ParamInit::Normal);
      b.add(r + "router_mlp.0.bias", {R}, ParamKind::Vector, ParamInit::Zero);
      b.add(r + "router_mlp.2.weight", {R, R}, ParamKind::Matrix, ParamInit::Normal);
      b.add(r + "router_mlp.2.bias", {R}, ParamKind::Vector, ParamInit::Zero);
      b.add(r + "router_mlp.4.weight", {K, R}, ParamKind::Matrix, ParamInit::Normal);
      b.add(r + "balancing_biases", {K}, ParamKind::Buffer, ParamInit::BalancingBias);
      const std::string e = p + "zaya_block.experts.local_experts.";
      for (int64_t x = 0; x < E; ++x)
        b.add(e + std::to_string(x) + ".linear_fc1.weight", {F, D}, ParamKind::Expert,
              ParamInit::Normal);
      for (int64_t x = 0; x < E; ++x)
        b.add(e + std::to_string(x) + ".linear_fc2.weight", {D, F / 2}, ParamKind::Expert,
              ParamInit::Normal);
    }
  }
  b.res_scale("model.res_scale.", D, true);
  b.add("model.final_norm.weight", {D}, ParamKind::Vector, ParamInit::One);
  return std::move(b.layout);
}

}  // namespace zaya
