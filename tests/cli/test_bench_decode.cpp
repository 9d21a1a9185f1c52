// `zaya bench decode` end to end on the tiny config (f32 and bf16, one and two sequences, a saved
// model directory): the JSON report is complete and self-consistent; bad flags and inputs give one
// "zaya: error:" line (flags out of range: CLI11's usage message). Rates are not asserted (timings
// are noisy), only their relations.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;

const std::string kTiny = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";

nlohmann::json bench(const test::ScratchDir& dir, const std::string& args) {
  const CliResult r = run_zaya_in(dir.path, "bench decode " + args + " --bandwidth-mib 16 --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("bench decode: "), std::string::npos) << r.err;  // the load line
  return nlohmann::json::parse(r.out);
}

void expect_consistent(const nlohmann::json& j, int64_t batch, int64_t steps) {
  EXPECT_EQ(j.at("batch").get<int64_t>(), batch);
  EXPECT_EQ(j.at("decode_steps").get<int64_t>(), steps);
  const double bytes = j.at("weight_bytes_per_step"),
               routed = j.at("weight_bytes_per_routed_token");
  const double read = j.at("read_bandwidth"), copy = j.at("copy_bandwidth");
  const double achieved = j.at("achieved_bytes_per_s");
  for (double v : {bytes, routed, achieved, read, copy, j.at("median_step_seconds").get<double>(),
                   j.at("decode_steps_per_s").get<double>()})
    EXPECT_TRUE(std::isfinite(v) && v > 0) << j.dump();
  // One sequence reads at most one expert per MoE layer (none where it takes the skip class).
  if (batch == 1) {
    EXPECT_LE(bytes, routed) << j.dump();
  }
  EXPECT_DOUBLE_EQ(j.at("decode_tokens_per_s").get<double>(),
                   j.at("decode_steps_per_s").get<double>() * double(batch));
  // bound = read bandwidth / bytes per step; ratio = achieved / read bandwidth (copy is shown
  // only).
  const double bw = read;
  EXPECT_NEAR(j.at("bound_steps_per_s").get<double>(), bw / bytes, 1e-9 * bw / bytes);
  EXPECT_NEAR(j.at("ratio").get<double>(), achieved / bw, 1e-9 * achieved / bw);
  EXPECT_GT(j.at("ratio_of_means").get<double>(), 0.0);
}

TEST(BenchDecodeCli, RandomModelReportsConsistentFigures) {
  test::ScratchDir dir;
  for (const std::string dtype : {"bf16", "f32"}) {
    const nlohmann::json j =
        bench(dir, "--config " + kTiny + " --dtype " + dtype + " --tokens 6 --prompt-tokens 3");
    EXPECT_EQ(j.at("dtype").get<std::string>(), dtype == "bf16" ? "BF16" : "F32") << j.dump();
    expect_consistent(j, 1, 5);
  }
  // The bf16 model reads half the matrix bytes of the f32 one (vectors stay f32).
  const double b16 =
      bench(dir, "--config " + kTiny + " --tokens 3")["weight_bytes_per_routed_token"]
          .get<double>();
  const double b32 =
      bench(dir, "--config " + kTiny + " --dtype f32 --tokens 3")["weight_bytes_per_routed_token"]
          .get<double>();
  EXPECT_LT(b16, 0.6 * b32);
  EXPECT_GT(b16, 0.45 * b32);
}

TEST(BenchDecodeCli, BatchOfSequences) {
  test::ScratchDir dir;
  expect_consistent(bench(dir, "--config " + kTiny + " --batch 3 --tokens 4 --prompt-tokens 2"), 3,
                    3);
}

TEST(BenchDecodeCli, SavedModelDirectory) {
  test::ScratchDir dir;
  Model m(load_config(kTiny));
  m.init_random(3, 0.02);
  m.save_dir(dir / "model");
  const nlohmann::json j = bench(dir, "--model " + (dir / "model") + " --tokens 4");
  EXPECT_EQ(j.at("dtype").get<std::string>(), "F32");  // the trainer saves F32 matrices
  expect_consistent(j, 1, 3);
  const nlohmann::json h = bench(dir, "--model " + (dir / "model") + " --bf16 --tokens 4");
  EXPECT_EQ(h.at("dtype").get<std::string>(), "BF16");  // rounded at load
  expect_consistent(h, 1, 3);
  EXPECT_LT(h.at("weight_bytes_per_routed_token").get<double>(),
            0.6 * j.at("weight_bytes_per_routed_token").get<double>());
}

TEST(BenchDecodeCli, UserErrors) {
  test::ScratchDir dir;
  auto run = [&](const std::string& args) { return run_zaya_in(dir.path, "bench decode " + args); };
  expect_user_error(run(""), "exactly one of --model");
  expect_user_error(run("--config " + kTiny + " --model " + dir.path), "exactly one of --model");
  expect_user_error(run("--config " + kTiny + " --dtype f16"), "--dtype must be bf16 or f32");
  expect_user_error(run("--config " + kTiny + " --bf16"), "--bf16 applies to --model");
  expect_user_error(run("--config " + kTiny + " --tokens 2048"), "exceeds the model's context");
  expect_user_error(run("--model " + (dir / "missing")), "missing");
  // Flags CLI11 rejects exit with its usage message.
  for (const std::string flags : {"--tokens 1", "--batch 0", "--bandwidth-mib 8", "--frobnicate"}) {
    const CliResult r = run("--config " + kTiny + " " + flags);
    EXPECT_FALSE(r.crashed) << r.err;
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.err.find(flags.substr(0, flags.find(' '))), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace zaya
