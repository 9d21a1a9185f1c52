// `zaya bench step`'s device flags without a GPU: --device gpu is one "zaya: error:" line naming
// why there is no GPU (the build, or the missing device), --precision bf16 needs --device gpu,
// bad --device/--precision/--activations/--probe-size/--profile-steps values are errors, and the
// CPU report names its device and precision and has a communication share. (With a GPU the first
// test skips: tests/cli/test_bench_step_gpu.cpp runs the GPU path.)
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/bench_step_util.h"
#include "core/device.h"
#include "test_skips.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::CliResult;
using test::expect_user_error;
using test::run_bench_step_in;

const std::string kTiny = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";

TEST(BenchStepFlags, GpuWithoutAGpuIsAClearError) {
  if (gpu::available()) ZAYA_SKIP(GpuPresent) << gpu::describe();
  test::ScratchDir dir;
  for (const std::string& extra :
       {std::string(), std::string(" --precision fp32"), " --config " + kTiny}) {
    const CliResult r = run_bench_step_in(dir, "--device gpu" + extra);
    expect_user_error(r, "bench step --device gpu: " + gpu::describe());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir / "tmp"));
}

TEST(BenchStepFlags, BadValues) {
  test::ScratchDir dir;
  const std::string c = "--config " + kTiny + " ";
  expect_user_error(run_bench_step_in(dir, c + "--precision bf16"),
                    "--precision bf16 needs --device gpu");
  expect_user_error(run_bench_step_in(dir, c + "--device tpu"), "--device 'tpu'");
  expect_user_error(run_bench_step_in(dir, c + "--precision fp16"), "--precision 'fp16'");
  expect_user_error(run_bench_step_in(dir, c + "--activations fp16"),
                    "--activations 'fp16': use auto, fp32 or bf16");
  for (const std::string flags : {"--probe-size 8", "--profile-steps -1", "--probe-size x"}) {
    const CliResult r = run_bench_step_in(dir, c + flags);
    EXPECT_FALSE(r.crashed) << r.err;
    EXPECT_NE(r.code, 0) << flags;
    EXPECT_NE(r.err.find(flags.substr(0, flags.find(' '))), std::string::npos) << r.err;
  }
}

TEST(BenchStepFlags, CpuReportNamesDeviceAndPrecision) {
  test::ScratchDir dir;
  const CliResult r =
      run_bench_step_in(dir, "--config " + kTiny + " --seq-len 8 --steps 1 --warmup 0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("device"), "cpu");
  EXPECT_EQ(j.at("precision"), "fp32");
  EXPECT_TRUE(j.at("split").contains("communication")) << j.dump();
  EXPECT_FALSE(j.contains("gemm_engine"));  // the GPU's probe only
  const CliResult table =
      run_bench_step_in(dir, "--config " + kTiny + " --seq-len 8 --steps 1 --warmup 0");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("device cpu, precision fp32"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace zaya
