// config.json ↔ ZayaConfig (docs/model.md §1). One field list (visit_fields) drives parsing,
// writing and the set of known names; everything else in the file is kept verbatim in `extra`,
// where the fixed-value fields of §1.1/§1.2 are checked. Every problem throws zaya::Error as
// "config.json: field 'X': what is wrong (expected ...)".
#include "io/zaya_config.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/assert.h"
#include "io/config_fields.h"
#include "io/config_limits.h"
#include "io/file.h"
#include "io/hf_native_config.h"
#include "io/json_parse.h"

namespace zaya {

namespace {

using json = nlohmann::json;
using namespace config_fields;

enum class Need { Required, Optional };

// zaya_layers in the file: "a" for attention (stored as 0), a positive integer n for MoE.
template <class V>
struct LayerKinds {
  V& v;
};
template <class V>
LayerKinds(V&) -> LayerKinds<V>;

// THE list of config.json fields that ZayaConfig holds. Missing optional fields keep the struct's
// defaults, which are S1's defaults (docs/model.md §1.1).
template <class Config, class Visitor>
void visit_fields(Config& c, Visitor&& v) {
  v("hidden_size", c.hidden_size, Need::Required);
  v("vocab_size", c.vocab_size, Need::Required);
  v("zaya_layers", LayerKinds{c.zaya_layers}, Need::Required);
  v("num_attention_heads", c.num_attention_heads, Need::Required);
  v("num_key_value_heads", c.num_key_value_heads, Need::Required);
  v("cca_num_q_heads", c.cca_num_q_heads, Need::Required);
  v("num_query_groups_list", c.num_query_groups_list, Need::Required);
  v("ffn_hidden_size_list", c.ffn_hidden_size_list, Need::Required);
  v("zaya_mlp_expansion", c.zaya_mlp_expansion, Need::Required);
  v("moe_router_topk", c.moe_router_topk, Need::Optional);
  v("zaya_use_mod", c.zaya_use_mod, Need::Optional);
  v("zaya_use_eda", c.zaya_use_eda, Need::Optional);
  v("norm_epsilon", c.norm_epsilon, Need::Optional);
  v("rope_theta", c.rope_theta, Need::Optional);
  v("partial_rotary_factor", c.partial_rotary_factor, Need::Optional);
  v("max_position_embeddings", c.max_position_embeddings, Need::Optional);
  v("tie_word_embeddings", c.tie_word_embeddings, Need::Optional);
  v("pad_token_id", c.pad_token_id, Need::Optional);
  v("bos_token_id", c.bos_token_id, Need::Optional);
  v("eos_token_id", c.eos_token_id, Need::Optional);
  v("scale_residual_merge", c.scale_residual_merge, Need::Optional);
  v("residual_in_fp32", c.residual_in_fp32, Need::Optional);
}

// Fields in `extra` whose value S1 fixes (docs/model.md §1.1, §1.2): present → must be `want`.
struct FixedValue {
  const char* field;
  json want;
  const char* why;
};
const std::vector<FixedValue>& fixed_values() {
  static const std::vector<FixedValue> table = {
      {"attention_bias", false, "ZAYA1's attention linears have no biases"},
      {"add_bias_linear", false, "ZAYA1's expert linears have no biases"},
      {"lm_head_bias", false, "the tied LM head has no bias"},
      {"gated_linear_unit", true, "ZAYA1's experts are gated (SwiGLU)"},
      {"activation_func", "swiglu", "ZAYA1's experts use SwiGLU"},
      {"activation_func_fp8_input_store", false, "fp8 activation storage is not supported"},
      {"bias_activation_fusion", true, "S1 only runs its fused SwiGLU path"},
      {"attention_dropout", 0.0, "ZAYA1 uses no attention dropout"},
      {"sliding_window", nullptr,
       "the original schemas give sliding windows per sub-layer in swa_layers"},
      {"use_cache", true, "an inference switch; only its type is checked"},
      {"clamp_temp", false, "S1 does not clamp the key temperature"},
      {"cca_time0", 2, "S1's first CCA convolution has kernel size 2"},
      {"cca_time1", 2, "S1's second CCA convolution has kernel size 2"},
      {"hidden_act", "silu", "ZAYA1's experts are SiLU-gated"},
  };
  return table;
}

// Reads each known field from the file, checking its JSON type.
struct Reader {
  const json& j;
  const json* get(const char* name, Need need, const char* expected) {
    auto it = j.find(name);
    if (it != j.end()) return &*it;
    if (need == Need::Required) field_error(name, "missing (expected {})", expected);
    return nullptr;
  }
  void operator()(const char* name, int64_t& x, Need need) {
    if (const json* v = get(name, need, "an integer")) x = as_int(name, *v);
  }
  void operator()(const char* name, double& x, Need need) {
    if (const json* v = get(name, need, "a number")) x = as_number(name, *v);
  }
  void operator()(const char* name, bool& x, Need need) {
    if (const json* v = get(name, need, "true or false")) x = as_bool(name, *v);
  }
  void operator()(const char* name, std::vector<int64_t>& x, Need need) {
    const json* v = get(name, need, "a list of integers");
    if (!v) return;
    if (!v->is_array()) field_error(name, "got {} (expected a list of integers)", shown(*v));
    x.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!fits_int64(e))
        field_error(name, "entry {} is {} (expected a list of integers)", i, shown(e));
      x.push_back(e.get<int64_t>());
    }
  }
  void operator()(const char* name, LayerKinds<std::vector<int64_t>> x, Need need) {
    const char* expected = "a list of \"a\" (attention) and positive integers (MoE experts)";
    const json* v = get(name, need, expected);
    if (!v) return;
    if (!v->is_array()) field_error(name, "got {} (expected {})", shown(*v), expected);
    x.v.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (e.is_string() && e.get<std::string>() == "a") {
        x.v.push_back(0);
      } else if (fits_int64(e) && e.get<int64_t>() > 0) {
        x.v.push_back(e.get<int64_t>());
      } else {
        field_error(name, "entry {} is {} (expected \"a\" or a positive number of experts)", i,
                    shown(e));
      }
    }
  }
};

