// The sliding-window fields of the three config schemas (docs/model.md §1): the native schema's
// layer_types "hybrid_sliding", sliding_window and per-type rope_parameters; the legacy
// ZAYA1-74B-preview-legacy schema (smoe_layers, smoe_mlp_expansion, rotary_base, rope_pct,
// swa_layers, swa_rotary_base), detected as its own schema; S1's optional swa_layers. Each is read
// into ZayaConfig::swa_layers / swa_rope_theta, written back to the same JSON, converted between
// layouts without loss, and every bad value gives an error naming the field as the file names it.
#include <filesystem>
#include <fstream>
#include <string>

#include "core/assert.h"
#include "io/hf_native_layout.h"
#include "io/zaya_config.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kRepoConfigs = fs::path(ZAYA_TEST_FIXTURES) / ".." / ".." / "configs" / "models";

json read_json(const fs::path& path) {
  std::ifstream f(path);
  return json::parse(f);
}

// A few-block legacy config of the 74B's kind: blocks alternate windowed / full attention.
json legacy_config(int64_t blocks = 3, int64_t window = 5) {
  json j = {{"hidden_size", 64},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 2},
            {"vocab_size", 512},
            {"moe_router_topk", 1},
            {"norm_epsilon", 1e-5},
            {"max_position_embeddings", 4096},
            {"rotary_base", 5000000},
            {"swa_rotary_base", 10000},
            {"rope_pct", 0.5},
            {"tie_word_embeddings", true},
            {"eos_token_id", 1}};
  json layers = json::array(), q = json::array(), g = json::array(), f = json::array(),
       r = json::array(), swa = json::array();
  for (int64_t b = 0; b < blocks; ++b) {
    layers.push_back("a"), layers.push_back(4);
    q.push_back(4), q.push_back(0);
    g.push_back(2), g.push_back(0);
    f.push_back(0), f.push_back(32);
    r.push_back(0), r.push_back(16);
    swa.push_back(b % 2 == 0 ? window : 0), swa.push_back(0);
  }
  j["smoe_layers"] = layers;
  j["cca_num_q_heads"] = q;
  j["num_query_groups_list"] = g;
  j["ffn_hidden_size_list"] = f;
  j["smoe_mlp_expansion"] = r;
  j["swa_layers"] = swa;
  return j;
}

// The original schemas' writer spells out the optional fields' defaults; everything the source file
// says is written back unchanged.
void expect_written_back(const json& written, const json& source, const std::string& what) {
  for (const auto& [key, value] : source.items()) {
    ASSERT_TRUE(written.contains(key)) << what << ": " << key;
    EXPECT_EQ(written[key], value) << what << ": " << key;
  }
  ZayaConfig w = config_from_json(written), c = config_from_json(source);
  w.extra = c.extra = json::object();  // fields the source did not have (compared above)
  EXPECT_EQ(w, c) << what;
}

std::string error_of(const json& j) {
  try {
    config_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << j.dump();
  return "";
}

}  // namespace

TEST(ConfigWindows, LegacySchemaIsDetectedAndRead) {
  ConfigSchema s;
  const ZayaConfig c = config_from_json(legacy_config(), &s);
  EXPECT_EQ(s, ConfigSchema::Legacy);
  EXPECT_EQ(c.semantics, Semantics::Original);
  EXPECT_TRUE(c.legacy_names);
  EXPECT_EQ(c.num_layers(), 6);
  EXPECT_EQ(c.swa_layers, (std::vector<int64_t>{5, 0, 0, 0, 5, 0}));
  EXPECT_EQ(c.window(0), 5);
  EXPECT_EQ(c.window(2), 0);
  EXPECT_EQ(c.rope_theta_of(0), 10000);
  EXPECT_EQ(c.rope_theta_of(2), 5000000);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.zaya_mlp_expansion[1], 16);
  EXPECT_FALSE(c.extra.contains("smoe_layers"));
  EXPECT_FALSE(c.extra.contains("rotary_base"));
}

