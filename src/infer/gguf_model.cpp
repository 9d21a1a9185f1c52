// ZAYA1 GGUF files as zaya's model (infer/gguf_model.h; docs/gguf.md). One function, map_spec,
// says where every zaya parameter lives in either scheme; the reader, gguf_name (what zaya writes)
// and the completeness check all go through it.
#include "infer/gguf_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/assert.h"
#include "io/json_parse.h"
#include "model/param_names.h"
#include "quant/policy.h"

namespace zaya {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxExperts = int64_t(1) << 16;  // over all MoE sub-layers

struct Mapped {
  std::string name;
  std::vector<int64_t> ne;
  int64_t expert = -1;
};

// Where zaya parameter `spec` lives in a scheme-`s` file (docs/gguf.md, "The ZAYA1 schemes"):
// its tensor name, the tensor's GGML shape and, for an expert, its slice of the stacked tensor.
Mapped map_spec(const ZayaConfig& c, const ParamSpec& spec, GgufScheme s) {
  const bool A = s == GgufScheme::A;
  // Scheme A names a bias after its weight with "_b"; scheme B uses the weight's own base name.
  auto bias = [&](const std::string& base) { return base + (A ? "_b.bias" : ".bias"); };
  Mapped m;
  m.ne.assign(spec.shape.rbegin(), spec.shape.rend());  // ggml order: the torch shape reversed
  auto res = [&](const names::ResNames& n, const std::string& blk) {
    if (spec.name == n.ao) return blk + "res_scale_hs.weight";
    if (spec.name == n.bo) return bias(blk + "res_scale_hs");
    if (spec.name == n.ar) return blk + "res_scale_res.weight";
    if (spec.name == n.br) return bias(blk + "res_scale_res");
    return std::string();
  };
  if (spec.layer < 0) {
    if (spec.name == names::kEmbed) {
      m.name = "token_embd.weight";
    } else if (spec.name == names::kFinalNorm) {
      m.name = "output_norm.weight";
    } else {
      m.name = res(names::res(names::kFinalRes), "");
    }
    ZAYA_ASSERT(!m.name.empty(), "no GGUF name for parameter {}", spec.name);
    return m;
  }
  const int64_t i = spec.layer;
  const names::LayerNames n = names::layer(i);
  const std::string blk = "blk." + std::to_string(i) + ".";
  const std::string& x = spec.name;
  const std::string dw = blk + (A ? "cca_conv_dw" : "ssm_conv1d");
  const std::string down = blk + (A ? "zaya_router_down" : "ffn_gate_inp");
  const std::string mlp0 = blk + (A ? "zaya_router_mlp0" : "ffn_gate");
  if (x == n.input_norm) {
    m.name = blk + "attn_norm.weight";
  } else if (std::string r = res(names::res(n.res_prefix), blk); !r.empty()) {
    m.name = r;
  } else if (x == n.q) {
    m.name = blk + "attn_q.weight";
  } else if (x == n.k) {
    m.name = blk + "attn_k.weight";
  } else if (x == n.v1) {
    m.name = blk + "cca_val_proj1.weight";
  } else if (x == n.v2) {
    m.name = blk + "cca_val_proj2.weight";
  } else if (x == n.o) {
    m.name = blk + "attn_output.weight";
  } else if (x == n.conv0_w) {
    // [C, 1, 2] is stored squeezed: ne {2, C}, the same bytes (tap fastest).
    m.name = dw + ".weight";
    m.ne = {spec.shape[2], spec.shape[0]};
  } else if (x == n.conv0_b) {
    m.name = bias(dw);
  } else if (x == n.conv1_w) {
    m.name = blk + "cca_conv_grp.weight";  // [C, d, 2] as-is: ne {2, d, C}
  } else if (x == n.conv1_b) {
    m.name = blk + "cca_conv_grp.bias";  // the same in both schemes
  } else if (x == n.temp) {
    m.name = blk + "cca_k_scale.weight";
  } else if (x == n.down_w) {
    m.name = down + ".weight";
  } else if (x == n.down_b) {
    m.name = bias(down);
  } else if (x == n.eda_scale) {
    m.name = blk + "zaya_router_eda.weight";
  } else if (x == n.eda_norm) {
    m.name = blk + (A ? "zaya_router_norm.weight" : "ffn_norm.weight");
  } else if (x == n.m1_w) {
    m.name = mlp0 + ".weight";
  } else if (x == n.m1_b) {
    m.name = bias(mlp0);
  } else if (x == n.m2_w) {
    m.name = blk + "zaya_router_mlp2.weight";
  } else if (x == n.m2_b) {
    m.name = bias(blk + "zaya_router_mlp2");
  } else if (x == n.m3_w) {
    m.name = blk + "zaya_router_mlp4.weight";
  } else if (x == n.biases) {
    m.name = blk + "zaya_router_biases.weight";
  } else if (x.compare(0, n.expert_prefix.size(), n.expert_prefix) == 0) {
    // local_experts.{e}.linear_fc{1,2}.weight: slice e of the stacked tensor, ne {in, out, E}.
    const std::string rest = x.substr(n.expert_prefix.size());
    const size_t dot = rest.find('.');
    ZAYA_ASSERT(dot != std::string::npos, "expert parameter {}", x);
    m.expert = std::stoll(rest.substr(0, dot));
    const std::string which = rest.substr(dot + 1);
    m.name =
        blk + (which == "linear_fc1.weight" ? "ffn_gate_up_exps.weight" : "ffn_down_exps.weight");
    ZAYA_ASSERT(which == "linear_fc1.weight" || which == "linear_fc2.weight", "expert {}", x);
    m.ne.push_back(c.num_experts(i));
  }
  ZAYA_ASSERT(!m.name.empty(), "no GGUF name for parameter {}", spec.name);
  return m;
}

const GgufTensor* find_any(const GgufFile& f, std::initializer_list<std::string> names) {
  for (const std::string& n : names)
    if (const GgufTensor* t = f.tensor(n)) return t;
  return nullptr;
}

// Refuses the 40-block layout (one block per attention + MoE pair, tap-major grouped conv), which
// no name-for-name mapping can read: it names what it found.
void refuse_forty_block_layout(const GgufFile& f) {
  std::string found;
  for (const GgufTensor& t : f.tensors()) {
    const std::string& n = t.name;
    auto ends = [&](std::string_view s) {
      return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    if (ends(".cca_conv_grp.weight") && !t.ne.empty() && t.ne[0] != 2) {
      found = fmt::format("tensor '{}' is tap-major ({}; the 80-block layouts store {{2, d, C}})",
                          n, gguf_shape_str(t.ne));
      break;
    }
    if (ends(".post_attention_norm.weight") || ends(".res_scale_hs_mlp.weight") ||
        ends(".res_scale_res_mlp.weight") || n.rfind("input_hidden_states_scale", 0) == 0) {
      found = fmt::format("tensor '{}' belongs to it", n);
      break;
    }
  }
  // One block holding both an attention and an MoE mixer.
  if (found.empty())
    for (const GgufTensor& t : f.tensors()) {
      const size_t end = t.name.find(".attn_q.weight");
      if (t.name.rfind("blk.", 0) != 0 || end == std::string::npos) continue;
      const std::string blk = t.name.substr(0, end + 1);
      if (const GgufTensor* e =
              find_any(f, {blk + "ffn_gate_up_exps.weight", blk + "ffn_gate_inp.weight",
                           blk + "zaya_router_down.weight"})) {
        found = fmt::format("block {} holds both '{}' and '{}'", t.name.substr(4, end - 4), t.name,
                            e->name);
        break;
      }
    }
  if (found.empty()) return;
  std::string blocks;
  if (const GgufValue* b = f.find("zaya.block_count"); b && b->type == GgufType::U32)
    blocks = fmt::format(" (zaya.block_count {})", b->u);
  fail(
      "{}: a 40-block ZAYA1 GGUF{}: {}. That layout (one block per attention + MoE pair, "
      "tap-major grouped convolution) is not the 80-sub-layer one zaya reads (docs/gguf.md)",
      f.path(), blocks, found);
}

// Scheme A or B from the names only one of them uses; a file with neither or both is refused.
GgufScheme detect_scheme(const GgufFile& f) {
  static const char* const kOnlyA[] = {".cca_conv_dw.weight", ".zaya_router_down.weight",
                                       ".zaya_router_norm.weight", ".zaya_router_mlp0.weight"};
  static const char* const kOnlyB[] = {".ssm_conv1d.weight", ".ffn_gate_inp.weight",
                                       ".ffn_norm.weight", ".ffn_gate.weight"};
  const GgufTensor *a = nullptr, *b = nullptr;
  for (const GgufTensor& t : f.tensors()) {
    for (std::string_view s : kOnlyA)
      if (!a && t.name.size() > s.size() &&
          t.name.compare(t.name.size() - s.size(), s.size(), s) == 0)
        a = &t;
    for (std::string_view s : kOnlyB)
      if (!b && t.name.size() > s.size() &&
          t.name.compare(t.name.size() - s.size(), s.size(), s) == 0)
        b = &t;
  }
  if (a && b)
    fail("{}: mixes the two ZAYA1 namings: '{}' is scheme A's, '{}' scheme B's (docs/gguf.md)",
         f.path(), a->name, b->name);
  if (!a && !b)
    fail(
        "{}: no ZAYA1 CCA or router tensors of either naming (looked for "
        "blk.N.cca_conv_dw.weight / blk.N.zaya_router_down.weight of scheme A and "
        "blk.N.ssm_conv1d.weight / blk.N.ffn_gate_inp.weight of scheme B; {} tensors in the "
        "file; truncated?)",
        f.path(), f.tensors().size());
  return a ? GgufScheme::A : GgufScheme::B;
}

// A shape element of tensor `name`, which must exist with `dims` dimensions.
int64_t dim_of(const GgufFile& f, const std::string& name, size_t dims, size_t k) {
  const GgufTensor* t = f.tensor(name);
  if (!t) fail("{}: tensor '{}' is missing (the config is read from its shape)", f.path(), name);
  if (t->ne.size() != dims)
    fail("{}: tensor '{}' has shape {} ({} dimensions expected)", f.path(), name,
         gguf_shape_str(t->ne), dims);
  return t->ne[k];
}

// A float key as the decimal its f32 value prints as (1e-5f is 1e-05, not 9.99999974737875e-06).
double float_key(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v && v->type == GgufType::F32)
    return std::strtod(fmt::format("{}", float(v->f)).c_str(), nullptr);  // never throws
  return f.get_float(key);
}

// Fails unless the key, when present, says `want` (what the tensors' shapes say).
void agree(const GgufFile& f, const std::string& key, int64_t want, const std::string& from) {
  if (!f.find(key)) return;
  const int64_t got = f.get_int(key);
  if (got != want) fail("{}: key '{}' is {} but {} says {}", f.path(), key, got, from, want);
}

// The config of a file without zaya.config_json: transformers' native config.json built from the
// zaya.* keys and the tensors' shapes, then read by config_from_json (which validates it). The
// community files hold ZAYA1-8B, whose reference is transformers' own ZAYA: Semantics::Native
// (docs/gguf.md, "Semantics").
ZayaConfig config_from_keys(const GgufFile& f, GgufScheme s) {
  const bool A = s == GgufScheme::A;
  const std::string& p = f.path();
  const int64_t blocks = f.get_int("zaya.block_count");
  if (blocks <= 0 || blocks % 2 != 0)
    fail(
        "{}: key 'zaya.block_count' is {} (expected an even number of sub-layer blocks: CCA, "
        "MoE, ...)",
        p, blocks);
  if (blocks > int64_t(f.tensors().size()))
    fail("{}: key 'zaya.block_count' is {} but the file has only {} tensors (truncated?)", p,
         blocks, f.tensors().size());
  const int64_t D = f.get_int("zaya.embedding_length");
  const int64_t V = dim_of(f, "token_embd.weight", 2, 1);
  agree(f, "zaya.embedding_length", dim_of(f, "token_embd.weight", 2, 0), "token_embd.weight");
  const std::string down = A ? "blk.1.zaya_router_down.weight" : "blk.1.ffn_gate_inp.weight";
  const int64_t R = dim_of(f, down, 2, 1);
  agree(f, "zaya.expert_feed_forward_length", R, down);
  const int64_t E = dim_of(f, "blk.1.ffn_gate_up_exps.weight", 3, 2);
  agree(f, "zaya.expert_count", E, "blk.1.ffn_gate_up_exps.weight");
  const int64_t I = dim_of(f, "blk.1.ffn_down_exps.weight", 3, 0);
  agree(f, "zaya.feed_forward_length", I, "blk.1.ffn_down_exps.weight");
  const int64_t K = dim_of(f, "blk.1.zaya_router_mlp4.weight", 2, 1);
  if (K != E + 1)
    fail(
        "{}: tensor 'blk.1.zaya_router_mlp4.weight' has {} router classes for {} experts "
        "(expected experts + 1: the skip class)",
        p, K, E);
  const int64_t Hq = f.get_int("zaya.attention.head_count");
  const int64_t Hk = f.get_int("zaya.attention.head_count_kv");
  const int64_t d = f.find("zaya.attention.key_length") ? f.get_int("zaya.attention.key_length")
                                                        : (Hq > 0 && D > 0 ? D / Hq / 2 : 0);
  agree(f, "zaya.attention.value_length", d, "zaya.attention.key_length");
  const int64_t rot =
      f.find("zaya.rope.dimension_count") ? f.get_int("zaya.rope.dimension_count") : d;
  const char* eps_key = f.find("zaya.attention.layer_norm_rms_epsilon")
                            ? "zaya.attention.layer_norm_rms_epsilon"
                            : "zaya.attention.layer_norm_epsilon";
  if (!f.find(eps_key))
    fail(
        "{}: metadata key 'zaya.attention.layer_norm_rms_epsilon' is missing (and so is "
        "'zaya.attention.layer_norm_epsilon')",
        p);
  json j = {{"architectures", {"ZayaForCausalLM"}},
            {"model_type", "zaya"},
            {"hidden_size", D},
            {"vocab_size", V},
            {"num_hidden_layers", blocks / 2},
            {"layer_types", json(std::vector<std::string>(size_t(blocks / 2), "hybrid"))},
            {"num_attention_heads", Hq},
            {"num_key_value_heads", Hk},
            {"head_dim", d},
            {"num_experts", E},
            {"moe_intermediate_size", I},
            {"router_hidden_size", R},
            {"num_experts_per_tok",
             f.find("zaya.expert_used_count") ? f.get_int("zaya.expert_used_count") : 1},
            {"rms_norm_eps", float_key(f, eps_key)},
            {"rope_parameters",
             {{"hybrid",
               {{"rope_theta", float_key(f, "zaya.rope.freq_base")},
                {"partial_rotary_factor", d > 0 ? double(rot) / double(d) : 1.0},
                {"rope_type", "default"}}}}},
            {"max_position_embeddings",
             f.find("zaya.context_length") ? f.get_int("zaya.context_length") : 131072},
            {"tie_word_embeddings", true}};
  for (const auto& [key, field] :
       {std::pair<const char*, const char*>{"tokenizer.ggml.bos_token_id", "bos_token_id"},
        {"tokenizer.ggml.eos_token_id", "eos_token_id"},
        {"tokenizer.ggml.padding_token_id", "pad_token_id"}})
    if (f.find(key)) j[field] = f.get_int(key);
  try {
    return config_from_json(j);
  } catch (const Error& e) {
    fail(
        "{}: the config its zaya.* keys and tensor shapes describe is not a ZAYA1 model zaya "
        "can run: {}",
        p, e.what());
  }
}

}  // namespace

