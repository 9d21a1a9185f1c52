// `zaya eval --device`: only cpu and gpu pass the flag check; gpu where there is no GPU
// (a CPU-only build, or a machine without one) is one clear "zaya: error:" line before any work;
// cpu, the default, names its device in the log line.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "core/device.h"
#include "test_skips.h"
#include "test_util.h"
#include "twin_cases.h"

namespace zaya {
namespace {

using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;

std::string eval_args(const std::string& device) {
  const std::string dir = test::case_dir("tiny_a").string();
  return "eval --model " + dir + " --tokens " + dir + "/tokens.txt --device " + device;
}

TEST(EvalDevice, AnUnknownDeviceIsRejectedByTheFlagCheck) {
  test::ScratchDir d;
  const CliResult r = run_zaya_in(d.path, eval_args("tpu"));
  expect_user_error(r, "--device");
  EXPECT_NE(r.err.find("tpu"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(EvalDevice, GpuWithoutAGpuIsOneClearError) {
  if (gpu::available()) ZAYA_SKIP(GpuPresent) << gpu::describe();
  test::ScratchDir d;
  const CliResult r = run_zaya_in(d.path, eval_args("gpu"));
  expect_user_error(r, "--device gpu: " + gpu::describe());
  EXPECT_TRUE(r.out.empty()) << r.out;  // no loss line: nothing was evaluated
}

TEST(EvalDevice, CpuIsTheDefaultAndIsNamedInTheLog) {
  test::ScratchDir d;
  const CliResult r = run_zaya_in(d.path, eval_args("cpu"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("device cpu"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.rfind("loss ", 0), 0u) << r.out;
  const std::string dir = test::case_dir("tiny_a").string();
  const CliResult plain =
      run_zaya_in(d.path, "eval --model " + dir + " --tokens " + dir + "/tokens.txt");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.out, r.out);  // the same loss, bit for bit
}

}  // namespace
}  // namespace zaya