TEST(ConfigWindows, EachSchemaWritesItsFileBack) {
  // Legacy, with the released config's padding of ffn_hidden_size_list past the sub-layers.
  json legacy = legacy_config();
  for (int k = 0; k < 4; ++k) legacy["ffn_hidden_size_list"].push_back(k % 2 ? 32 : 0);
  expect_written_back(config_to_json(config_from_json(legacy)), legacy, "legacy");
  // The repository's 74B configs: the native one exactly, the legacy one with defaults added.
  const json native = read_json(kRepoConfigs / "zaya1-74b-preview.json");
  EXPECT_EQ(config_to_json(config_from_json(native)), native);
  const json legacy74 = read_json(kRepoConfigs / "zaya1-74b-preview-legacy.json");
  expect_written_back(config_to_json(config_from_json(legacy74)), legacy74, "74B legacy");
  // S1 with swa_layers / swa_rotary_base (Zyphra's ZayaConfig has both).
  ZayaConfig s1 = with_layout(config_from_json(legacy_config()), CheckpointLayout::Original);
  const json s1j = config_to_json(s1);
  EXPECT_TRUE(s1j.contains("zaya_layers"));
  EXPECT_EQ(s1j["swa_layers"], legacy_config()["swa_layers"]);
  EXPECT_EQ(s1j["swa_rotary_base"], 10000.0);
  ConfigSchema s;
  EXPECT_EQ(config_from_json(s1j, &s), s1);
  EXPECT_EQ(s, ConfigSchema::OriginalLists);
  expect_written_back(config_to_json(config_from_json(s1j)), s1j, "S1");
}

TEST(ConfigWindows, NativeFieldsAndConversionsBothWays) {
  const ZayaConfig legacy = config_from_json(legacy_config(4, 7));
  const ZayaConfig native = with_layout(legacy, CheckpointLayout::Native);
  const json nj = config_to_json(native);
  EXPECT_EQ(nj["layer_types"],
            json::array({"hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"}));
  EXPECT_EQ(nj["sliding_window"], 7);
  EXPECT_EQ(nj["rope_parameters"]["hybrid"]["rope_theta"], 5000000.0);
  EXPECT_EQ(nj["rope_parameters"]["hybrid_sliding"]["rope_theta"], 10000.0);
  EXPECT_EQ(nj["rope_parameters"]["hybrid_sliding"]["partial_rotary_factor"], 0.5);
  ConfigSchema s;
  const ZayaConfig back = config_from_json(nj, &s);
  EXPECT_EQ(s, ConfigSchema::Native);
  EXPECT_EQ(config_to_json(back), nj);
  EXPECT_EQ(back.swa_layers, legacy.swa_layers);
  EXPECT_EQ(back.swa_rope_theta, legacy.swa_rope_theta);
  // And back to the legacy file: what the source said, but for the residual stream's precision,
  // which the native schema fixes to fp32.
  json source = legacy_config(4, 7);
  source["residual_in_fp32"] = true;
  expect_written_back(config_to_json(with_layout(back, CheckpointLayout::Legacy)), source,
                      "legacy -> native -> legacy");
  // A native file without windows stays without them (ZAYA1-8B's shape), sliding_window null.
  json plain = nj;
  plain["layer_types"] = json::array({"hybrid", "hybrid", "hybrid", "hybrid"});
  plain["sliding_window"] = nullptr;
  plain["rope_parameters"].erase("hybrid_sliding");
  const ZayaConfig p = config_from_json(plain);
  EXPECT_TRUE(p.swa_layers.empty());
  EXPECT_EQ(p.swa_rope_theta, 0);
  EXPECT_EQ(config_to_json(p), plain);
}

