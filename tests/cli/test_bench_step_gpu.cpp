// `zaya bench step --device gpu` end to end on the tiny config (1 row of 16 tokens, one timed and
// one profiled step, a 64³ GEMM probe): the JSON report is complete and self-consistent (MFU =
// model FLOP/s over the BF16 probe's rate, and over the F32 one for fp32), the profiled step's
// split covers it and has the GPU families (the GEMMs of linear, MoE and LM head ops split out by
// gemm()'s profile region), and the table names the engine and precision. Rates are not
// asserted (the emulator's mean nothing). Skips without a GPU.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/bench_step_util.h"
#include "cli_util.h"
#include "gpu_test_util.h"
#include "io/zaya_config.h"
#include "model/inspect.h"

namespace zaya {
namespace {

using test::CliResult;
using test::run_bench_step_in;

const std::string kTiny = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";
const std::string kSmall = "--config " + kTiny +
                           " --device gpu --batch 1 --seq-len 16 --steps 1 --warmup 0 "
                           "--probe-size 64 --profile-steps 1";

TEST(GpuBenchStep, JsonReportFp32) {
  ZAYA_REQUIRE_GPU();
  test::ScratchDir dir;
  const CliResult r = run_bench_step_in(dir, kSmall + " --precision fp32 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir / "tmp")) << "the synthetic dataset was left behind";
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("device"), "gpu");
  EXPECT_EQ(j.at("precision"), "fp32");
  EXPECT_EQ(j.at("activations"), "fp32");  // auto under fp32
  EXPECT_GT(j.at("activation_bytes").get<double>(), 0);
  const std::string engine = j.at("gemm_engine");
  EXPECT_TRUE(engine == "cuBLASLt" || engine == "tiled") << engine;
  // Without cuBLASLt (the HIP build, the emulator) no plans; with it, the plans are counted.
  EXPECT_GE(j.at("gemm_plans_timed").get<int64_t>(), engine == "cuBLASLt" ? 1 : 0) << j.dump();
  EXPECT_GE(j.at("gemm_plan_seconds_timed").get<double>(), 0);
  for (const char* k : {"tokens_per_s", "step_seconds_median", "model_gflops", "gemm_bf16_tflops",
                        "gemm_f32_tflops", "mfu", "mfu_f32", "profiled_step_seconds_median"})
    EXPECT_TRUE(std::isfinite(j.at(k).get<double>()) && j.at(k).get<double>() > 0) << k << j.dump();
  const ModelFacts f = model_facts(load_config(kTiny), 16);
  EXPECT_DOUBLE_EQ(j.at("model_flops_per_token").get<double>(),
                   3 * (f.flops_matmul_per_token + f.flops_attention_per_token));
  const double model = j.at("model_gflops").get<double>() * 1e9;
  EXPECT_NEAR(j.at("mfu").get<double>(), model / (j.at("gemm_bf16_tflops").get<double>() * 1e12),
              1e-9 * j.at("mfu").get<double>());
  EXPECT_NEAR(j.at("mfu_f32").get<double>(), model / (j.at("gemm_f32_tflops").get<double>() * 1e12),
              1e-9 * j.at("mfu_f32").get<double>());
  double share = 0;
  for (const auto& [name, v] : j.at("split").items()) {
    EXPECT_GE(v.get<double>(), 0) << name;
    share += v.get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-6) << j.dump();
  for (const char* family : {"GEMMs (linear + MoE experts + LM head)", "attention", "MoE dispatch",
                             "optimizer", "LM head loss"})
    EXPECT_GT(j.at("split").value(family, 0.0), 0.0) << family << j.dump();
  EXPECT_TRUE(j.at("split").contains("communication")) << j.dump();
  EXPECT_FALSE(j.at("split").contains("MoE experts + dispatch")) << j.dump();
  const nlohmann::json& ops = j.at("ops");
  EXPECT_EQ(ops.at("embedding_forward").at("calls").get<int64_t>(), 1) << j.dump();
  // (training's LM head is the one pass: its GEMMs are the one op's)
  for (const char* e : {"moe_forward/gemm", "moe_backward/gemm",
                        "lm_head_xent_forward_backward/gemm", "linear_forward/gemm"})
    EXPECT_GT(ops.at(e).at("calls").get<int64_t>(), 0) << e << j.dump();
}

TEST(GpuBenchStep, TableBf16Default) {
  ZAYA_REQUIRE_GPU();
  test::ScratchDir dir;
  const CliResult r = run_bench_step_in(dir, kSmall);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line :
       {"precision bf16", "activations bf16", "stored bf16", "GEMM engine", "BF16 GEMM", "MFU",
        "GEMM plans", "GPU memory", "time split", "GEMMs (linear + MoE experts + LM head)",
        "MoE dispatch", "communication", "outside ops"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_EQ(r.out.find("F32 GEMM"), std::string::npos) << r.out;  // bf16: no F32 probe
}

}  // namespace
}  // namespace zaya