GgufName gguf_name(const ZayaConfig& c, const ParamSpec& spec) {
  Mapped m = map_spec(c, spec, GgufScheme::B);
  return {std::move(m.name), std::move(m.ne), m.expert};
}

std::vector<GgufOutTensor> gguf_output_tensors(const ZayaConfig& c, const ParamLayout& layout) {
  std::vector<GgufOutTensor> out;
  std::map<std::string, size_t> index;
  for (const ParamSpec& s : layout.specs) {
    GgufName g = gguf_name(c, s);
    auto [it, fresh] = index.emplace(g.name, out.size());
    if (fresh) out.push_back({g.name, g.ne, {}, s.layer});
    GgufOutTensor& t = out[it->second];
    ZAYA_ASSERT(g.expert < 0 ? fresh : g.expert == int64_t(t.parts.size()),
                "{}: parameter {} is part {} of a stacked tensor, expected part {}", g.name, s.name,
                g.expert, t.parts.size());
    t.parts.push_back(&s);
  }
  return out;
}

std::vector<quant::TensorDesc> gguf_tensor_descs(const std::vector<GgufOutTensor>& tensors) {
  std::vector<quant::TensorDesc> descs;
  for (const GgufOutTensor& t : tensors) {
    const quant::TensorRole role = quant::role_of(t.name, t.ne);
    ZAYA_ASSERT(role != quant::TensorRole::Other, "GGUF tensor {} has no role in the policy",
                t.name);
    descs.push_back({t.name, role, t.ne, t.layer});
  }
  return descs;
}

