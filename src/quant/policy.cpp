// The mixed quantization policy (policy.h): roles from GGUF names, the per-role types, llama.cpp's
// use_more_bits split for the _m presets, --keep rules and the shape fallback.
#include "quant/policy.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/assert.h"

namespace zaya::quant {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The --keep type words, in the order messages list them.
constexpr std::pair<std::string_view, DType> kKeepTypes[] = {
    {"f32", DType::F32},   {"f16", DType::F16},      {"bf16", DType::BF16}, {"q8_0", DType::Q8_0},
    {"q4_0", DType::Q4_0}, {"q5_0", DType::Q5_0},    {"q4_k", DType::Q4_K}, {"q5_k", DType::Q5_K},
    {"q6_k", DType::Q6_K}, {"iq4_xs", DType::IQ4_XS}};

// The type the mixed policy gives a role (before the _m split and the shape fallback).
DType policy_type(TensorRole r, QuantPreset p) {
  switch (r) {
    case TensorRole::Vector:
      return DType::F32;
    case TensorRole::Conv:
      return DType::F16;
    case TensorRole::Embedding:
    case TensorRole::Router:
      return DType::Q8_0;
    default:
      return preset_base_type(p);
  }
}

bool is_m_preset(QuantPreset p) {
  return p == QuantPreset::Q5_K_M || p == QuantPreset::Q4_K_M;
}

}  // namespace

TensorRole role_of(std::string_view name, const std::vector<int64_t>& ne) {
  if (ne.size() <= 1) return TensorRole::Vector;
  if (name == "token_embd.weight" || name == "output.weight") return TensorRole::Embedding;
  struct Suffix {
    std::string_view suffix;
    TensorRole role;
  };
  static constexpr Suffix kSuffixes[] = {
      {".attn_q.weight", TensorRole::AttnQ},
      {".attn_k.weight", TensorRole::AttnK},
      {".cca_val_proj1.weight", TensorRole::AttnValue},
      {".cca_val_proj2.weight", TensorRole::AttnValue},
      {".attn_output.weight", TensorRole::AttnOutput},
      {".ffn_gate_inp.weight", TensorRole::Router},      // scheme B router down
      {".zaya_router_down.weight", TensorRole::Router},  // scheme A
      {".ffn_gate.weight", TensorRole::Router},          // scheme B router MLP 0
      {".zaya_router_mlp0.weight", TensorRole::Router},  // scheme A
      {".zaya_router_mlp2.weight", TensorRole::Router},
      {".zaya_router_mlp4.weight", TensorRole::Router},
      {".ffn_gate_up_exps.weight", TensorRole::ExpertGateUp},
      {".ffn_down_exps.weight", TensorRole::ExpertDown},
      {".ssm_conv1d.weight", TensorRole::Conv},   // scheme B depthwise
      {".cca_conv_dw.weight", TensorRole::Conv},  // scheme A depthwise
      {".cca_conv_grp.weight", TensorRole::Conv},
  };
  for (const Suffix& s : kSuffixes)
    if (ends_with(name, s.suffix)) return s.role;
  return TensorRole::Other;
}

DType preset_base_type(QuantPreset p) {
  switch (p) {
    case QuantPreset::Q8_0:
      return DType::Q8_0;
    case QuantPreset::Q6_K:
      return DType::Q6_K;
    case QuantPreset::Q5_K_M:
      return DType::Q5_K;
    case QuantPreset::Q4_K_M:
      return DType::Q4_K;
  }
  return DType::Q8_0;
}

uint32_t preset_file_type(QuantPreset p) {
  switch (p) {
    case QuantPreset::Q8_0:
      return 7;
    case QuantPreset::Q6_K:
      return 18;
    case QuantPreset::Q5_K_M:
      return 17;
    case QuantPreset::Q4_K_M:
      return 15;
  }
  return 7;
}

bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

