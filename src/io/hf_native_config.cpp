// transformers' native ZAYA config.json ↔ ZayaConfig. The native schema describes a stack of P
// decoder layers, each one CCA attention sub-layer followed by one MoE sub-layer, with one width
// per kind: internally that is zaya_layers = ["a", E] × P and per-sub-layer lists filled from the
// scalars. Field meanings (transformers' configuration_zaya.py):
//   num_hidden_layers P (pairs)          num_attention_heads H_q (query heads; internal N_h =
//   2·H_q) head_dim d (must be D / (2·H_q))     moe_intermediate_size I (expert hidden; internal F
//   = 2·I) num_experts E                        router_hidden_size R rms_norm_eps (every norm)
//   rope_parameters {"hybrid": {rope_theta, partial_rotary_factor},
//                    "hybrid_sliding": {rope_theta, partial_rotary_factor}}
//   layer_types ["hybrid" | "hybrid_sliding"] × P; sliding_window W (the config value of every
//   "hybrid_sliding" layer: swa_layers holds W at that pair's attention sub-layer, 0 elsewhere;
//   docs/model.md states how many keys W lets a query see). The windowed layers' θ is
//   swa_rope_theta; their partial rotary factor must equal the hybrid one (zaya has one).
#include "io/hf_native_config.h"

#include <algorithm>

#include "io/config_fields.h"