uint64_t gguf_weight_bytes(const ZayaConfig& c, const quant::PolicyOptions& o) {
  const ParamLayout layout = make_param_layout(c);
  const std::vector<GgufOutTensor> tensors = gguf_output_tensors(c, layout);
  const std::vector<quant::TensorChoice> choice =
      quant::choose_types(gguf_tensor_descs(tensors), o);
  uint64_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t numel = 1;
    for (int64_t d : tensors[i].ne) numel *= d;
    bytes += dtype_bytes(choice[i].type, numel);
  }
  return bytes;
}

std::string gguf_scheme_name(const ZayaConfig& c, const ParamSpec& spec, GgufScheme s) {
  return map_spec(c, spec, s).name;
}

std::string GgufModel::tensor_name(const ParamSpec& spec, int64_t* expert) const {
  Mapped m = map_spec(config, spec, scheme);
  if (expert) *expert = m.expert;
  return m.name;
}

Tensor GgufModel::tensor(const ParamSpec& spec) const {
  const Mapped m = map_spec(config, spec, scheme);
  const GgufTensor* t = file->tensor(m.name);
  if (!t) fail("{}: tensor '{}' (zaya's {}) is missing", file->path(), m.name, spec.name);
  if (t->ne != m.ne)
    fail("{}: tensor '{}' has shape {} but zaya's {} needs {}", file->path(), m.name,
         gguf_shape_str(t->ne), spec.name, gguf_shape_str(m.ne));
  Tensor v;
  v.dtype = t->dtype;
  v.ndim = int(spec.shape.size());
  for (int k = 0; k < v.ndim; ++k) v.shape[size_t(k)] = spec.shape[size_t(k)];
  const size_t offset = m.expert < 0 ? 0 : dtype_bytes(t->dtype, m.expert * spec.numel());
  // The mapping is read-only; Tensor has no const view, and nothing writes through this one.
  v.data = const_cast<unsigned char*>(static_cast<const unsigned char*>(t->data) + offset);
  return v;
}