// Writes each known field.
struct Writer {
  json& j;
  template <class T>
  void operator()(const char* name, const T& x, Need) {
    j[name] = x;
  }
  void operator()(const char* name, LayerKinds<const std::vector<int64_t>> x, Need) {
    json list = json::array();
    for (int64_t n : x.v) list.push_back(n == 0 ? json("a") : json(n));
    j[name] = std::move(list);
  }
};

const std::set<std::string>& known_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> s = {"swa_layers", "swa_rotary_base"};  // read beside visit_fields
    const ZayaConfig c;
    visit_fields(c, [&](const char* name, const auto&, Need) { s.insert(name); });
    return s;
  }();
  return names;
}

void check_positive(const char* name, double x) {
  if (!(x > 0)) field_error(name, "is {} (expected a positive number)", x);
}

void check_token_id(const char* name, int64_t id, int64_t vocab) {
  if (id < 0 || id >= vocab)
    field_error(name, "is {} (expected a token id in [0, vocab_size={}))", id, vocab);
}

// The fixed-value, ignored-but-checked and later-Zyphra fields, all of which live in `extra`.
void validate_extra(const ZayaConfig& c) {
  const json& x = c.extra;
  if (!x.is_object()) fail("config.json: extra fields must be a JSON object (internal)");
  for (const FixedValue& f : fixed_values()) {
    auto it = x.find(f.field);
    if (it == x.end()) continue;
    // The native schema's sliding_window is its window (read into swa_layers); one left in `extra`
    // is the unused value of a file without "hybrid_sliding" layers, kept for the round trip.
    if (c.semantics == Semantics::Native && std::string_view(f.field) == "sliding_window") continue;
    const json& v = *it;
    const json& want = f.want;
    const char* type = want.is_boolean()          ? "true or false"
                       : want.is_string()         ? "a string"
                       : want.is_number_integer() ? "an integer"
                       : want.is_number()         ? "a number"
                                                  : "null";
    bool type_ok = want.is_boolean()          ? v.is_boolean()
                   : want.is_string()         ? v.is_string()
                   : want.is_number_integer() ? v.is_number_integer()
                   : want.is_number()         ? v.is_number()
                                              : v.is_null();
    if (!type_ok) field_error(f.field, "got {} (expected {}: {})", shown(v), type, f.why);
    if (std::string_view(f.field) == "use_cache") continue;  // any boolean
    if (v != want) field_error(f.field, "got {} (expected {}: {})", shown(v), want.dump(), f.why);
  }

  if (auto it = x.find("rope_scaling"); it != x.end()) {
    const json& v = *it;
    if (v.is_object())
      field_error("rope_scaling", "{} is unsupported (expected null or false: plain RoPE only)",
                  shown(v));
    if (!v.is_null() && v != json(false))
      field_error("rope_scaling", "got {} (expected null or false)", shown(v));
  }

  if (auto it = x.find("head_dim"); it != x.end()) {
    if (!fits_int64(*it) || it->get<int64_t>() != c.head_dim())
      field_error("head_dim", "got {} (expected hidden_size / num_attention_heads = {})",
                  shown(*it), c.head_dim());
  }

  if (auto it = x.find("num_experts"); it != x.end()) {
    // An integer (every MoE sub-layer has that many experts) or a list: the integers of
    // zaya_layers in order, or a per-sub-layer list of length L with 0 at attention entries.
    const json& v = *it;
    std::vector<int64_t> moe, per_layer;
    for (int64_t n : c.zaya_layers) {
      if (n > 0) moe.push_back(n);
      per_layer.push_back(n);
    }
    bool ok = false;
    if (fits_int64(v)) {
      ok = true;
      for (int64_t n : moe) ok &= n == v.get<int64_t>();
    } else if (v.is_array()) {
      std::vector<int64_t> got;
      ok = true;
      for (const json& e : v) {
        if (!fits_int64(e)) {
          ok = false;
          break;
        }
        got.push_back(e.get<int64_t>());
      }
      ok = ok && (got == moe || got == per_layer);
    } else {
      field_error("num_experts", "got {} (expected an integer or a list of integers)", shown(v));
    }
    if (!ok)
      field_error("num_experts", "got {} (expected the expert counts of zaya_layers)", shown(v));
  }
}