DType shape_fallback(DType t, int64_t row) {
  if (row % dtype_block_elems(t) == 0) return t;
  DType next = DType::F16;
  switch (t) {
    case DType::Q4_K:
    case DType::IQ4_XS:
      next = DType::Q5_0;
      break;
    case DType::Q5_K:
    case DType::Q6_K:
      next = DType::Q8_0;
      break;
    default:  // Q8_0, Q4_0, Q5_0: nothing smaller than F16 fits
      break;
  }
  return row % dtype_block_elems(next) == 0 ? next : DType::F16;
}

std::optional<DType> parse_keep_type(std::string_view word) {
  for (const auto& [w, t] : kKeepTypes)
    if (w == word) return t;
  return std::nullopt;
}

std::string keep_type_choices() {
  std::string out;
  const size_t n = std::size(kKeepTypes);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? " or " : ", ";
    out += kKeepTypes[i].first;
  }
  return out;
}

KeepRule parse_keep_rule(const std::string& arg, const std::string& flag) {
  const size_t eq = arg.rfind('=');
  if (eq == std::string::npos)
    fail("{} '{}': want PATTERN=TYPE (a regex of GGUF tensor names and one of {})", flag, arg,
         keep_type_choices());
  KeepRule r;
  r.pattern = arg.substr(0, eq);
  const std::string word = arg.substr(eq + 1);
  if (r.pattern.empty()) fail("{} '{}': the pattern before '=' is empty", flag, arg);
  const std::optional<DType> t = parse_keep_type(word);
  if (!t) fail("{} '{}': type '{}' is not one of {}", flag, arg, word, keep_type_choices());
  r.type = *t;
  try {
    r.re = std::regex(r.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail("{} '{}': '{}' is not a valid regular expression ({})", flag, arg, r.pattern, e.what());
  }
  return r;
}

std::vector<TensorChoice> choose_types(const std::vector<TensorDesc>& tensors,
                                       const PolicyOptions& o) {
  // The _m split: the sub-layers holding each split role, in order (a role's i of n).
  std::map<TensorRole, std::vector<int64_t>> layers;
  for (const TensorDesc& t : tensors)
    if (t.role == TensorRole::ExpertDown || t.role == TensorRole::AttnValue)
      layers[t.role].push_back(t.layer);
  for (auto& [role, v] : layers) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  auto more_bits = [&](const TensorDesc& t) {
    const auto it = layers.find(t.role);
    if (it == layers.end()) return false;
    const std::vector<int64_t>& v = it->second;
    const int64_t i = std::lower_bound(v.begin(), v.end(), t.layer) - v.begin();
    return use_more_bits(i, int64_t(v.size()));
  };

  std::vector<TensorChoice> out;
  out.reserve(tensors.size());
  for (const TensorDesc& t : tensors) {
    TensorChoice c;
    if (t.role == TensorRole::Vector) {
      c.wanted = c.type = DType::F32;
      out.push_back(c);
      continue;
    }
    for (size_t k = 0; k < o.keep.size(); ++k)
      if (std::regex_search(t.name, o.keep[k].re)) {
        c.wanted = o.keep[k].type;
        c.reason = ChoiceReason::Keep;
        c.keep_rule = int(k);
        break;
      }
    if (c.reason != ChoiceReason::Keep) {
      if (o.blanket) {
        c.wanted = preset_base_type(o.preset);
        c.reason = ChoiceReason::Blanket;
      } else {
        c.wanted = policy_type(t.role, o.preset);
        if (is_m_preset(o.preset) &&
            (t.role == TensorRole::ExpertDown || t.role == TensorRole::AttnValue) && more_bits(t)) {
          c.wanted = DType::Q6_K;
          c.reason = ChoiceReason::MoreBits;
        }
      }
    }
    c.type = shape_fallback(c.wanted, t.ne.empty() ? 1 : t.ne[0]);
    out.push_back(c);
  }
  return out;
}

}  // namespace zaya::quant