GgufModel gguf_model_from(std::shared_ptr<const GgufFile> file) {
  const GgufFile& f = *file;
  const std::string& p = f.path();
  const GgufValue* arch = f.find("general.architecture");
  if (!arch) fail("{}: metadata key 'general.architecture' is missing (not a model file?)", p);
  if (arch->type != GgufType::String)
    fail("{}: key 'general.architecture' is {}, not a string", p, gguf_type_name(arch->type));
  if (arch->s != "zaya")
    fail("{}: general.architecture is '{}', not 'zaya': not a ZAYA1 model", p, arch->s);
  refuse_forty_block_layout(f);

  GgufModel g;
  g.file = file;
  g.scheme = detect_scheme(f);
  if (const GgufValue* cj = f.find("zaya.config_json")) {
    if (cj->type != GgufType::String)
      fail("{}: key 'zaya.config_json' is {}, not a string", p, gguf_type_name(cj->type));
    try {
      g.config = config_from_json(parse_json(cj->s));
    } catch (const Error& e) {
      fail("{}: key 'zaya.config_json': {}", p, e.what());
    }
    agree(f, "zaya.block_count", g.config.num_layers(), "zaya.config_json");
  } else {
    g.config = config_from_keys(f, g.scheme);
  }

  // The layout lists every expert's tensors: bound them before building it (a hostile count
  // could otherwise cost far more memory than the file's bytes; ZAYA1-8B has 640 experts).
  int64_t experts = 0;
  for (int64_t i = 0; i < g.config.num_layers(); ++i)
    if (!g.config.is_attention(i)) experts += g.config.num_experts(i);
  if (experts > kMaxExperts)
    fail("{}: the config declares {} experts in all (zaya reads at most {})", p, experts,
         kMaxExperts);

  // Completeness and shapes: every tensor the model needs, once (experts share theirs).
  const ParamLayout layout = make_param_layout(g.config);
  std::set<std::string> seen;
  std::vector<std::pair<const ParamSpec*, Mapped>> need;
  for (const ParamSpec& spec : layout.specs) {
    Mapped m = map_spec(g.config, spec, g.scheme);
    if (seen.insert(m.name).second) need.emplace_back(&spec, std::move(m));
  }
  size_t missing = 0;
  const Mapped* first = nullptr;
  for (const auto& [spec, m] : need)
    if (!f.tensor(m.name) && missing++ == 0) first = &m;
  if (missing > 0)
    fail(
        "{}: incomplete ZAYA1 GGUF (scheme {}): tensor '{}' is missing{} ({} of the {} tensors "
        "the model needs are present; a truncated or partial conversion?)",
        p, enum_word(g.scheme), first->name,
        missing > 1 ? fmt::format(", and {} more", missing - 1) : std::string(),
        need.size() - missing, need.size());
  for (const auto& [spec, m] : need) {
    const GgufTensor* t = f.tensor(m.name);
    if (t->ne != m.ne)
      fail("{}: tensor '{}' has shape {} but the model needs {} (zaya's {})", p, m.name,
           gguf_shape_str(t->ne), gguf_shape_str(m.ne), spec->name);
  }
  return g;
}

