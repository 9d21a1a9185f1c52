// Which block type each tensor of a ZAYA1 model gets when `zaya quantize` writes it
// (docs/quantization.md, "zaya quantize and the mixed policy"). The module sees tensors only as
// names, roles and shapes (the caller maps its parameters onto them), so it needs nothing above
// core.
//
// The mixed policy (the default):
//   - conv kernels F16: their rows are 2 taps long, too short for any block, and a width-2 kernel
//     collapses under block quantization;
//   - vectors F32: norms, biases, residual scales, EDA scales, temperatures, balancing biases
//     (1-D: a few KiB in all, read in full every token);
//   - the router matrices and the tied embedding / LM head Q8_0: the router's 17-way choice is
//     noise-sensitive, and the embedding is also the output projection of every token;
//   - the attention projections and the experts at the preset's type (Q8_0, Q6_K, Q5_K, Q4_K);
//   - the _m presets (q5_k_m, q4_k_m) give Q6_K to the more sensitive half of the expert down
//     projections and of the value projections, as llama.cpp's Q4_K_M / Q5_K_M do for ffn_down
//     and attn_v: layer i of n (counted among the sub-layers that have the tensor) is sensitive
//     when use_more_bits(i, n) — the first and last eighth of the layers and every third one in
//     between, 20 of ZAYA1-8B's 40 MoE sub-layers. llama.cpp leaves attn_output at the base type
//     for models without exactly 8 experts, and so does this policy (ZAYA1 has 16).
// --blanket drops the mix: every tensor of two or more dimensions (router, embedding and conv
// kernels included) at the preset's base type, as llama-quantize --pure does; it exists to show
// what the policy buys.
// --keep PATTERN=TYPE rules (ECMAScript regexes searched in the GGUF tensor name, like
// llama-quantize's --tensor-type) override both; the first rule that matches wins. Vectors stay
// F32 whatever a rule says: the runtime reads them as F32.
//
// Shape fallback, after every choice: a block type needs rows (ne[0]) that are a multiple of its
// block; a tensor whose rows are not falls back, as llama.cpp's tensor_type_fallback does, to
// Q4_K → Q5_0, Q5_K → Q8_0 (llama.cpp: Q5_1, which zaya has no kernels for), Q6_K → Q8_0,
// IQ4_XS → Q5_0 (llama.cpp: IQ4_NL, likewise), and when that still does not fit (rows not a
// multiple of 32), to F16. The choice records what was wanted, so the caller can say what fell
// back.
#pragma once
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/enum_words.h"

namespace zaya::quant {

enum class QuantPreset { Q8_0, Q6_K, Q5_K_M, Q4_K_M };

}  // namespace zaya::quant

template <>
struct zaya::EnumWords<zaya::quant::QuantPreset> {
  static constexpr std::pair<zaya::quant::QuantPreset, std::string_view> words[] = {
      {zaya::quant::QuantPreset::Q8_0, "q8_0"},
      {zaya::quant::QuantPreset::Q6_K, "q6_k"},
      {zaya::quant::QuantPreset::Q5_K_M, "q5_k_m"},
      {zaya::quant::QuantPreset::Q4_K_M, "q4_k_m"}};
};

namespace zaya::quant {

// What a tensor is to the policy (llama.cpp's tensor categories, for ZAYA1's tensors).
enum class TensorRole {
  Embedding,     // the tied token embedding / LM head
  AttnQ,         // CCA query projection
  AttnK,         // CCA key projection
  AttnValue,     // CCA value projections (current and previous token)
  AttnOutput,    // attention output projection
  Router,        // router matrices: down projection and the MLP's three layers
  ExpertGateUp,  // the experts' fc1 (gate and up rows), stacked
  ExpertDown,    // the experts' fc2 (down projection), stacked
  Conv,          // the CCA conv kernels (depthwise and grouped)
  Vector,        // everything 1-D
  Other,         // a matrix of no known role: the preset's base type
};

// The role of a GGUF tensor name, from its suffix: both ZAYA1 schemes' names (docs/gguf.md) —
// token_embd / output, attn_q, attn_k, cca_val_proj1/2, attn_output, ffn_gate_inp / ffn_gate /
// zaya_router_*, ffn_gate_up_exps, ffn_down_exps, ssm_conv1d / cca_conv_dw / cca_conv_grp —
// and Vector for any tensor of one dimension (`ne` its GGML shape). Other for the rest.
TensorRole role_of(std::string_view gguf_name, const std::vector<int64_t>& ne);

struct TensorDesc {
  std::string name;  // the GGUF name (what --keep patterns match)
  TensorRole role = TensorRole::Other;
  std::vector<int64_t> ne;  // GGML order: ne[0] is the row length
  int64_t layer = -1;       // the sub-layer it belongs to; -1: none (embedding, final merge)
};

// The preset's type for attention and experts: Q8_0, Q6_K, Q5_K, Q4_K.
DType preset_base_type(QuantPreset p);
// llama.cpp's general.file_type for the preset (LLAMA_FTYPE_MOSTLY_*): 7, 18, 17, 15.
uint32_t preset_file_type(QuantPreset p);

// llama.cpp's layer rule for the _m presets: the first and last eighth of n layers and every
// third layer between them.
bool use_more_bits(int64_t i, int64_t n);

// The type a tensor whose rows are `row` values long can hold, starting from `t` (see the top of
// this file); `t` itself when it fits.
DType shape_fallback(DType t, int64_t row);

// A --keep rule. The types it takes: f32 f16 bf16 q8_0 q4_0 q5_0 q4_k q5_k q6_k iq4_xs.
struct KeepRule {
  std::string pattern;
  std::regex re;
  DType type = DType::F32;
};
std::optional<DType> parse_keep_type(std::string_view word);
std::string keep_type_choices();  // "f32, f16, … or iq4_xs"
// "PATTERN=TYPE" (split at the last '='); throws zaya::Error naming `flag` and the argument for a
// missing '=', an empty pattern, a pattern that is not an ECMAScript regex, or an unknown type.
KeepRule parse_keep_rule(const std::string& arg, const std::string& flag = "--keep");

struct PolicyOptions {
  QuantPreset preset = QuantPreset::Q4_K_M;
  bool blanket = false;
  std::vector<KeepRule> keep;
};

enum class ChoiceReason { Policy, MoreBits, Blanket, Keep };

struct TensorChoice {
  DType type = DType::F32;    // what is written
  DType wanted = DType::F32;  // before the shape fallback
  ChoiceReason reason = ChoiceReason::Policy;
  int keep_rule = -1;  // Keep: the index of the rule that matched
  bool fell_back() const { return type != wanted; }
};

// One choice per tensor, in order. The whole list goes in because the _m rule counts the
// sub-layers that hold each role.
std::vector<TensorChoice> choose_types(const std::vector<TensorDesc>& tensors,
                                       const PolicyOptions& o);

}  // namespace zaya::quant
