// `zaya bench step` end to end on the tiny config: the JSON report is complete and
// self-consistent (MFU = model FLOP/s / sgemm FLOP/s, FLOPs per token = the trainer's count, the
// split covers the step), the profiler saw the ops a step runs (Muon's Newton–Schulz only with
// --optimizer muon), the temporary dataset is removed, and bad flags give one "zaya: error:" line.
// Rates are not asserted (timings are noisy), only their relations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "io/zaya_config.h"
#include "model/inspect.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;

const std::string kTiny = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";

// Runs with TMPDIR inside `dir`, so the test sees the temporary dataset come and go.
CliResult run_in(const test::ScratchDir& dir, const std::string& args) {
  std::filesystem::create_directories(dir / "tmp");
  setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  CliResult r = run_zaya_in(dir.path, "bench step " + args);
  unsetenv("TMPDIR");
  return r;
}

nlohmann::json bench(const test::ScratchDir& dir, const std::string& args) {
  const CliResult r =
      run_in(dir, "--config " + kTiny + " --seq-len 16 --steps 2 " + args + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir / "tmp")) << "the synthetic dataset was left behind";
  return nlohmann::json::parse(r.out);
}

TEST(BenchStepCli, ReportIsConsistent) {
  test::ScratchDir dir;
  const nlohmann::json j = bench(dir, "--batch 3");
  EXPECT_EQ(j.at("batch").get<int64_t>(), 3);
  EXPECT_EQ(j.at("seq_len").get<int64_t>(), 16);
  EXPECT_EQ(j.at("optimizer").get<std::string>(), "adamw");
  for (const char* k : {"tokens_per_s", "step_seconds_median", "model_gflops", "sgemm_gflops",
                        "mfu", "cpu_use", "peak_rss_bytes"})
    EXPECT_TRUE(std::isfinite(j.at(k).get<double>()) && j.at(k).get<double>() > 0) << k << j.dump();
  const ModelFacts f = model_facts(load_config(kTiny), 16);
  EXPECT_DOUBLE_EQ(j.at("model_flops_per_token").get<double>(),
                   3 * (f.flops_matmul_per_token + f.flops_attention_per_token));
  EXPECT_NEAR(
      j.at("model_gflops").get<double>(),
      j.at("tokens_per_s").get<double>() * j.at("model_flops_per_token").get<double>() / 1e9,
      1e-9 * j.at("model_gflops").get<double>());
  EXPECT_NEAR(j.at("mfu").get<double>(),
              j.at("model_gflops").get<double>() / j.at("sgemm_gflops").get<double>(), 1e-12);
  // The ops' shares plus "outside ops" cover the step (ops never exceed the step's wall time).
  double share = 0;
  for (const auto& [name, v] : j.at("split").items()) {
    EXPECT_GE(v.get<double>(), 0) << name;
    share += v.get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-6) << j.dump();
  for (const char* family : {"GEMMs (linear)", "attention", "MoE experts + dispatch", "optimizer"})
    EXPECT_GT(j.at("split").value(family, 0.0), 0.0) << family << j.dump();
  // A step of the tiny model runs each op a known number of times: one embedding forward.
  EXPECT_EQ(j.at("ops").at("embedding_forward").at("calls").get<int64_t>(), 1) << j.dump();
  EXPECT_GT(j.at("ops").at("linear_forward").at("calls").get<int64_t>(), 1);
  EXPECT_FALSE(j.at("ops").contains("newton_schulz"));  // AdamW only
  EXPECT_TRUE(j.at("ops").contains("adamw_update"));
}

TEST(BenchStepCli, MuonRunsNewtonSchulz) {
  test::ScratchDir dir;
  const nlohmann::json j = bench(dir, "--optimizer muon --warmup 0");
  EXPECT_GT(j.at("ops").at("newton_schulz").at("calls").get<int64_t>(), 0) << j.dump();
}

TEST(BenchStepCli, TableOutput) {
  test::ScratchDir dir;
  const CliResult r = run_in(dir, "--config " + kTiny + " --seq-len 8 --steps 1 --warmup 0");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* line : {"tokens/s", "MFU", "sgemm GFLOP/s", "time split", "outside ops"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
}

TEST(BenchStepCli, LongerContextThanTheConfig) {
  test::ScratchDir dir;  // tiny.json has max_position_embeddings 2048
  ASSERT_LT(load_config(kTiny).max_position_embeddings, 2050);
  const CliResult r = run_in(dir, "--config " + kTiny + " --seq-len 2050 --steps 1 --warmup 0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("max_position_embeddings"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir / "tmp"));
}

TEST(BenchStepCli, UserErrors) {
  test::ScratchDir dir;
  auto run = [&](const std::string& args) { return run_in(dir, "--config " + kTiny + " " + args); };
  expect_user_error(run("--optimizer sgd"), "--optimizer 'sgd'");
  for (const std::string flags : {"--steps 0", "--batch 0", "--seq-len 1", "--frobnicate"}) {
    const CliResult r = run(flags);
    EXPECT_FALSE(r.crashed) << r.err;
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.err.find(flags.substr(0, flags.find(' '))), std::string::npos) << r.err;
  }
  const CliResult missing = run_in(dir, "--config " + (dir / "missing.json"));
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("missing.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace zaya