GgufModel open_gguf_model(const std::string& path) {
  return gguf_model_from(std::make_shared<const GgufFile>(GgufFile::open(path)));
}

void set_model_keys(GgufWriter& w, const ZayaConfig& c) {
  // The per-MoE-sub-layer sizes of the first MoE sub-layer (ZAYA1's are all equal; the exact
  // config is zaya.config_json).
  int64_t moe = -1;
  for (int64_t i = 0; i < c.num_layers() && moe < 0; ++i)
    if (!c.is_attention(i)) moe = i;
  auto u32 = [](int64_t v) { return GgufValue::u32(uint32_t(v)); };
  w.set("general.architecture", GgufValue::str("zaya"));
  w.set("zaya.block_count", u32(c.num_layers()));
  w.set("zaya.context_length", u32(c.max_position_embeddings));
  w.set("zaya.embedding_length", u32(c.hidden_size));
  w.set("zaya.attention.head_count", u32(c.q_heads()));
  w.set("zaya.attention.head_count_kv", u32(c.kv_heads()));
  w.set("zaya.attention.key_length", u32(c.head_dim()));
  w.set("zaya.attention.value_length", u32(c.head_dim()));
  w.set("zaya.rope.dimension_count", u32(c.rotary_dim()));
  w.set("zaya.rope.freq_base", GgufValue::f32(float(c.rope_theta)));
  w.set("zaya.attention.layer_norm_rms_epsilon", GgufValue::f32(float(c.norm_epsilon)));
  if (moe >= 0) {
    w.set("zaya.feed_forward_length", u32(c.ffn_hidden_size_list[size_t(moe)] / 2));
    w.set("zaya.expert_count", u32(c.num_experts(moe)));
    w.set("zaya.expert_used_count", u32(c.moe_router_topk));
    w.set("zaya.expert_feed_forward_length", u32(c.zaya_mlp_expansion[size_t(moe)]));
  }
  w.set("zaya.ssm.conv_kernel", u32(2));
  w.set("zaya.vocab_size", u32(c.vocab_size));
  w.set("zaya.config_json", GgufValue::str(config_to_json(c).dump(2)));
}

}  // namespace zaya
