// The original ↔ native tensor-name map (see the header for the rules). One table of per-sub-layer
// suffixes drives both directions; the residual scales, the input merge and the stacked experts
// are the index-shifting special cases below it.
#include "io/hf_native_layout.h"

#include <charconv>

namespace zaya {

namespace {

enum class Kind { Attention, Moe };  // which sub-layer of a pair the suffix belongs to

struct SuffixPair {
  Kind kind;
  const char* original;  // after "model.layers.{i}."
  const char* native;    // after "model.layers.{p}."
};

const SuffixPair kSuffixes[] = {
    {Kind::Attention, "input_norm.weight", "input_layernorm.weight"},
    {Kind::Attention, "self_attn.qkv.linear_q.weight", "self_attn.qkv_proj.q_proj.weight"},
    {Kind::Attention, "self_attn.qkv.linear_k.weight", "self_attn.qkv_proj.k_proj.weight"},
    {Kind::Attention, "self_attn.qkv.val_proj1.weight", "self_attn.qkv_proj.v_proj_current.weight"},
    {Kind::Attention, "self_attn.qkv.val_proj2.weight", "self_attn.qkv_proj.v_proj_delayed.weight"},
    {Kind::Attention, "self_attn.qkv.conv_qk.0.weight",
     "self_attn.qkv_proj.conv_qk_depthwise.weight"},
    {Kind::Attention, "self_attn.qkv.conv_qk.0.bias", "self_attn.qkv_proj.conv_qk_depthwise.bias"},
    {Kind::Attention, "self_attn.qkv.conv_qk.1.weight",
     "self_attn.qkv_proj.conv_qk_grouped.weight"},
    {Kind::Attention, "self_attn.qkv.conv_qk.1.bias", "self_attn.qkv_proj.conv_qk_grouped.bias"},
    {Kind::Attention, "self_attn.qkv.temp", "self_attn.qk_norm.temp"},
    {Kind::Attention, "self_attn.o_proj.weight", "self_attn.o_proj.weight"},
    {Kind::Moe, "input_norm.weight", "post_attention_layernorm.weight"},
    {Kind::Moe, "res_scale.hidden_states_scale",
     "post_attention_residual_scale.hidden_states_scale"},
    {Kind::Moe, "res_scale.hidden_states_bias", "post_attention_residual_scale.hidden_states_bias"},
    {Kind::Moe, "res_scale.residual_scale", "post_attention_residual_scale.residual_scale"},
    {Kind::Moe, "res_scale.residual_bias", "post_attention_residual_scale.residual_bias"},
    {Kind::Moe, "zaya_block.router.down_proj.weight", "mlp.gate.down_proj.weight"},
    {Kind::Moe, "zaya_block.router.down_proj.bias", "mlp.gate.down_proj.bias"},
    {Kind::Moe, "zaya_block.router.router_states_scale", "mlp.gate.router_states_scale"},
    {Kind::Moe, "zaya_block.router.rmsnorm_eda.weight", "mlp.gate.router_mlp.norm.weight"},
    {Kind::Moe, "zaya_block.router.router_mlp.0.weight", "mlp.gate.router_mlp.fc1.weight"},
    {Kind::Moe, "zaya_block.router.router_mlp.0.bias", "mlp.gate.router_mlp.fc1.bias"},
    {Kind::Moe, "zaya_block.router.router_mlp.2.weight", "mlp.gate.router_mlp.fc2.weight"},
    {Kind::Moe, "zaya_block.router.router_mlp.2.bias", "mlp.gate.router_mlp.fc2.bias"},
    {Kind::Moe, "zaya_block.router.router_mlp.4.weight", "mlp.gate.router_mlp.out_proj.weight"},
    {Kind::Moe, "zaya_block.router.balancing_biases", "mlp.gate.balancing_biases"},
};

const std::string kLayers = "model.layers.";
const std::string kFinalRes = "model.res_scale.";
const std::string kResScale = "res_scale.";
const std::string kPostMlp = "post_mlp_residual_scale.";
const std::string kInputMerge = "model.input_";  // + hidden_states_scale / hidden_states_bias
const std::string kExpertPrefix = "zaya_block.experts.local_experts.";
const std::string kGateUp = "mlp.experts.gate_up_proj", kDown = "mlp.experts.down_proj";
const std::string kEmbed = "model.embed_tokens.weight";
const std::string kFinalNormOriginal = "model.final_norm.weight",
                  kFinalNormNative = "model.norm.weight";

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// "model.layers.{i}.rest" → (i, rest); false if `name` is not of that form.
bool split_layer(const std::string& name, int64_t& i, std::string& rest) {
  if (!starts_with(name, kLayers)) return false;
  const char* b = name.data() + kLayers.size();
  const char* e = name.data() + name.size();
  auto [ptr, err] = std::from_chars(b, e, i);
  if (err != std::errc() || ptr == e || *ptr != '.' || i < 0) return false;
  rest = std::string(ptr + 1, e);
  return true;
}

std::string layer(int64_t i, const std::string& rest) {
  return kLayers + std::to_string(i) + "." + rest;
}

}  // namespace

bool is_stacked_expert(const std::string& native_name) {
  int64_t p;
  std::string rest;
  return split_layer(native_name, p, rest) && (rest == kGateUp || rest == kDown);
}

NativeRef native_ref(const std::string& name, int64_t num_sublayers) {
  const int64_t last_pair = num_sublayers / 2 - 1;
  if (name == kFinalNormOriginal) return {kFinalNormNative};
  if (starts_with(name, kFinalRes))
    return {layer(last_pair, kPostMlp + name.substr(kFinalRes.size()))};
  int64_t i;
  std::string rest;
  if (!split_layer(name, i, rest)) return {name};
  const int64_t p = i / 2;
  const Kind kind = i % 2 == 0 ? Kind::Attention : Kind::Moe;
  if (kind == Kind::Attention && starts_with(rest, kResScale)) {
    const std::string field = rest.substr(kResScale.size());
    return {i == 0 ? kInputMerge + field : layer(p - 1, kPostMlp + field)};
  }
  for (const SuffixPair& s : kSuffixes)
    if (s.kind == kind && rest == s.original) return {layer(p, s.native)};
  if (kind == Kind::Moe && starts_with(rest, kExpertPrefix)) {
    const std::string tail = rest.substr(kExpertPrefix.size());  // "{e}.linear_fcN.weight"
    int64_t e = -1;
    auto [ptr, err] = std::from_chars(tail.data(), tail.data() + tail.size(), e);
    const std::string after(ptr, tail.data() + tail.size());
    if (err == std::errc() && e >= 0) {
      if (after == ".linear_fc1.weight") return {layer(p, kGateUp), e};
      if (after == ".linear_fc2.weight") return {layer(p, kDown), e};
    }
  }
  return {name};
}

std::string original_name(const std::string& name, int64_t num_sublayers, int64_t expert) {
  const int64_t last_pair = num_sublayers / 2 - 1;
  if (name == kFinalNormNative) return kFinalNormOriginal;
  if (starts_with(name, kInputMerge)) return layer(0, kResScale + name.substr(kInputMerge.size()));
  int64_t p;
  std::string rest;
  if (!split_layer(name, p, rest)) return name;
  if (starts_with(rest, kPostMlp)) {
    const std::string field = rest.substr(kPostMlp.size());
    return p == last_pair ? kFinalRes + field : layer(2 * p + 2, kResScale + field);
  }
  if (expert >= 0 && (rest == kGateUp || rest == kDown))
    return layer(2 * p + 1, kExpertPrefix + std::to_string(expert) +
                                (rest == kGateUp ? ".linear_fc1.weight" : ".linear_fc2.weight"));
  for (const SuffixPair& s : kSuffixes)
    if (rest == s.native) return layer(2 * p + (s.kind == Kind::Moe ? 1 : 0), s.original);
  return name;
}

namespace {
// "model.layers.{i}.<from>rest" → "model.layers.{i}.<to>rest"; other names unchanged.
std::string swap_block(const std::string& name, const std::string& from, const std::string& to) {
  int64_t i;
  std::string rest;
  if (!split_layer(name, i, rest) || !starts_with(rest, from)) return name;
  return layer(i, to + rest.substr(from.size()));
}
}  // namespace

std::string legacy_name(const std::string& original) {
  return swap_block(original, "zaya_block.", "smoe_block.");
}

std::string original_from_legacy(const std::string& legacy) {
  return swap_block(legacy, "smoe_block.", "zaya_block.");
}

std::vector<std::pair<std::string, std::string>> native_name_table() {
  std::vector<std::pair<std::string, std::string>> rows = {
      {kEmbed, kEmbed},
      {"model.layers.0.res_scale.hidden_states_{scale,bias}",
       "model.input_hidden_states_{scale,bias}"},
  };
  for (const SuffixPair& s : kSuffixes)
    rows.emplace_back(
        std::string(s.kind == Kind::Attention ? "model.layers.{2p}." : "model.layers.{2p+1}.") +
            s.original,
        std::string("model.layers.{p}.") + s.native);
  rows.emplace_back("model.layers.{2p+2}.res_scale.*",
                    "model.layers.{p}.post_mlp_residual_scale.*");
  rows.emplace_back("model.res_scale.*", "model.layers.{P-1}.post_mlp_residual_scale.*");
  rows.emplace_back("model.layers.{2p+1}.zaya_block.experts.local_experts.{e}.linear_fc1.weight",
                    "model.layers.{p}.mlp.experts.gate_up_proj[e]");
  rows.emplace_back("model.layers.{2p+1}.zaya_block.experts.local_experts.{e}.linear_fc2.weight",
                    "model.layers.{p}.mlp.experts.down_proj[e]");
  rows.emplace_back(kFinalNormOriginal, kFinalNormNative);
  return rows;
}

}  // namespace zaya
