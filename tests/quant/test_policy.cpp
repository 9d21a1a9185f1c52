// The mixed quantization policy (src/quant/policy.h) on ZAYA1-8B's tensor list (80 sub-layers,
// scheme B names, GGML shapes): each preset's type per role, the _m split of the expert down and
// value projections, the shape fallbacks of small models, --keep rules and --blanket.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/assert.h"
#include "quant/policy.h"

namespace zaya::quant {
namespace {

// ZAYA1-8B (docs/gguf.md): D 2048, 8 query and 2 KV heads of 128, conv channels 1280, router
// width 256, 16 experts (+ the skip class) of width 2048, vocabulary 262,272. `D` etc. shrink it
// for the fallback tests.
struct Shapes {
  int64_t D = 2048, q = 1024, kv = 256, C = 1280, d = 128, R = 256, E = 16, I = 2048, V = 262272;
  int64_t sub_layers = 80;
};

std::vector<TensorDesc> zaya_tensors(const Shapes& s) {
  std::vector<TensorDesc> t;
  auto add = [&](std::string name, std::vector<int64_t> ne, int64_t layer) {
    const TensorRole r = role_of(name, ne);
    t.push_back({std::move(name), r, std::move(ne), layer});
  };
  add("token_embd.weight", {s.D, s.V}, -1);
  for (int64_t i = 0; i < s.sub_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {s.D}, i);
    add(b + "res_scale_hs.weight", {s.D}, i);
    add(b + "res_scale_hs.bias", {s.D}, i);
    if (i > 0) {
      add(b + "res_scale_res.weight", {s.D}, i);
      add(b + "res_scale_res.bias", {s.D}, i);
    }
    if (i % 2 == 0) {
      add(b + "attn_q.weight", {s.D, s.q}, i);
      add(b + "attn_k.weight", {s.D, s.kv}, i);
      add(b + "cca_val_proj1.weight", {s.D, s.kv / 2}, i);
      add(b + "cca_val_proj2.weight", {s.D, s.kv / 2}, i);
      add(b + "ssm_conv1d.weight", {2, s.C}, i);
      add(b + "ssm_conv1d.bias", {s.C}, i);
      add(b + "cca_conv_grp.weight", {2, s.d, s.C}, i);
      add(b + "cca_conv_grp.bias", {s.C}, i);
      add(b + "cca_k_scale.weight", {2}, i);
      add(b + "attn_output.weight", {s.q, s.D}, i);
    } else {
      add(b + "ffn_gate_inp.weight", {s.D, s.R}, i);
      add(b + "ffn_gate_inp.bias", {s.R}, i);
      if (i > 1) add(b + "zaya_router_eda.weight", {s.R}, i);
      add(b + "ffn_norm.weight", {s.R}, i);
      add(b + "ffn_gate.weight", {s.R, s.R}, i);
      add(b + "ffn_gate.bias", {s.R}, i);
      add(b + "zaya_router_mlp2.weight", {s.R, s.R}, i);
      add(b + "zaya_router_mlp2.bias", {s.R}, i);
      add(b + "zaya_router_mlp4.weight", {s.R, s.E + 1}, i);
      add(b + "zaya_router_biases.weight", {s.E + 1}, i);
      add(b + "ffn_gate_up_exps.weight", {s.D, 2 * s.I, s.E}, i);
      add(b + "ffn_down_exps.weight", {s.I, s.D, s.E}, i);
    }
  }
  add("res_scale_hs.weight", {s.D}, -1);
  add("res_scale_hs.bias", {s.D}, -1);
  add("res_scale_res.weight", {s.D}, -1);
  add("res_scale_res.bias", {s.D}, -1);
  add("output_norm.weight", {s.D}, -1);
  return t;
}

// The type chosen for each tensor name.
std::map<std::string, TensorChoice> by_name(const std::vector<TensorDesc>& t,
                                            const std::vector<TensorChoice>& c) {
  EXPECT_EQ(t.size(), c.size());
  std::map<std::string, TensorChoice> m;
  for (size_t i = 0; i < t.size() && i < c.size(); ++i) m[t[i].name] = c[i];
  return m;
}

// llama.cpp's use_more_bits for 40 layers, written out: the first and last eighth (5 each) and
// every third layer from the 8th (i − 5 ≡ 2 mod 3).
const std::set<int64_t> kSensitive40 = {0,  1,  2,  3,  4,  7,  10, 13, 16, 19,
                                        22, 25, 28, 31, 34, 35, 36, 37, 38, 39};

TEST(Policy, RolesOfBothSchemes) {
  EXPECT_EQ(role_of("token_embd.weight", {64, 100}), TensorRole::Embedding);
  EXPECT_EQ(role_of("output.weight", {64, 100}), TensorRole::Embedding);
  EXPECT_EQ(role_of("blk.0.attn_q.weight", {64, 32}), TensorRole::AttnQ);
  EXPECT_EQ(role_of("blk.0.attn_k.weight", {64, 32}), TensorRole::AttnK);
  EXPECT_EQ(role_of("blk.0.cca_val_proj2.weight", {64, 32}), TensorRole::AttnValue);
  EXPECT_EQ(role_of("blk.0.attn_output.weight", {64, 32}), TensorRole::AttnOutput);
  for (const char* n : {"blk.1.ffn_gate_inp.weight", "blk.1.zaya_router_down.weight",
                        "blk.1.ffn_gate.weight", "blk.1.zaya_router_mlp0.weight",
                        "blk.1.zaya_router_mlp2.weight", "blk.1.zaya_router_mlp4.weight"})
    EXPECT_EQ(role_of(n, {32, 32}), TensorRole::Router) << n;
  EXPECT_EQ(role_of("blk.1.ffn_gate_up_exps.weight", {64, 64, 4}), TensorRole::ExpertGateUp);
  EXPECT_EQ(role_of("blk.1.ffn_down_exps.weight", {64, 64, 4}), TensorRole::ExpertDown);
  EXPECT_EQ(role_of("blk.0.ssm_conv1d.weight", {2, 48}), TensorRole::Conv);
  EXPECT_EQ(role_of("blk.0.cca_conv_dw.weight", {2, 48}), TensorRole::Conv);
  EXPECT_EQ(role_of("blk.0.cca_conv_grp.weight", {2, 8, 48}), TensorRole::Conv);
  // One dimension is a vector whatever its name; an unknown matrix is Other.
  EXPECT_EQ(role_of("blk.1.ffn_norm.weight", {32}), TensorRole::Vector);
  EXPECT_EQ(role_of("blk.1.zaya_router_biases.weight", {17}), TensorRole::Vector);
  EXPECT_EQ(role_of("blk.0.mystery.weight", {32, 32}), TensorRole::Other);
}

TEST(Policy, UseMoreBitsIsHalfOfZaya8BMoELayers) {
  std::set<int64_t> got;
  for (int64_t i = 0; i < 40; ++i)
    if (use_more_bits(i, 40)) got.insert(i);
  EXPECT_EQ(got, kSensitive40);
}

// The types every preset gives ZAYA1-8B's roles.
TEST(Policy, PresetsOnZaya8B) {
  const std::vector<TensorDesc> t = zaya_tensors({});
  struct Case {
    QuantPreset p;
    DType base;
    bool m;
  };
  for (const Case& k :
       {Case{QuantPreset::Q8_0, DType::Q8_0, false}, Case{QuantPreset::Q6_K, DType::Q6_K, false},
        Case{QuantPreset::Q5_K_M, DType::Q5_K, true},
        Case{QuantPreset::Q4_K_M, DType::Q4_K, true}}) {
    SCOPED_TRACE(std::string(enum_word(k.p)));
    const std::vector<TensorChoice> c = choose_types(t, {k.p, false, {}});
    ASSERT_EQ(c.size(), t.size());
    int64_t down_hi = 0, value_hi = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      SCOPED_TRACE(t[i].name);
      EXPECT_FALSE(c[i].fell_back()) << "no ZAYA1-8B tensor needs a fallback";
      const int64_t moe = (t[i].layer - 1) / 2, cca = t[i].layer / 2;  // ordinals
      switch (t[i].role) {
        case TensorRole::Vector:
          EXPECT_EQ(c[i].type, DType::F32);
          break;
        case TensorRole::Conv:
          EXPECT_EQ(c[i].type, DType::F16);
          break;
        case TensorRole::Embedding:
        case TensorRole::Router:
          EXPECT_EQ(c[i].type, DType::Q8_0);
          break;
        case TensorRole::ExpertDown: {
          const bool hi = k.m && kSensitive40.count(moe);
          EXPECT_EQ(c[i].type, hi ? DType::Q6_K : k.base);
          EXPECT_EQ(c[i].reason, hi ? ChoiceReason::MoreBits : ChoiceReason::Policy);
          down_hi += hi;
          break;
        }
        case TensorRole::AttnValue: {
          const bool hi = k.m && kSensitive40.count(cca);
          EXPECT_EQ(c[i].type, hi ? DType::Q6_K : k.base);
          value_hi += hi;
          break;
        }
        case TensorRole::AttnQ:
        case TensorRole::AttnK:
        case TensorRole::AttnOutput:
        case TensorRole::ExpertGateUp:
          EXPECT_EQ(c[i].type, k.base);
          break;
        case TensorRole::Other:
          ADD_FAILURE() << "every ZAYA1-8B tensor has a role";
      }
    }
    // The _m split keeps exactly half of the 40 down projections (and of the 40 layers' value
    // pairs) one step up.
    EXPECT_EQ(down_hi, k.m ? 20 : 0);
    EXPECT_EQ(value_hi, k.m ? 40 : 0);
  }
}