// Sliding windows (docs/model.md §1): one config value per sub-layer, 0 = full attention, only on
// attention sub-layers; named as the file names them.
void check_windows(const ZayaConfig& c) {
  const bool native = c.semantics == Semantics::Native;
  const char* list = native ? "sliding_window" : "swa_layers";
  const char* theta = native ? "rope_parameters.hybrid_sliding.rope_theta" : "swa_rotary_base";
  const int64_t L = c.num_layers();
  if (!c.swa_layers.empty() && int64_t(c.swa_layers.size()) != L)
    field_error(list, "has {} entries (expected one per sub-layer: {})", c.swa_layers.size(), L);
  for (int64_t i = 0; i < int64_t(c.swa_layers.size()); ++i) {
    const int64_t w = c.swa_layers[size_t(i)];
    if (w < 0 || w > config_limits::kPositions)
      field_error(list, "entry {} is {} (expected 0 for full attention or a window in [1, {}])", i,
                  w, config_limits::kPositions);
    if (w > 0 && !c.is_attention(i))
      field_error(list,
                  "entry {} is {} at an MoE sub-layer (expected 0: windows belong to attention "
                  "sub-layers)",
                  i, w);
  }
  if (!(c.swa_rope_theta >= 0) || !(c.swa_rope_theta <= 1e30))
    field_error(theta, "is {} (expected a finite positive number; absent = rope_theta)",
                c.swa_rope_theta);
  if (c.legacy_names && c.semantics != Semantics::Original)
    fail("config.json: the legacy schema holds original-layout models only (internal)");
}

}  // namespace

