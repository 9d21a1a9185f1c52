// config.json: the two preset configs of docs/model.md §12 parse with the documented derived sizes,
// round trip exactly, missing optional fields take S1's defaults, and every validation rule of §1.3
// (and each fixed value of §1.1/§1.2) rejects a mutated config with a message naming the field.
#include "io/zaya_config.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/assert.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kTiny = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";
const std::string kBase = std::string(ZAYA_TEST_FIXTURES) + "/configs/zaya1-base.json";

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

}  // namespace

TEST(Config, ZayaBaseDerivedSizes) {
  ZayaConfig c = load_config(kBase);
  EXPECT_EQ(c.num_layers(), 80);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.vocab_size, 262272);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.q_heads(), 8);
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(c.conv_channels(), 1280);
  EXPECT_EQ(c.rotary_dim(), 64);
  for (int64_t i = 0; i < 80; ++i) {
    EXPECT_EQ(c.is_attention(i), i % 2 == 0) << i;
    if (c.is_attention(i)) continue;
    EXPECT_EQ(c.num_experts(i), 16);
    EXPECT_EQ(c.router_classes(i), 17);
    EXPECT_EQ(c.zaya_mlp_expansion[i], 256);
    EXPECT_EQ(c.ffn_hidden_size_list[i], 4096);
    EXPECT_EQ(c.has_eda_scale(i), i != 1) << i;
  }
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.norm_epsilon, 1e-5);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_TRUE(c.zaya_use_mod && c.zaya_use_eda && c.tie_word_embeddings && c.scale_residual_merge);
  EXPECT_FALSE(c.residual_in_fp32);
  // Ignored and fixed fields are kept verbatim (the stale num_hidden_layers included).
  EXPECT_EQ(c.extra.at("num_hidden_layers"), 120);
  EXPECT_EQ(c.extra.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(c.extra.at("rope_scaling"), false);
  EXPECT_FALSE(c.extra.contains("hidden_size"));
}

TEST(Config, TinyDerivedSizes) {
  ZayaConfig c = load_config(kTiny);
  EXPECT_EQ(c.num_layers(), 4);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_EQ(c.q_heads(), 4);
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(c.conv_channels(), 48);
  EXPECT_EQ(c.rotary_dim(), 4);
  EXPECT_EQ(c.zaya_layers, (std::vector<int64_t>{0, 4, 0, 4}));
  EXPECT_EQ(c.router_classes(1), 5);
  EXPECT_EQ(c.rope_theta, 10000);
}

TEST(Config, RoundTripToJsonFromJson) {
  ScratchDir dir;
  for (const std::string& path : {kTiny, kBase}) {
    SCOPED_TRACE(path);
    ZayaConfig c = load_config(path);
    json j = config_to_json(c);
    EXPECT_EQ(j, read_json(path));  // same file content (numbers compare by value)
    EXPECT_EQ(j.at("zaya_layers")[0], "a");
    ZayaConfig back = config_from_json(j);
    EXPECT_TRUE(back == c);
    save_config(c, dir / "config.json");
    EXPECT_FALSE(fs::exists(dir / "config.json.tmp"));
    EXPECT_TRUE(load_config(dir / "config.json") == c);
  }
}

TEST(Config, EqualityComparesEveryField) {
  ZayaConfig a = load_config(kTiny), b = a;
  EXPECT_TRUE(a == b);
  b.rope_theta = 10001;
  EXPECT_FALSE(a == b);
  b = a;
  b.extra["torch_dtype"] = "bfloat16";
  EXPECT_FALSE(a == b);
  b = a;
  b.zaya_layers[3] = 5;
  EXPECT_FALSE(a == b);
}

