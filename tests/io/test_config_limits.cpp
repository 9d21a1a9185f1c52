// check_config_limits: each hostile size is a clear error naming the field
// and the limit, at once (no overflow, no abort, no runaway allocation).
#include "io/config_limits.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/assert.h"
#include "io/zaya_config.h"

using namespace zaya;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json tiny() {
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  return json::parse(f);
}

std::string error_of(const json& j) {
  try {
    config_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

void expect_error(const std::function<void(json&)>& mutate, const std::string& part) {
  json j = tiny();
  mutate(j);
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nmissing: " << part;
}

}  // namespace

TEST(ConfigLimits, TinyAndBasePass) {
  EXPECT_EQ(error_of(tiny()), "(accepted)");
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/configs/zaya1-base.json");
  EXPECT_EQ(error_of(json::parse(f)), "(accepted)");
}

TEST(ConfigLimits, HostileSizesNameTheFieldAndLimit) {
  expect_error([](json& j) { j["hidden_size"] = int64_t(1e12); },
               "field 'hidden_size': is 1000000000000 (the limit is 1048576");
  expect_error([](json& j) { j["zaya_layers"][1] = int64_t(1e9); },
               "field 'zaya_layers': entry 1 is 1000000000 (the limit is 4096: experts");
  expect_error([](json& j) { j["max_position_embeddings"] = int64_t(1) << 62; },
               "field 'max_position_embeddings': is 4611686018427387904 (the limit is 2147483648");
  expect_error([](json& j) { j["vocab_size"] = int64_t(1) << 40; }, "field 'vocab_size'");
  expect_error([](json& j) { j["ffn_hidden_size_list"][1] = int64_t(1) << 40; },
               "field 'ffn_hidden_size_list': entry 1");
  expect_error([](json& j) { j["zaya_mlp_expansion"][1] = int64_t(1) << 40; },
               "field 'zaya_mlp_expansion': entry 1");
  expect_error([](json& j) { j["num_key_value_heads"] = int64_t(1) << 40; },
               "field 'num_key_value_heads'");
  // Every field within its own bound, the product over the limit.
  expect_error(
      [](json& j) {
        j["hidden_size"] = int64_t(1) << 20;
        j["vocab_size"] = int64_t(1) << 30;
      },
      "parameters, more than the 1.1e+12 this program can hold");
}

TEST(ConfigLimits, PartialRotaryFactorBothEnds) {
  expect_error([](json& j) { j["partial_rotary_factor"] = 0.001; },
               "field 'partial_rotary_factor': 0.001 gives r = floor(d·0.001) = 0 rotary dims");
  expect_error([](json& j) { j["partial_rotary_factor"] = 1e300; },
               "field 'partial_rotary_factor': is 1e+300 (expected a number in (0, 1], so that");
  expect_error([](json& j) { j["partial_rotary_factor"] = 1.5; },
               "(expected a number in (0, 1], so that");
  expect_error([](json& j) { j["rope_theta"] = 1e308 * 10; }, "field 'rope_theta'");
}

TEST(ConfigLimits, DeepNestingInConfigJsonIsAnError) {
  const fs::path p = fs::path(::testing::TempDir()) / "zaya_deep_config.json";
  std::ofstream(p) << R"({"hidden_size": 64, "extra": )" << std::string(200'000, '[') << "}";
  try {
    load_config(p.string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos)
        << e.what();
  }
  fs::remove(p);
}