TEST(ConfigWindows, BadNativeValuesNameTheField) {
  const json good =
      config_to_json(with_layout(config_from_json(legacy_config()), CheckpointLayout::Native));
  auto with = [&](auto edit) {
    json j = good;
    edit(j);
    return error_of(j);
  };
  std::string m = with([](json& j) { j["sliding_window"] = nullptr; });
  expect_contains(m, "field 'sliding_window'");
  expect_contains(m, "hybrid_sliding");
  expect_contains(with([](json& j) { j["sliding_window"] = 0; }), "field 'sliding_window'");
  expect_contains(with([](json& j) { j["sliding_window"] = "4096"; }), "field 'sliding_window'");
  expect_contains(with([](json& j) { j["layer_types"][1] = "sliding_attention"; }),
                  "field 'layer_types'");
  m = with([](json& j) { j["rope_parameters"]["hybrid_sliding"]["partial_rotary_factor"] = 0.25; });
  expect_contains(m, "rope_parameters.hybrid_sliding.partial_rotary_factor");
  expect_contains(m, "0.25");
  expect_contains(with([](json& j) { j["rope_parameters"]["hybrid_sliding"]["rope_theta"] = -1; }),
                  "rope_parameters.hybrid_sliding.rope_theta");
  expect_contains(
      with([](json& j) { j["rope_parameters"]["hybrid_sliding"]["rope_type"] = "yarn"; }),
      "rope_parameters.hybrid_sliding.rope_type");
  expect_contains(with([](json& j) { j["rope_parameters"]["hybrid_sliding"] = 3; }),
                  "rope_parameters.hybrid_sliding");
  expect_contains(with([](json& j) { j["swa_layers"] = json::array({1, 0}); }), "mixed schemas");
}

TEST(ConfigWindows, BadLegacyValuesNameTheLegacyField) {
  auto with = [](auto edit) {
    json j = legacy_config();
    edit(j);
    return error_of(j);
  };
  expect_contains(with([](json& j) { j["swa_layers"].push_back(0); }), "field 'swa_layers'");
  std::string m = with([](json& j) { j["swa_layers"][1] = 3; });
  expect_contains(m, "field 'swa_layers'");
  expect_contains(m, "MoE");
  expect_contains(with([](json& j) { j["swa_layers"][0] = -2; }), "field 'swa_layers'");
  expect_contains(with([](json& j) { j["swa_layers"][0] = "x"; }), "field 'swa_layers'");
  expect_contains(with([](json& j) { j["swa_rotary_base"] = -5; }), "field 'swa_rotary_base'");
  expect_contains(with([](json& j) { j["smoe_layers"][1] = "e"; }), "field 'smoe_layers'");
  expect_contains(with([](json& j) { j["smoe_layers"] = 3; }), "field 'smoe_layers'");
  expect_contains(with([](json& j) { j["smoe_mlp_expansion"][1] = 8; }),
                  "field 'smoe_mlp_expansion'");
  expect_contains(with([](json& j) { j["rope_pct"] = 2.0; }), "field 'rope_pct'");
  expect_contains(with([](json& j) { j["rotary_base"] = "big"; }), "field 'rotary_base'");
  m = with([](json& j) { j["rope_theta"] = 10000; });
  expect_contains(m, "field 'rope_theta'");
  expect_contains(m, "rotary_base");
  expect_contains(with([](json& j) { j["zaya_layers"] = j["smoe_layers"]; }), "zaya_layers");
  expect_contains(with([](json& j) { j["layer_types"] = json::array({"hybrid"}); }),
                  "mixed schemas");
  // A scalar router width is spread over the MoE sub-layers.
  json scalar = legacy_config();
  scalar["smoe_mlp_expansion"] = 16;
  EXPECT_EQ(config_from_json(scalar).zaya_mlp_expansion,
            config_from_json(legacy_config()).zaya_mlp_expansion);
}

TEST(ConfigWindows, NativeCannotExpressTwoWindows) {
  json j = legacy_config(4, 7);
  j["swa_layers"][4] = 9;
  const ZayaConfig c = config_from_json(j);
  const std::string m = [&] {
    try {
      with_layout(c, CheckpointLayout::Native);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  expect_contains(m, "swa_layers");
  expect_contains(m, "one sliding_window");
}

TEST(ConfigWindows, LegacyTensorNames) {
  EXPECT_EQ(legacy_name("model.layers.3.zaya_block.router.router_mlp.4.weight"),
            "model.layers.3.smoe_block.router.router_mlp.4.weight");
  EXPECT_EQ(legacy_name("model.layers.1.zaya_block.experts.local_experts.23.linear_fc2.weight"),
            "model.layers.1.smoe_block.experts.local_experts.23.linear_fc2.weight");
  for (const char* same : {"model.layers.0.self_attn.qkv.linear_q.weight",
                           "model.embed_tokens.weight", "model.final_norm.weight"})
    EXPECT_EQ(legacy_name(same), same);
  EXPECT_EQ(original_from_legacy("model.layers.3.smoe_block.router.balancing_biases"),
            "model.layers.3.zaya_block.router.balancing_biases");
}