void validate_config(const ZayaConfig& c) {
  check_config_limits(c);  // bounds first: the checks below form products of these sizes
  const int64_t D = c.hidden_size, V = c.vocab_size, Nh = c.num_attention_heads,
                Hk = c.num_key_value_heads, L = c.num_layers();
  check_positive("hidden_size", double(D));
  check_positive("vocab_size", double(V));
  check_positive("num_attention_heads", double(Nh));
  check_positive("num_key_value_heads", double(Hk));
  if (L == 0) field_error("zaya_layers", "is empty (expected at least one sub-layer)");
  for (int64_t n : c.zaya_layers)
    if (n < 0) field_error("zaya_layers", "has entry {} (expected \"a\" or a positive integer)", n);

  // Per-layer lists all have length L.
  const std::pair<const char*, const std::vector<int64_t>*> lists[] = {
      {"cca_num_q_heads", &c.cca_num_q_heads},
      {"num_query_groups_list", &c.num_query_groups_list},
      {"ffn_hidden_size_list", &c.ffn_hidden_size_list},
      {"zaya_mlp_expansion", &c.zaya_mlp_expansion}};
  for (const auto& [name, list] : lists)
    if (int64_t(list->size()) != L)
      field_error(name, "has {} entries (expected one per sub-layer: len(zaya_layers) = {})",
                  list->size(), L);

  // Heads.
  if (D % Nh != 0)
    field_error("num_attention_heads", "{} does not divide hidden_size {} (expected D % N_h == 0)",
                Nh, D);
  if (Nh % 2 != 0)
    field_error("num_attention_heads",
                "is {} (expected an even number: CCA uses N_h/2 query heads)", Nh);
  if ((Nh / 2) % Hk != 0)
    field_error("num_key_value_heads",
                "{} does not divide the {} query heads (expected (num_attention_heads/2) % "
                "num_key_value_heads == 0)",
                Hk, Nh / 2);
  const int64_t d = D / Nh;
  if ((Hk * d) % 2 != 0)
    field_error("num_key_value_heads",
                "H_k·d = {} is odd (expected even: the values split into two halves of H_k·d/2)",
                Hk * d);

  // RoPE.
  if (!(c.partial_rotary_factor > 0))
    field_error("partial_rotary_factor", "is {} (expected a number in (0, 1])",
                c.partial_rotary_factor);
  const int64_t r = c.rotary_dim();
  if (r > d)
    field_error("partial_rotary_factor",
                "gives r = floor(d·{}) = {} rotary dims, more than the head size d = {} (expected "
                "r <= d)",
                c.partial_rotary_factor, r, d);
  if (r % 2 != 0)
    field_error("partial_rotary_factor",
                "gives r = floor(d·{}) = {} rotary dims with d = {} (expected r even)",
                c.partial_rotary_factor, r, d);
  check_positive("rope_theta", c.rope_theta);
  check_positive("norm_epsilon", c.norm_epsilon);
  check_positive("max_position_embeddings", double(c.max_position_embeddings));

  // Fixed values held in the struct.
  if (c.moe_router_topk != 1)
    field_error("moe_router_topk", "is {} (expected 1: ZAYA1 routes each token to one expert)",
                c.moe_router_topk);
  if (!c.tie_word_embeddings)
    field_error("tie_word_embeddings", "is false (expected true: the LM head is the embedding)");
  if (!c.scale_residual_merge)
    field_error("scale_residual_merge", "is false (expected true: ZAYA1 scales residual merges)");

  check_token_id("pad_token_id", c.pad_token_id, V);
  check_token_id("bos_token_id", c.bos_token_id, V);
  check_token_id("eos_token_id", c.eos_token_id, V);

  // Per sub-layer.
  int64_t first_moe = -1, router_width = -1;
  for (int64_t i = 0; i < L; ++i) {
    if (c.is_attention(i)) {
      if (c.cca_num_q_heads[i] != Nh / 2)
        field_error("cca_num_q_heads",
                    "entry {} is {} (expected num_attention_heads/2 = {} at attention sub-layers)",
                    i, c.cca_num_q_heads[i], Nh / 2);
      if (c.num_query_groups_list[i] != Hk)
        field_error("num_query_groups_list",
                    "entry {} is {} (expected num_key_value_heads = {} at attention sub-layers)", i,
                    c.num_query_groups_list[i], Hk);
      continue;
    }
    const int64_t F = c.ffn_hidden_size_list[i], R = c.zaya_mlp_expansion[i];
    if (F <= 0 || F % 2 != 0)
      field_error("ffn_hidden_size_list",
                  "entry {} is {} (expected a positive even number at MoE sub-layers: gate ‖ up)",
                  i, F);
    if (R <= 0)
      field_error("zaya_mlp_expansion",
                  "entry {} is {} (expected a positive router width at MoE sub-layers)", i, R);
    if (first_moe < 0) first_moe = i, router_width = R;
    if (c.zaya_use_eda && R != router_width)
      field_error("zaya_mlp_expansion",
                  "entry {} is {} but entry {} is {} (expected the same router width in every MoE "
                  "sub-layer when zaya_use_eda is true)",
                  i, R, first_moe, router_width);
  }
  check_windows(c);
  if (c.zaya_use_eda && first_moe >= 0 && first_moe != 1)
    field_error("zaya_layers",
                "the first MoE sub-layer is at index {} (expected index 1 when zaya_use_eda is "
                "true: S1 turns EDA off in sub-layer 1 only)",
                first_moe);

  validate_extra(c);
}