TEST(Config, MissingOptionalFieldsTakeS1Defaults) {
  json j = read_json(kTiny);
  for (const char* f :
       {"moe_router_topk", "zaya_use_mod", "zaya_use_eda", "norm_epsilon", "rope_theta",
        "partial_rotary_factor", "max_position_embeddings", "tie_word_embeddings", "pad_token_id",
        "bos_token_id", "eos_token_id", "scale_residual_merge", "residual_in_fp32", "rope_scaling",
        "sliding_window", "attention_bias", "num_hidden_layers"})
    j.erase(f);
  ZayaConfig c = config_from_json(j);
  EXPECT_EQ(c.moe_router_topk, 1);
  EXPECT_TRUE(c.zaya_use_mod);
  EXPECT_TRUE(c.zaya_use_eda);
  EXPECT_EQ(c.norm_epsilon, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_TRUE(c.scale_residual_merge);
  EXPECT_FALSE(c.residual_in_fp32);
}

TEST(Config, MissingRequiredFieldsAreNamed) {
  for (const char* f :
       {"hidden_size", "vocab_size", "zaya_layers", "num_attention_heads", "num_key_value_heads",
        "cca_num_q_heads", "num_query_groups_list", "ffn_hidden_size_list", "zaya_mlp_expansion"}) {
    SCOPED_TRACE(f);
    json j = read_json(kTiny);
    j.erase(f);
    std::string msg = error_of([&] { config_from_json(j); });
    expect_contains(msg, std::string("config.json: field '") + f + "': missing (expected ");
  }
}

TEST(Config, WrongJsonTypesAreNamed) {
  struct Case {
    const char* field;
    json value;
    const char* expected;
  };
  const Case cases[] = {
      {"hidden_size", "64", "expected an integer"},
      {"hidden_size", 64.0, "expected an integer"},
      {"vocab_size", true, "expected an integer"},
      {"norm_epsilon", "1e-5", "expected a number"},
      {"rope_theta", nullptr, "expected a number"},
      {"zaya_use_mod", 1, "expected true or false"},
      {"tie_word_embeddings", "true", "expected true or false"},
      {"cca_num_q_heads", 4, "expected a list of integers"},
      {"ffn_hidden_size_list", json::array({0, "128", 0, 128}), "entry 1"},
      {"zaya_layers", "a4a4", "expected a list of \"a\""},
      {"zaya_layers", json::array({"a", 4, "b", 4}), "entry 2 is \"b\""},
      {"zaya_layers", json::array({"a", 0, "a", 4}), "entry 1 is 0"},
      {"zaya_layers", json::array({"a", -4, "a", 4}), "entry 1 is -4"},
      {"zaya_layers", json::array({"a", 4.0, "a", 4}), "entry 1"},
      {"attention_bias", "false", "expected true or false"},
      {"activation_func", 1, "expected a string"},
      {"attention_dropout", "0", "expected a number"},
      {"use_cache", "yes", "expected true or false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " = " + c.value.dump());
    json j = read_json(kTiny);
    j[c.field] = c.value;
    std::string msg = error_of([&] { config_from_json(j); });
    expect_contains(msg, std::string("config.json: field '") + c.field + "'");
    expect_contains(msg, c.expected);
  }
  std::string msg = error_of([] { config_from_json(json::array({1, 2})); });
  expect_contains(msg, "top level");
}

TEST(Config, LoadConfigFileErrors) {
  ScratchDir dir;
  expect_contains(error_of([&] { load_config(dir / "absent.json"); }), "absent.json");
  expect_contains(error_of([&] { load_config(dir / "absent.json"); }), "cannot open");
  std::ofstream(dir / "bad.json") << "{\"hidden_size\": 64,";
  std::string msg = error_of([&] { load_config(dir / "bad.json"); });
  expect_contains(msg, dir / "bad.json");
  expect_contains(msg, "invalid JSON");
  expect_contains(msg, "parse error");
  json j = read_json(kTiny);
  j["moe_router_topk"] = 2;
  std::ofstream(dir / "topk.json") << j.dump();
  msg = error_of([&] { load_config(dir / "topk.json"); });
  expect_contains(msg, "config.json: field 'moe_router_topk'");
  expect_contains(msg, dir / "topk.json");
}

TEST(Config, SaveConfigValidatesAndReportsIoErrors) {
  ScratchDir dir;
  ZayaConfig c = load_config(kTiny);
  expect_contains(error_of([&] { save_config(c, dir / "no/such/dir/config.json"); }),
                  "cannot create");
  c.moe_router_topk = 2;
  expect_contains(error_of([&] { save_config(c, dir / "config.json"); }), "moe_router_topk");
  EXPECT_FALSE(fs::exists(dir / "config.json"));
}

// Valid variants from docs/model.md §12.2 and optional later-Zyphra fields with their fixed values.
TEST(Config, AcceptsValidVariants) {
  auto parse_with = [](const std::function<void(json&)>& mutate) {
    json j = read_json(kTiny);
    mutate(j);
    return config_from_json(j);
  };
  // hidden 96, 12 heads, 3 kv heads (d = 8, G = 2).
  ZayaConfig c = parse_with([](json& j) {
    j["hidden_size"] = 96;
    j["num_attention_heads"] = 12;
    j["num_key_value_heads"] = 3;
    j["cca_num_q_heads"] = {6, 0, 6, 0};
    j["num_query_groups_list"] = {3, 0, 3, 0};
  });
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_EQ(c.conv_channels(), (6 + 3) * 8);
  // Odd number of sub-layers ending in attention; different expert counts and widths.
  c = parse_with([](json& j) {
    j["zaya_layers"] = {"a", 4, "a", 2, "a"};
    j["cca_num_q_heads"] = {4, 0, 4, 0, 4};
    j["num_query_groups_list"] = {2, 0, 2, 0, 2};
    j["ffn_hidden_size_list"] = {0, 128, 0, 64, 0};
    j["zaya_mlp_expansion"] = {0, 32, 0, 32, 0};
  });
  EXPECT_EQ(c.num_layers(), 5);
  EXPECT_EQ(c.num_experts(3), 2);
  // Without EDA, router widths may differ and the first MoE may come first.
  c = parse_with([](json& j) {
    j["zaya_use_eda"] = false;
    j["zaya_layers"] = {4, "a", 4, "a"};
    j["cca_num_q_heads"] = {0, 4, 0, 4};
    j["num_query_groups_list"] = {0, 2, 0, 2};
    j["ffn_hidden_size_list"] = {128, 0, 128, 0};
    j["zaya_mlp_expansion"] = {32, 0, 16, 0};
  });
  EXPECT_FALSE(c.has_eda_scale(0));
  // Later-Zyphra fields at S1's fixed behaviour; num_hidden_layers is ignored.
  for (const json& experts : {json(4), json({4, 4}), json({0, 4, 0, 4})}) {
    c = parse_with([&](json& j) {
      j["cca_time0"] = 2;
      j["cca_time1"] = 2;
      j["clamp_temp"] = false;
      j["head_dim"] = 8;
      j["num_experts"] = experts;
      j["num_hidden_layers"] = 120;
      j["rope_scaling"] = nullptr;
      j["attention_dropout"] = 0;
    });
    EXPECT_EQ(config_from_json(config_to_json(c)), c);
  }
}

// ---- one test per validation rule: mutate the tiny config, expect the field in the message ----

struct RuleCase {
  const char* name;
  const char* field;  // must appear as "config.json: field '<field>'"
  std::function<void(json&)> mutate;
  const char* detail = "";  // optional further substring
};

// Test names show the rule, not the bytes of the parameter.
void PrintTo(const RuleCase& rc, std::ostream* os) {
  *os << rc.name;
}

class ConfigRule : public testing::TestWithParam<RuleCase> {};

TEST_P(ConfigRule, RejectsWithFieldName) {
  const RuleCase& rc = GetParam();
  json j = read_json(kTiny);
  rc.mutate(j);
  std::string msg = error_of([&] { config_from_json(j); });
  expect_contains(msg, std::string("config.json: field '") + rc.field + "'");
  expect_contains(msg, rc.detail);
}

auto set(const char* field, json value) {
  return [field, value](json& j) { j[field] = value; };
}

const RuleCase kRules[] = {
    // per-layer lists have length L; zaya_layers entries
    {"CcaNumQHeadsLength", "cca_num_q_heads", set("cca_num_q_heads", {4, 0, 4}), "3 entries"},
    {"NumQueryGroupsLength", "num_query_groups_list",
     set("num_query_groups_list", {2, 0, 2, 0, 2})},
    {"FfnHiddenSizeLength", "ffn_hidden_size_list", set("ffn_hidden_size_list", {0, 128})},
    {"MlpExpansionLength", "zaya_mlp_expansion", set("zaya_mlp_expansion", json::array())},
    {"ZayaLayersEmpty", "zaya_layers",
     [](json& j) {
       for (const char* f : {"zaya_layers", "cca_num_q_heads", "num_query_groups_list",
                             "ffn_hidden_size_list", "zaya_mlp_expansion"})
         j[f] = json::array();
     },
     "empty"},
    {"ZayaLayersBadString", "zaya_layers", set("zaya_layers", {"a", 4, "attn", 4})},
    {"ZayaLayersZero", "zaya_layers", set("zaya_layers", {"a", 4, "a", 0})},
    // positive sizes
    {"HiddenSizePositive", "hidden_size", set("hidden_size", 0)},
    {"VocabSizePositive", "vocab_size", set("vocab_size", 0)},
    {"NumAttentionHeadsPositive", "num_attention_heads", set("num_attention_heads", 0)},
    {"NumKeyValueHeadsPositive", "num_key_value_heads", set("num_key_value_heads", 0)},
    {"NormEpsilonPositive", "norm_epsilon", set("norm_epsilon", 0.0)},
    {"RopeThetaPositive", "rope_theta", set("rope_theta", -1)},
    {"MaxPositionEmbeddingsPositive", "max_position_embeddings", set("max_position_embeddings", 0)},
    // heads
    {"HiddenDivisibleByHeads", "num_attention_heads", set("hidden_size", 60), "hidden_size 60"},
    {"HeadsEven", "num_attention_heads", set("num_attention_heads", 1), "even"},
    {"QueryHeadsDivisibleByKvHeads", "num_key_value_heads", set("num_key_value_heads", 3)},
    {"ValueWidthEven", "num_key_value_heads",
     [](json& j) {
       j["hidden_size"] = 18;
       j["num_attention_heads"] = 2;
       j["num_key_value_heads"] = 1;
     },
     "odd"},
    // rotary dims
    {"RotaryDimsEven", "partial_rotary_factor", set("partial_rotary_factor", 0.375), "even"},
    {"RotaryDimsAtMostHeadDim", "partial_rotary_factor", set("partial_rotary_factor", 2.0),
     "r <= d"},
    {"RotaryFactorPositive", "partial_rotary_factor", set("partial_rotary_factor", 0.0)},
    // attention sub-layers
    {"CcaNumQHeadsAtAttention", "cca_num_q_heads", set("cca_num_q_heads", {4, 0, 2, 0}), "entry 2"},
    {"NumQueryGroupsAtAttention", "num_query_groups_list",
     set("num_query_groups_list", {1, 0, 2, 0}), "entry 0"},
    // MoE sub-layers
    {"FfnHiddenSizeEven", "ffn_hidden_size_list", set("ffn_hidden_size_list", {0, 127, 0, 128}),
     "entry 1"},
    {"FfnHiddenSizePositive", "ffn_hidden_size_list", set("ffn_hidden_size_list", {0, 128, 0, 0}),
     "entry 3"},
    {"MlpExpansionPositive", "zaya_mlp_expansion", set("zaya_mlp_expansion", {0, 32, 0, 0})},
    {"EdaSameRouterWidth", "zaya_mlp_expansion", set("zaya_mlp_expansion", {0, 32, 0, 16}),
     "zaya_use_eda"},
    {"EdaFirstMoeAtIndexOne", "zaya_layers",
     [](json& j) {
       j["zaya_layers"] = {4, "a", 4, "a"};
       j["cca_num_q_heads"] = {0, 4, 0, 4};
       j["num_query_groups_list"] = {0, 2, 0, 2};
       j["ffn_hidden_size_list"] = {128, 0, 128, 0};
       j["zaya_mlp_expansion"] = {32, 0, 32, 0};
     },
     "zaya_use_eda"},
    // special token ids in [0, V)
    {"PadTokenInRange", "pad_token_id", set("pad_token_id", 512), "[0, vocab_size=512)"},
    {"BosTokenInRange", "bos_token_id", set("bos_token_id", -1)},
    {"EosTokenInRange", "eos_token_id", set("eos_token_id", 600)},
    // fixed values of §1.1
    {"RouterTopkIsOne", "moe_router_topk", set("moe_router_topk", 2)},
    {"TiedEmbeddings", "tie_word_embeddings", set("tie_word_embeddings", false)},
    {"ScaleResidualMerge", "scale_residual_merge", set("scale_residual_merge", false)},
    {"NoAttentionBias", "attention_bias", set("attention_bias", true)},
    {"NoExpertBias", "add_bias_linear", set("add_bias_linear", true)},
    {"NoLmHeadBias", "lm_head_bias", set("lm_head_bias", true)},
    {"GatedLinearUnit", "gated_linear_unit", set("gated_linear_unit", false)},
    {"SwigluActivation", "activation_func", set("activation_func", "gelu"), "\"swiglu\""},
    {"NoFp8InputStore", "activation_func_fp8_input_store",
     set("activation_func_fp8_input_store", true)},
    {"BiasActivationFusion", "bias_activation_fusion", set("bias_activation_fusion", false)},
    {"NoAttentionDropout", "attention_dropout", set("attention_dropout", 0.1)},
    {"NoSlidingWindow", "sliding_window", set("sliding_window", 4096)},
    {"RopeScalingDictUnsupported", "rope_scaling",
     set("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}), "unsupported"},
    {"RopeScalingTrue", "rope_scaling", set("rope_scaling", true)},
    // later-Zyphra fields of §1.2, when present
    {"CcaTime0IsTwo", "cca_time0", set("cca_time0", 3)},
    {"CcaTime1IsTwo", "cca_time1", set("cca_time1", 1)},
    {"ClampTempFalse", "clamp_temp", set("clamp_temp", true)},
    {"HeadDimMatches", "head_dim", set("head_dim", 16), "= 8"},
    {"NumExpertsIntMatches", "num_experts", set("num_experts", 8)},
    {"NumExpertsListMatches", "num_experts", set("num_experts", {4, 8})},
    {"NumExpertsType", "num_experts", set("num_experts", "4")},
};

INSTANTIATE_TEST_SUITE_P(Config, ConfigRule, testing::ValuesIn(kRules),
                         [](const testing::TestParamInfo<RuleCase>& info) {
                           return std::string(info.param.name);
                         });
