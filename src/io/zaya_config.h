// ZayaConfig: the ZAYA1 config.json schema (docs/model.md §1) as a struct, plus the derived sizes
// the model uses. Parsing, validation (naming the bad field) and writing live in zaya_config.cpp.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
#include "core/enum_words.h"

namespace zaya {

// Which of the two checkpoint families a model belongs to. It picks both the on-disk layout
// (config schema and tensor names, see io/hf_native_layout.h) and the few places where the two
// reference implementations compute differently (docs/checkpoint-layouts.md):
//   Original: Zyphra's transformers fork (ZAYA1-base; "S1" of docs/model.md): skip class outputs
//             p·x, the q/k L2 norm divides by the plain norm.
//   Native:   Hugging Face transformers' own ZAYA (ZAYA1-8B): skip class outputs 0, the L2 norm is
//             clamped below at float32's epsilon.
// Both take the router norm's eps from the model's one norm eps (norm_epsilon = rms_norm_eps).
enum class Semantics { Original, Native };
template <>
struct EnumWords<Semantics> {
  static constexpr std::pair<Semantics, std::string_view> words[] = {
      {Semantics::Original, "original"}, {Semantics::Native, "native"}};
};
// The config.json schema a file was read in.
enum class ConfigSchema {
  OriginalLists,   // S1: zaya_layers plus per-sub-layer lists (ZAYA1-base)
  OriginalScalar,  // the intermediate Zyphra schema: zaya_layers plus scalar widths
  Native,          // transformers' ZayaConfig: num_hidden_layers pairs, layer_types, ...
  Legacy,          // the legacy alternating schema of ZAYA1-74B-preview-legacy: smoe_layers,
                   // smoe_mlp_expansion, rotary_base, rope_pct, swa_layers (original layout)
};
const char* semantics_name(Semantics s);  // "original" | "native"
const char* schema_name(ConfigSchema s);

struct ZayaConfig {
  // ---- fields read from config.json (S1 schema) ----
  int64_t hidden_size = 2048;
  int64_t vocab_size = 262272;
  // Per sub-layer: 0 = CCA attention ("a" in the file), n > 0 = MoE with n real experts.
  std::vector<int64_t> zaya_layers;
  int64_t num_attention_heads = 16;
  int64_t num_key_value_heads = 2;
  std::vector<int64_t> cca_num_q_heads;
  std::vector<int64_t> num_query_groups_list;
  std::vector<int64_t> ffn_hidden_size_list;
  std::vector<int64_t> zaya_mlp_expansion;
  int64_t moe_router_topk = 1;
  bool zaya_use_mod = true;
  bool zaya_use_eda = true;
  double norm_epsilon = 1e-5;
  double rope_theta = 10000;
  double partial_rotary_factor = 0.5;
  int64_t max_position_embeddings = 4096;
  bool tie_word_embeddings = true;
  int64_t pad_token_id = 0, bos_token_id = 2, eos_token_id = 1;
  bool scale_residual_merge = true;
  bool residual_in_fp32 = false;
  // Per sub-layer sliding window of CCA attention as config.json gives it (0 = full attention):
  // the native schema's `sliding_window` on its "hybrid_sliding" layer_types, the legacy schema's
  // `swa_layers`. Empty = every layer full. docs/model.md states how many keys a window lets a
  // query see.
  std::vector<int64_t> swa_layers;
  double swa_rope_theta = 0;  // RoPE θ of the windowed layers (0 = rope_theta)
  // Everything else in the file (ignored or fixed-value fields) is kept verbatim so writing a
  // config back loses nothing.
  nlohmann::json extra = nlohmann::json::object();
  // Not a config.json field: the family this model belongs to (read from the schema; written back
  // in the same one).
  Semantics semantics = Semantics::Original;
  // Not a config.json field either: an original-family model read from (and written back in) the
  // legacy schema, whose tensors sit under `smoe_block.` where ZAYA1-base's sit under `zaya_block.`
  // (docs/checkpoint-layouts.md). Only with Semantics::Original.
  bool legacy_names = false;

  // ---- derived (valid after validation) ----
  int64_t num_layers() const { return int64_t(zaya_layers.size()); }
  bool is_attention(int64_t i) const { return zaya_layers[i] == 0; }
  int64_t head_dim() const { return hidden_size / num_attention_heads; }           // d
  int64_t q_heads() const { return num_attention_heads / 2; }                      // H_q
  int64_t kv_heads() const { return num_key_value_heads; }                         // H_k
  int64_t conv_channels() const { return (q_heads() + kv_heads()) * head_dim(); }  // C
  int64_t rotary_dim() const { return int64_t(double(head_dim()) * partial_rotary_factor); }
  int64_t num_experts(int64_t i) const { return zaya_layers[i]; }  // n
  int64_t window(int64_t i) const { return swa_layers.empty() ? 0 : swa_layers[size_t(i)]; }
  double rope_theta_of(int64_t i) const {
    return window(i) > 0 && swa_rope_theta > 0 ? swa_rope_theta : rope_theta;
  }
  int64_t router_classes(int64_t i) const { return zaya_layers[i] + (zaya_use_mod ? 1 : 0); }
  // True when MoE sub-layer i has an EDA scale γ (router_states_scale).
  bool has_eda_scale(int64_t i) const { return zaya_use_eda && !is_attention(i) && i != 1; }
  // Semantic switches read by the model code (see Semantics).
  bool skip_outputs_zero() const { return semantics == Semantics::Native; }
  float l2norm_floor() const { return semantics == Semantics::Native ? 1.1920929e-07f : 0.0f; }

  bool operator==(const ZayaConfig&) const = default;  // all fields, including extra
};

// Detects the schema (reported through `schema` when given), parses and validates; throws
// zaya::Error naming the field on any problem (and on a file mixing schemas). Original schemas give
// Semantics::Original, the native one Semantics::Native.
ZayaConfig config_from_json(const nlohmann::json& j, ConfigSchema* schema = nullptr);
// The checks of docs/model.md §1.3 (and the fixed values of §1.1/§1.2, looked up in `extra`) on a
// config built in code; config_from_json and save_config run it. Throws zaya::Error naming a field.
void validate_config(const ZayaConfig& c);
ZayaConfig load_config(const std::string& path, ConfigSchema* schema = nullptr);
// The file in c's family: Original → the S1-readable file (the known fields plus `extra` verbatim,
// "a" for attention entries); Native → transformers' schema (hf_native_config.cpp).
nlohmann::json config_to_json(const ZayaConfig& c);
// The same model in the other family (or c itself): checks that the target schema can express it
// (throws zaya::Error naming the field otherwise) and drops the source schema's own leftover fields
// from `extra`, keeping those both schemas share.
ZayaConfig with_semantics(const ZayaConfig& c, Semantics to);
// The three layouts `zaya convert --to` names: native, original (ZAYA1-base's names) and legacy
// (the original family in the legacy 74B schema and names).
enum class CheckpointLayout { Native, Original, Legacy };
template <>
struct EnumWords<CheckpointLayout> {
  static constexpr std::pair<CheckpointLayout, std::string_view> words[] = {
      {CheckpointLayout::Native, "native"},
      {CheckpointLayout::Original, "original"},
      {CheckpointLayout::Legacy, "legacy"}};
};
CheckpointLayout layout_of(const ZayaConfig& c);
// with_semantics plus the legacy switch: the same model written in layout `to`.
ZayaConfig with_layout(const ZayaConfig& c, CheckpointLayout to);
// Validates, then writes config_to_json(c) atomically (temporary file + rename).
void save_config(const ZayaConfig& c, const std::string& path);

}  // namespace zaya