// Tensors of a small model whose rows are not multiples of 256 (or of 32) fall back.
TEST(Policy, FallbacksOnSmallShapes) {
  Shapes s;
  s.D = 64;
  s.q = 32;
  s.kv = 16;
  s.C = 48;
  s.d = 8;
  s.R = 32;
  s.E = 4;
  s.I = 48;
  s.V = 512;
  s.sub_layers = 4;
  const std::vector<TensorDesc> t = zaya_tensors(s);
  const auto q4 = by_name(t, choose_types(t, {QuantPreset::Q4_K_M, false, {}}));
  EXPECT_EQ(q4.at("blk.0.attn_q.weight").wanted, DType::Q4_K);
  EXPECT_EQ(q4.at("blk.0.attn_q.weight").type, DType::Q5_0);  // rows of 64
  EXPECT_TRUE(q4.at("blk.0.attn_q.weight").fell_back());
  EXPECT_EQ(q4.at("blk.1.ffn_gate_up_exps.weight").type, DType::Q5_0);
  // The down projections' rows are 48 long: neither 256 nor 32 divides them. Of 2 MoE layers,
  // use_more_bits picks the last.
  EXPECT_EQ(q4.at("blk.1.ffn_down_exps.weight").wanted, DType::Q4_K);
  EXPECT_EQ(q4.at("blk.1.ffn_down_exps.weight").type, DType::F16);
  EXPECT_EQ(q4.at("blk.3.ffn_down_exps.weight").wanted, DType::Q6_K);
  EXPECT_EQ(q4.at("blk.3.ffn_down_exps.weight").type, DType::F16);
  // Q8_0 choices fit rows of 32 and 64; the router's last layer (rows of 32) too.
  EXPECT_EQ(q4.at("token_embd.weight").type, DType::Q8_0);
  EXPECT_FALSE(q4.at("blk.1.zaya_router_mlp4.weight").fell_back());
  EXPECT_EQ(q4.at("blk.0.ssm_conv1d.weight").type, DType::F16);
  EXPECT_FALSE(q4.at("blk.0.ssm_conv1d.weight").fell_back());  // F16 is the policy's choice

  const auto q5 = by_name(t, choose_types(t, {QuantPreset::Q5_K_M, false, {}}));
  EXPECT_EQ(q5.at("blk.0.attn_k.weight").wanted, DType::Q5_K);
  EXPECT_EQ(q5.at("blk.0.attn_k.weight").type, DType::Q8_0);
  const auto q6 = by_name(t, choose_types(t, {QuantPreset::Q6_K, false, {}}));
  EXPECT_EQ(q6.at("blk.0.attn_output.weight").type, DType::Q8_0);  // rows of 32

  EXPECT_EQ(shape_fallback(DType::IQ4_XS, 64), DType::Q5_0);
  EXPECT_EQ(shape_fallback(DType::Q8_0, 48), DType::F16);
  EXPECT_EQ(shape_fallback(DType::Q4_0, 2), DType::F16);
  EXPECT_EQ(shape_fallback(DType::BF16, 3), DType::BF16);
  EXPECT_EQ(shape_fallback(DType::Q4_K, 512), DType::Q4_K);
}