namespace {

// The intermediate Zyphra schema: zaya_layers with scalar widths (ffn_hidden_size = the expert
// hidden width I, so F = 2·I [uncertain: read as transformers' converter reads it];
// zaya_mlp_expansion = R; num_query_groups = H_k) rewritten as S1's per-sub-layer lists.
json scalar_schema_to_lists(json j) {
  const json& layers = j["zaya_layers"];
  if (!layers.is_array()) return j;  // the list reader reports it
  const int64_t I = as_int("ffn_hidden_size", j["ffn_hidden_size"]);
  const int64_t R = as_int("zaya_mlp_expansion", j["zaya_mlp_expansion"]);
  const int64_t Nh = j.contains("num_attention_heads")
                         ? as_int("num_attention_heads", j["num_attention_heads"])
                         : 0;
  const int64_t Hk =
      j.contains("num_query_groups")      ? as_int("num_query_groups", j["num_query_groups"])
      : j.contains("num_key_value_heads") ? as_int("num_key_value_heads", j["num_key_value_heads"])
                                          : 0;
  // cca_num_q_heads may be a list already, a scalar, or absent (then N_h/2).
  const json* cq = j.contains("cca_num_q_heads") ? &j["cca_num_q_heads"] : nullptr;
  const int64_t Hq = cq && !cq->is_array() ? as_int("cca_num_q_heads", *cq) : Nh / 2;
  json q = json::array(), g = json::array(), f = json::array(), r = json::array();
  for (const json& e : layers) {
    const bool attn = e == json("a");
    q.push_back(attn ? Hq : 0);
    g.push_back(attn ? Hk : 0);
    f.push_back(attn ? 0 : 2 * I);
    r.push_back(attn ? 0 : R);
  }
  if (!cq || !cq->is_array()) j["cca_num_q_heads"] = q;
  j["num_query_groups_list"] = g;
  j["ffn_hidden_size_list"] = f;
  j["zaya_mlp_expansion"] = r;
  j.erase("ffn_hidden_size");
  j.erase("num_query_groups");
  return j;
}

// The legacy schema of ZAYA1-74B-preview-legacy (docs/checkpoint-layouts.md, "The legacy 74B
// schema and names"): S1's fields under other names. (legacy name, S1 name).
const std::pair<const char*, const char*> kLegacyNames[] = {
    {"smoe_layers", "zaya_layers"},
    {"smoe_mlp_expansion", "zaya_mlp_expansion"},
    {"rotary_base", "rope_theta"},
    {"rope_pct", "partial_rotary_factor"},
};
// Where `extra` keeps the legacy file's padding of ffn_hidden_size_list (the released 74B config
// lists more entries than sub-layers; they are kept for the round trip, never read).
const char* const kFfnPadding = "ffn_hidden_size_list";

// A legacy file rewritten under S1's names; the padding of ffn_hidden_size_list past the
// sub-layers returned through `padding`; a scalar smoe_mlp_expansion spread over the MoE entries.
json legacy_schema_to_s1(json j, json& padding) {
  for (const auto& [legacy, s1] : kLegacyNames) {
    if (j.contains(s1))
      field_error(s1,
                  "is present together with the legacy schema's '{}' (mixed schemas: expected "
                  "one name)",
                  legacy);
    if (auto it = j.find(legacy); it != j.end()) {
      j[s1] = *it;
      j.erase(legacy);
    }
  }
  const json& layers = j["zaya_layers"];
  if (!layers.is_array()) field_error("smoe_layers", "got {} (expected a list)", shown(layers));
  if (auto it = j.find("zaya_mlp_expansion"); it != j.end() && !it->is_array()) {
    const int64_t R = as_int("smoe_mlp_expansion", *it);
    json list = json::array();
    for (const json& e : layers) list.push_back(e == json("a") ? 0 : R);
    *it = list;
  }
  if (auto it = j.find("ffn_hidden_size_list");
      it != j.end() && it->is_array() && it->size() > layers.size()) {
    padding = json(it->begin() + std::ptrdiff_t(layers.size()), it->end());
    it->erase(it->begin() + std::ptrdiff_t(layers.size()), it->end());
  }
  return j;
}

// An error from the S1 reader about a renamed field names the legacy one.
[[noreturn]] void rethrow_legacy(const Error& e) {
  std::string m = e.what();
  for (const auto& [legacy, s1] : kLegacyNames) {
    const std::string from = fmt::format("'{}'", s1), to = fmt::format("'{}'", legacy);
    for (size_t at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size()))
      m.replace(at, from.size(), to);
  }
  fail("{}", m);
}