namespace zaya {

namespace {

using json = nlohmann::json;
using namespace config_fields;

// Fields whose presence marks a schema (a file with both kinds is rejected).
const char* const kNativeOnly[] = {"layer_types",  "moe_intermediate_size", "router_hidden_size",
                                   "rms_norm_eps", "rope_parameters",       "num_experts_per_tok"};
const char* const kOriginalOnly[] = {
    "zaya_layers",           "smoe_layers",          "smoe_mlp_expansion", "swa_layers",
    "swa_rotary_base",       "rotary_base",          "rope_pct",           "cca_num_q_heads",
    "num_query_groups_list", "ffn_hidden_size_list", "zaya_mlp_expansion", "ffn_hidden_size",
    "norm_epsilon",          "moe_router_topk",      "zaya_use_mod",       "zaya_use_eda"};

// Native fields with no original counterpart of the same name, which the reader consumes.
const char* const kNativeStructural[] = {
    "num_hidden_layers", "layer_types",         "head_dim",           "moe_intermediate_size",
    "num_experts",       "num_experts_per_tok", "router_hidden_size", "rms_norm_eps",
    "rope_parameters",   "sliding_window"};
// Fields both schemas name alike, which the reader consumes too.
const char* const kShared[] = {"hidden_size",
                               "vocab_size",
                               "num_attention_heads",
                               "num_key_value_heads",
                               "max_position_embeddings",
                               "tie_word_embeddings",
                               "pad_token_id",
                               "bos_token_id",
                               "eos_token_id"};
// Native leftovers kept in `extra` but meaningless to the original schema.
const char* const kNativeExtra[] = {"hidden_act", "initializer_range", "output_router_logits",
                                    "dtype",      "cca_time0",         "cca_time1"};

// Everything else stays in `extra`, where validate_config checks the fixed values the schemas
// share (attention_bias, sliding_window, ...).
bool consumed(const std::string& key) {
  for (const char* k : kNativeStructural)
    if (key == k) return true;
  for (const char* k : kShared)
    if (key == k) return true;
  return false;
}

const json* find(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

int64_t required_int(const json& j, const char* name) {
  const json* v = find(j, name);
  if (!v) field_error(name, "missing (expected an integer: native ZAYA config)");
  return as_int(name, *v);
}

int64_t optional_int(const json& j, const char* name, int64_t fallback) {
  const json* v = find(j, name);
  return v ? as_int(name, *v) : fallback;
}

// One layer type's {rope_type, rope_theta, partial_rotary_factor}; `where` names it in errors.
struct RopeEntry {
  double theta, factor;
};
RopeEntry read_rope_entry(const json& p, const std::string& where) {
  if (!p.is_object()) field_error(where, "got {} (expected an object)", shown(p));
  if (const json* t = find(p, "rope_type"); t && *t != json("default"))
    field_error(where + ".rope_type", "is {} (expected \"default\": plain RoPE)", shown(*t));
  const json* theta = find(p, "rope_theta");
  if (!theta) field_error(where + ".rope_theta", "missing (expected a number)");
  const std::string tn = where + ".rope_theta", fn = where + ".partial_rotary_factor";
  // transformers' default RoPE init reads the factor with a default of 1.0.
  const json* prf = find(p, "partial_rotary_factor");
  return {as_number(tn.c_str(), *theta), prf ? as_number(fn.c_str(), *prf) : 1.0};
}

// rope_parameters: {"hybrid": {...}, "hybrid_sliding": {...}} (possibly with a stray top-level
// "rope_type", as on the hub), or one flat {rope_type, rope_theta, partial_rotary_factor} for every
// layer type. Missing: transformers' defaults.
void read_rope(const json& j, ZayaConfig& c) {
  c.rope_theta = 5'000'000.0;
  c.partial_rotary_factor = 0.5;
  const json* rp = find(j, "rope_parameters");
  if (!rp || rp->is_null()) return;
  if (!rp->is_object())
    field_error("rope_parameters", "got {} (expected an object keyed by layer type)", shown(*rp));
  const bool flat = rp->contains("rope_theta");
  const json* p = flat ? rp : find(*rp, "hybrid");
  if (!p)
    field_error("rope_parameters", "has no \"hybrid\" entry (expected {{\"hybrid\": {{...}}}})");
  const RopeEntry hybrid = read_rope_entry(*p, flat ? "rope_parameters" : "rope_parameters.hybrid");
  c.rope_theta = hybrid.theta;
  c.partial_rotary_factor = hybrid.factor;
  const json* ps = flat ? nullptr : find(*rp, "hybrid_sliding");
  if (!ps || ps->is_null()) return;
  const RopeEntry sliding = read_rope_entry(*ps, "rope_parameters.hybrid_sliding");
  if (sliding.factor != hybrid.factor)
    field_error("rope_parameters.hybrid_sliding.partial_rotary_factor",
                "is {} but rope_parameters.hybrid.partial_rotary_factor is {} (expected equal: "
                "zaya rotates the same share of every head)",
                sliding.factor, hybrid.factor);
  if (!(sliding.theta > 0))
    field_error("rope_parameters.hybrid_sliding.rope_theta", "is {} (expected a positive number)",
                sliding.theta);
  c.swa_rope_theta = sliding.theta;
}

// layer_types: "hybrid" or "hybrid_sliding" per pair; true at the sliding pairs (empty = none).
std::vector<bool> read_layer_types(const json& j, int64_t P) {
  std::vector<bool> sliding;
  const json* lt = find(j, "layer_types");
  if (!lt || lt->is_null()) return sliding;
  if (!lt->is_array()) field_error("layer_types", "got {} (expected a list)", shown(*lt));
  if (int64_t(lt->size()) != P)
    field_error("layer_types", "has {} entries (expected num_hidden_layers = {})", lt->size(), P);
  for (size_t i = 0; i < lt->size(); ++i) {
    const json& e = (*lt)[i];
    if (e == json("hybrid") || e == json("hybrid_sliding")) {
      sliding.push_back(e == json("hybrid_sliding"));
      continue;
    }
    field_error("layer_types", "entry {} is {} (expected \"hybrid\" or \"hybrid_sliding\")", i,
                shown(e));
  }
  return sliding;
}

}  // namespace

namespace {
// What the writer puts in every native file unless `extra` has it (and the reader fills in when a
// file leaves it out, so that writing and reading again gives the same config).
const std::vector<std::pair<std::string, json>>& native_defaults() {
  static const std::vector<std::pair<std::string, json>> d = {
      {"architectures", json::array({"ZayaForCausalLM"})},
      {"model_type", "zaya"},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"lm_head_bias", false},
      {"cca_time0", 2},
      {"cca_time1", 2}};
  return d;
}
}  // namespace

bool native_owned_field(const std::string& key) {
  for (const char* k : kNativeStructural)
    if (key == k) return true;
  for (const char* k : kNativeExtra)
    if (key == k) return true;
  return false;
}

bool is_native_schema(const json& j) {
  const char* native = nullptr;
  const char* original = nullptr;
  for (const char* k : kNativeOnly)
    if (!native && j.contains(k)) native = k;
  for (const char* k : kOriginalOnly)
    if (!original && j.contains(k)) original = k;
  if (native && original)
    fail(
        "config.json: mixed schemas: field '{}' belongs to transformers' native ZAYA config but "
        "field '{}' to the original (ZAYA1-base) one (expected one schema; `zaya convert` writes "
        "either)",
        native, original);
  return native != nullptr;
}

ZayaConfig native_config_from_json(const json& j) {
  ZayaConfig c;
  c.semantics = Semantics::Native;
  c.hidden_size = required_int(j, "hidden_size");
  c.vocab_size = required_int(j, "vocab_size");
  const int64_t P = required_int(j, "num_hidden_layers");
  if (P <= 0) field_error("num_hidden_layers", "is {} (expected a positive number of layers)", P);
  const std::vector<bool> sliding = read_layer_types(j, P);
  const bool any_sliding = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
  const json* sw = find(j, "sliding_window");
  int64_t W = 0;
  if (any_sliding) {
    if (!sw || sw->is_null())
      field_error("sliding_window",
                  "is missing or null but layer_types has \"hybrid_sliding\" layers (expected "
                  "the window, a positive integer)");
    W = as_int("sliding_window", *sw);
    if (W <= 0)
      field_error("sliding_window",
                  "is {} (expected a positive window for the \"hybrid_sliding\" "
                  "layers)",
                  W);
  }
  const int64_t Hq = required_int(j, "num_attention_heads");
  const int64_t Hk = required_int(j, "num_key_value_heads");
  const int64_t E = required_int(j, "num_experts");
  const int64_t I = required_int(j, "moe_intermediate_size");
  const int64_t R = optional_int(j, "router_hidden_size", 256);
  if (Hq <= 0) field_error("num_attention_heads", "is {} (expected a positive number)", Hq);
  if (E <= 0) field_error("num_experts", "is {} (expected a positive number of experts)", E);
  // transformers' ZayaConfig default head_dim is 128; zaya's head size is D / (2·H_q).
  const int64_t d = optional_int(j, "head_dim", 128);
  if (c.hidden_size % (2 * Hq) != 0 || d != c.hidden_size / (2 * Hq))
    field_error("head_dim",
                "is {} but hidden_size / (2·num_attention_heads) = {} / {} (expected equal: CCA "
                "compresses the queries to half the heads of width hidden_size / (2·H_q))",
                d, c.hidden_size, 2 * Hq);
  c.num_attention_heads = 2 * Hq;
  c.num_key_value_heads = Hk;
  c.moe_router_topk = optional_int(j, "num_experts_per_tok", 1);
  if (const json* v = find(j, "rms_norm_eps")) c.norm_epsilon = as_number("rms_norm_eps", *v);
  read_rope(j, c);
  c.max_position_embeddings = optional_int(j, "max_position_embeddings", 131072);
  if (const json* v = find(j, "tie_word_embeddings"))
    c.tie_word_embeddings = as_bool("tie_word_embeddings", *v);
  c.pad_token_id = optional_int(j, "pad_token_id", 0);
  c.bos_token_id = optional_int(j, "bos_token_id", 2);
  if (const json* v = find(j, "eos_token_id"); v && v->is_array())
    field_error("eos_token_id", "is a list {} (expected one integer: zaya has one eos id)",
                shown(*v));
  c.eos_token_id = optional_int(j, "eos_token_id", 106);
  c.zaya_use_mod = true;      // native ZAYA always has the skip class
  c.zaya_use_eda = true;      // and EDA in every router but the first
  c.residual_in_fp32 = true;  // and keeps the residual stream in fp32
  for (int64_t p = 0; any_sliding && p < P; ++p)
    c.swa_layers.insert(c.swa_layers.end(), {sliding[size_t(p)] ? W : 0, 0});
  for (int64_t p = 0; p < P; ++p) {
    c.zaya_layers.insert(c.zaya_layers.end(), {0, E});
    c.cca_num_q_heads.insert(c.cca_num_q_heads.end(), {Hq, 0});
    c.num_query_groups_list.insert(c.num_query_groups_list.end(), {Hk, 0});
    c.ffn_hidden_size_list.insert(c.ffn_hidden_size_list.end(), {0, 2 * I});
    c.zaya_mlp_expansion.insert(c.zaya_mlp_expansion.end(), {0, R});
  }
  for (const auto& [key, value] : j.items())
    if (!consumed(key)) c.extra[key] = value;
  // A window no layer uses (all "hybrid") is kept as written.
  if (!any_sliding && sw && !sw->is_null()) c.extra["sliding_window"] = *sw;
  for (const auto& [key, value] : native_defaults())
    if (!c.extra.contains(key)) c.extra[key] = value;
  return c;
}

namespace {
// The first nonzero window (0 if none).
int64_t first_window(const ZayaConfig& c) {
  for (int64_t w : c.swa_layers)
    if (w > 0) return w;
  return 0;
}
}  // namespace

void check_native_expressible(const ZayaConfig& c) {
  const int64_t L = c.num_layers();
  if (L % 2 != 0)
    field_error("zaya_layers",
                "has {} sub-layers (the native schema needs an even number: attention, MoE pairs)",
                L);
  if (!c.zaya_use_mod)
    field_error("zaya_use_mod", "is false (the native schema always has the skip class)");
  if (!c.zaya_use_eda) field_error("zaya_use_eda", "is false (the native schema always has EDA)");
  for (int64_t i = 0; i < L; ++i) {
    if (c.is_attention(i) != (i % 2 == 0))
      field_error("zaya_layers",
                  "entry {} is {} (the native schema needs attention at even and MoE at odd "
                  "sub-layers, starting with attention)",
                  i, c.is_attention(i) ? "\"a\"" : std::to_string(c.zaya_layers[size_t(i)]));
    if (c.is_attention(i)) {
      const int64_t w = c.window(i), first = first_window(c);
      if (w > 0 && w != first)
        field_error("swa_layers",
                    "entry {} is {} but an earlier window is {} (the native schema has one "
                    "sliding_window for every \"hybrid_sliding\" layer)",
                    i, w, first);
      continue;
    }
    const std::pair<const char*, const std::vector<int64_t>*> per_moe[] = {
        {"zaya_layers", &c.zaya_layers},
        {"ffn_hidden_size_list", &c.ffn_hidden_size_list},
        {"zaya_mlp_expansion", &c.zaya_mlp_expansion}};
    for (const auto& [name, list] : per_moe)
      if ((*list)[size_t(i)] != (*list)[1])
        field_error(name,
                    "entry {} is {} but entry 1 is {} (the native schema has one value for every "
                    "MoE sub-layer)",
                    i, (*list)[size_t(i)], (*list)[1]);
  }
}

json native_config_to_json(const ZayaConfig& c) {
  validate_config(c);
  check_native_expressible(c);
  json j = c.extra.is_object() ? c.extra : json::object();
  // The fields a native file names and zaya does not vary: the file's own values where it gave
  // them (the reader keeps them in `extra`; validate_config checked them), else transformers'.
  for (const auto& [key, value] : native_defaults())
    if (!j.contains(key)) j[key] = value;
  const int64_t P = c.num_layers() / 2;
  j["hidden_size"] = c.hidden_size;
  j["vocab_size"] = c.vocab_size;
  j["num_hidden_layers"] = P;
  const int64_t W = first_window(c);
  j["layer_types"] = json::array();
  for (int64_t p = 0; p < P; ++p)
    j["layer_types"].push_back(c.window(2 * p) > 0 ? "hybrid_sliding" : "hybrid");
  j["num_attention_heads"] = c.q_heads();
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.head_dim();
  j["moe_intermediate_size"] = c.ffn_hidden_size_list[1] / 2;
  j["num_experts"] = c.num_experts(1);
  j["num_experts_per_tok"] = c.moe_router_topk;
  j["router_hidden_size"] = c.zaya_mlp_expansion[1];
  j["rms_norm_eps"] = c.norm_epsilon;
  j["rope_parameters"] = {{"hybrid",
                           {{"rope_type", "default"},
                            {"rope_theta", c.rope_theta},
                            {"partial_rotary_factor", c.partial_rotary_factor}}}};
  j["rope_parameters"]["rope_type"] = "default";  // as transformers writes it (hub configs)
  if (c.swa_rope_theta > 0)
    j["rope_parameters"]["hybrid_sliding"] = {{"rope_type", "default"},
                                              {"rope_theta", c.swa_rope_theta},
                                              {"partial_rotary_factor", c.partial_rotary_factor}};
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_token_id"] = c.pad_token_id;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (W > 0)
    j["sliding_window"] = W;
  else if (!j.contains("sliding_window"))
    j["sliding_window"] = nullptr;
  return j;
}

}  // namespace zaya