TEST(Policy, KeepRulesOverrideInOrder) {
  const std::vector<TensorDesc> t = zaya_tensors({});
  PolicyOptions o{QuantPreset::Q4_K_M, false, {}};
  o.keep.push_back(parse_keep_rule("ffn_gate_up_exps=q5_k"));
  o.keep.push_back(parse_keep_rule("blk\\.1\\..*exps=q8_0"));  // later: loses to the first
  o.keep.push_back(parse_keep_rule("^token_embd\\.weight$=q6_k"));
  o.keep.push_back(parse_keep_rule("attn_norm=bf16"));            // a vector: ignored
  o.keep.push_back(parse_keep_rule("ssm_conv1d\\.weight=q8_0"));  // rows of 2: falls back
  const auto m = by_name(t, choose_types(t, o));
  EXPECT_EQ(m.at("blk.1.ffn_gate_up_exps.weight").type, DType::Q5_K);
  EXPECT_EQ(m.at("blk.1.ffn_gate_up_exps.weight").reason, ChoiceReason::Keep);
  EXPECT_EQ(m.at("blk.1.ffn_gate_up_exps.weight").keep_rule, 0);
  EXPECT_EQ(m.at("blk.1.ffn_down_exps.weight").type, DType::Q8_0);
  EXPECT_EQ(m.at("blk.1.ffn_down_exps.weight").keep_rule, 1);
  EXPECT_EQ(m.at("blk.3.ffn_down_exps.weight").type, DType::Q6_K);  // policy (_m, layer 1 of 40)
  EXPECT_EQ(m.at("blk.5.ffn_down_exps.weight").type, DType::Q6_K);
  EXPECT_EQ(m.at("token_embd.weight").type, DType::Q6_K);
  EXPECT_EQ(m.at("blk.0.attn_norm.weight").type, DType::F32);
  EXPECT_EQ(m.at("blk.0.ssm_conv1d.weight").wanted, DType::Q8_0);
  EXPECT_EQ(m.at("blk.0.ssm_conv1d.weight").type, DType::F16);
  EXPECT_EQ(m.at("blk.0.attn_q.weight").type, DType::Q4_K);  // no rule: the policy
}