// Fields only the original schemas own: dropped from `extra` when converting to native.
bool original_owned_field(const std::string& key) {
  static const std::set<std::string> s = {
      "num_hidden_layers", "kv_channels",         "cca",
      "zaya_high_prec",    "fused_add_norm",      "apply_rope_fusion",
      "normalization",     "activation_func",     "activation_func_fp8_input_store",
      "add_bias_linear",   "gated_linear_unit",   "bias_activation_fusion",
      "clamp_temp",        "rope_scaling",        "head_dim",
      "num_experts",       "mamba_cache_dtype",   "torch_dtype",
      "cca_time0",         "cca_time1",           "swa_layers",
      "swa_rotary_base",   "ffn_hidden_size_list"};
  return s.count(key) > 0;
}

ZayaConfig original_config_from_json(const json& j) {
  ZayaConfig c;
  visit_fields(c, Reader{j});
  Reader{j}("swa_layers", c.swa_layers, Need::Optional);
  if (auto it = j.find("swa_rotary_base"); it != j.end() && !it->is_null())
    c.swa_rope_theta = as_number("swa_rotary_base", *it);
  const auto& known = known_names();
  for (const auto& [key, value] : j.items())
    if (!known.count(key)) c.extra[key] = value;
  return c;
}

}  // namespace

const char* semantics_name(Semantics s) {
  return enum_word(s).data();
}

const char* schema_name(ConfigSchema s) {
  switch (s) {
    case ConfigSchema::OriginalLists:
      return "original (per-sub-layer lists, ZAYA1-base)";
    case ConfigSchema::OriginalScalar:
      return "original (scalar widths, intermediate Zyphra schema)";
    case ConfigSchema::Native:
      return "transformers-native (ZAYA1-8B, ZAYA1-74B-preview)";
    case ConfigSchema::Legacy:
      return "original (legacy smoe_layers schema, ZAYA1-74B-preview-legacy)";
  }
  return "?";
}

