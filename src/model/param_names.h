// The tensor names of a ZAYA1 checkpoint (Hugging Face layout, docs/model.md §2), written once: the
// parameter layout (param_layout.cpp), the training views (weights.cpp) and the inference views
// (infer/infer_model.cpp) all bind through these.
#pragma once
#include <cstdint>
#include <string>

namespace zaya::names {

inline const std::string kEmbed = "model.embed_tokens.weight";
inline const std::string kFinalNorm = "model.final_norm.weight";
inline const std::string kFinalRes = "model.res_scale.";

// The four residual-scaling vectors of a merge with prefix p (sub-layer 0 has only the first two).
struct ResNames {
  std::string ao, bo, ar, br;  // hidden_states_scale/bias, residual_scale/bias
};
inline ResNames res(const std::string& p) {
  return {p + "hidden_states_scale", p + "hidden_states_bias", p + "residual_scale",
          p + "residual_bias"};
}

// Every tensor name of sub-layer i (the attention names for a CCA layer, the router and expert
// names for an MoE layer; both are filled, the layer kind picks which exist).
struct LayerNames {
  std::string input_norm, res_prefix;
  std::string q, k, v1, v2, conv0_w, conv0_b, conv1_w, conv1_b, temp, o;  // CCA attention
  std::string down_w, down_b, eda_scale, eda_norm, m1_w, m1_b, m2_w, m2_b, m3_w, biases;  // router
  std::string expert_prefix;  // + "<e>.linear_fc1.weight" / "<e>.linear_fc2.weight"
  std::string fc1(int64_t e) const {
    return expert_prefix + std::to_string(e) + ".linear_fc1.weight";
  }
  std::string fc2(int64_t e) const {
    return expert_prefix + std::to_string(e) + ".linear_fc2.weight";
  }
};

inline LayerNames layer(int64_t i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const std::string a = p + "self_attn.", r = p + "zaya_block.router.";
  LayerNames n;
  n.input_norm = p + "input_norm.weight";
  n.res_prefix = p + "res_scale.";
  n.q = a + "qkv.linear_q.weight";
  n.k = a + "qkv.linear_k.weight";
  n.v1 = a + "qkv.val_proj1.weight";
  n.v2 = a + "qkv.val_proj2.weight";
  n.conv0_w = a + "qkv.conv_qk.0.weight";
  n.conv0_b = a + "qkv.conv_qk.0.bias";
  n.conv1_w = a + "qkv.conv_qk.1.weight";
  n.conv1_b = a + "qkv.conv_qk.1.bias";
  n.temp = a + "qkv.temp";
  n.o = a + "o_proj.weight";
  n.down_w = r + "down_proj.weight";
  n.down_b = r + "down_proj.bias";
  n.eda_scale = r + "router_states_scale";
  n.eda_norm = r + "rmsnorm_eda.weight";
  n.m1_w = r + "router_mlp.0.weight";
  n.m1_b = r + "router_mlp.0.bias";
  n.m2_w = r + "router_mlp.2.weight";
  n.m2_b = r + "router_mlp.2.bias";
  n.m3_w = r + "router_mlp.4.weight";
  n.biases = r + "balancing_biases";
  n.expert_prefix = p + "zaya_block.experts.local_experts.";
  return n;
}

}  // namespace zaya::names