TEST(Policy, KeepRuleErrors) {
  auto message = [](const std::string& arg) {
    try {
      parse_keep_rule(arg);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("ffn_down").find("want PATTERN=TYPE"), std::string::npos);
  EXPECT_NE(message("=q8_0").find("empty"), std::string::npos);
  const std::string bad_type = message("ffn_down=q3_k");
  EXPECT_NE(bad_type.find("'q3_k'"), std::string::npos) << bad_type;
  EXPECT_NE(bad_type.find("iq4_xs"), std::string::npos) << bad_type;
  const std::string bad_re = message("ffn_(down=q8_0");
  EXPECT_NE(bad_re.find("--keep 'ffn_(down=q8_0'"), std::string::npos) << bad_re;
  EXPECT_NE(bad_re.find("not a valid regular expression"), std::string::npos) << bad_re;
  // A pattern may hold '=': the type is after the last one.
  const KeepRule r = parse_keep_rule("a=b=f16");
  EXPECT_EQ(r.pattern, "a=b");
  EXPECT_EQ(r.type, DType::F16);
  for (const char* w :
       {"f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k", "iq4_xs"})
    EXPECT_TRUE(parse_keep_type(w).has_value()) << w;
  EXPECT_FALSE(parse_keep_type("Q8_0").has_value());  // the words are lower case
}

// --blanket: every matrix at the base type, no _m split; conv kernels only F16 because their rows
// of 2 hold no block; vectors F32.
TEST(Policy, BlanketQuantizesRouterAndEmbedding) {
  const std::vector<TensorDesc> t = zaya_tensors({});
  for (QuantPreset p : {QuantPreset::Q8_0, QuantPreset::Q4_K_M}) {
    const DType base = preset_base_type(p);
    const std::vector<TensorChoice> c = choose_types(t, {p, true, {}});
    for (size_t i = 0; i < t.size(); ++i) {
      SCOPED_TRACE(t[i].name);
      if (t[i].role == TensorRole::Vector) {
        EXPECT_EQ(c[i].type, DType::F32);
      } else if (t[i].role == TensorRole::Conv) {
        EXPECT_EQ(c[i].wanted, base);
        EXPECT_EQ(c[i].type, DType::F16);
      } else {
        EXPECT_EQ(c[i].type, base);
        EXPECT_EQ(c[i].reason, ChoiceReason::Blanket);
      }
    }
  }
  // A --keep rule still wins over --blanket.
  PolicyOptions o{QuantPreset::Q4_K_M, true, {parse_keep_rule("token_embd=q8_0")}};
  const auto m = by_name(t, choose_types(t, o));
  EXPECT_EQ(m.at("token_embd.weight").type, DType::Q8_0);
  EXPECT_EQ(m.at("blk.1.ffn_gate_inp.weight").type, DType::Q4_K);
}

TEST(Policy, PresetWordsAndFileTypes) {
  EXPECT_EQ(parse_enum<QuantPreset>("q5_k_m"), QuantPreset::Q5_K_M);
  EXPECT_FALSE(parse_enum<QuantPreset>("q4_k").has_value());
  EXPECT_EQ(enum_choices<QuantPreset>(), "q8_0, q6_k, q5_k_m or q4_k_m");
  EXPECT_EQ(preset_file_type(QuantPreset::Q8_0), 7u);
  EXPECT_EQ(preset_file_type(QuantPreset::Q4_K_M), 15u);
  EXPECT_EQ(preset_file_type(QuantPreset::Q5_K_M), 17u);
  EXPECT_EQ(preset_file_type(QuantPreset::Q6_K), 18u);
}

}  // namespace
}  // namespace zaya::quant