ZayaConfig config_from_json(const nlohmann::json& j, ConfigSchema* schema) {
  if (!j.is_object())
    fail("config.json: expected a JSON object at the top level, got {}", shown(j));
  ConfigSchema s = ConfigSchema::OriginalLists;
  ZayaConfig c;
  if (is_native_schema(j)) {
    s = ConfigSchema::Native;
    c = native_config_from_json(j);
  } else if (j.contains("smoe_layers")) {
    s = ConfigSchema::Legacy;
    json padding;
    const json s1 = legacy_schema_to_s1(j, padding);  // names the legacy fields itself
    try {
      c = original_config_from_json(s1);
      c.legacy_names = true;
      if (!padding.is_null()) c.extra[kFfnPadding] = padding;
      validate_config(c);
    } catch (const Error& e) {
      rethrow_legacy(e);
    }
  } else if (j.contains("ffn_hidden_size") && !j.contains("ffn_hidden_size_list")) {
    if (j.contains("zaya_mlp_expansion") && j["zaya_mlp_expansion"].is_array())
      field_error("zaya_mlp_expansion",
                  "is a list but ffn_hidden_size is a scalar (mixed schemas: expected both "
                  "scalars, the intermediate schema, or ffn_hidden_size_list, ZAYA1-base's)");
    s = ConfigSchema::OriginalScalar;
    c = original_config_from_json(scalar_schema_to_lists(j));
  } else {
    if (j.contains("ffn_hidden_size") && j.contains("ffn_hidden_size_list"))
      field_error("ffn_hidden_size",
                  "is present together with ffn_hidden_size_list (mixed schemas: expected one)");
    c = original_config_from_json(j);
  }
  validate_config(c);
  if (schema) *schema = s;
  return c;
}

ZayaConfig with_semantics(const ZayaConfig& c, Semantics to) {
  if (c.semantics == to) return c;
  ZayaConfig out = c;
  out.semantics = to;
  out.legacy_names = false;
  out.extra = json::object();
  const bool to_native = to == Semantics::Native;
  if (to_native) check_native_expressible(c);
  for (const auto& [key, value] : c.extra.items()) {
    if (to_native ? original_owned_field(key) : native_owned_field(key)) continue;
    out.extra[key] = value;
  }
  // The weights' dtype label, under each schema's own key.
  const char* from_key = to_native ? "torch_dtype" : "dtype";
  if (c.extra.contains(from_key))
    out.extra[to_native ? "dtype" : "torch_dtype"] = c.extra[from_key];
  if (!to_native) out.extra["num_hidden_layers"] = c.num_layers();  // S1 ignores it; keep it true
  validate_config(out);
  return out;
}

CheckpointLayout layout_of(const ZayaConfig& c) {
  if (c.semantics == Semantics::Native) return CheckpointLayout::Native;
  return c.legacy_names ? CheckpointLayout::Legacy : CheckpointLayout::Original;
}

ZayaConfig with_layout(const ZayaConfig& c, CheckpointLayout to) {
  ZayaConfig out =
      with_semantics(c, to == CheckpointLayout::Native ? Semantics::Native : Semantics::Original);
  out.legacy_names = to == CheckpointLayout::Legacy;
  if (!out.legacy_names) out.extra.erase(kFfnPadding);  // the legacy file's own padding
  validate_config(out);
  return out;
}

ZayaConfig load_config(const std::string& path, ConfigSchema* schema) {
  const std::string text = read_text_file(path, "config file");
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
  try {
    return config_from_json(j, schema);
  } catch (const Error& e) {
    fail("{} (in {})", e.what(), path);
  }
}

nlohmann::json config_to_json(const ZayaConfig& c) {
  if (c.semantics == Semantics::Native) return native_config_to_json(c);
  json j = c.extra.is_object() ? c.extra : json::object();
  const json padding = c.legacy_names && j.contains(kFfnPadding) ? j[kFfnPadding] : json();
  visit_fields(c, Writer{j});
  if (!c.swa_layers.empty()) j["swa_layers"] = c.swa_layers;
  if (c.swa_rope_theta > 0) j["swa_rotary_base"] = c.swa_rope_theta;
  if (!c.legacy_names) return j;
  for (const auto& [legacy, s1] : kLegacyNames) {
    j[legacy] = j[s1];
    j.erase(s1);
  }
  if (padding.is_array())
    for (const json& e : padding) j["ffn_hidden_size_list"].push_back(e);
  return j;
}

void save_config(const ZayaConfig& c, const std::string& path) {
  validate_config(c);
  write_file(path, config_to_json(c).dump(2) + "\n");
}

}  // namespace zaya
