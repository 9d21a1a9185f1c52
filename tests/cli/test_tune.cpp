// The GEMM table's user-facing edges that need no GPU: `zaya tune gemm` flags and its
// clear error without a GPU, `zaya train --record-untuned` on the CPU device, and the
// train.gemm_table key (it needs train.device = gpu).
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"
#include "core/device.h"
#include "test_skips.h"
#include "test_util.h"
#include "train/train_config.h"

namespace zaya {
namespace {

using test::expect_user_error;
using test::run_zaya_in;

const std::string kTiny = std::string(ZAYA_TEST_FIXTURES) + "/model/tiny_a/config.json";

TEST(TuneCli, FlagErrorsAreOneLine) {
  test::ScratchDir d;
  expect_user_error(run_zaya_in(d.path, "tune"), "A subcommand is required");
  expect_user_error(run_zaya_in(d.path, "tune gemm"), "--config is required");
  expect_user_error(run_zaya_in(d.path, "tune gemm --config " + kTiny + " --tokens 0"), "--tokens");
  expect_user_error(run_zaya_in(d.path, "tune gemm --config " + kTiny + " --reps 0"), "--reps");
  expect_user_error(run_zaya_in(d.path, "tune gemm --config " + kTiny + " --precision fp16"),
                    "--precision must be fp32 or bf16, got 'fp16'");
  expect_user_error(run_zaya_in(d.path, "tune gemm --config " + d / "missing.json"),
                    "missing.json");
}

TEST(TuneCli, NeedsAGpu) {
  if (gpu::available()) ZAYA_SKIP(GpuPresent) << gpu::describe();
  test::ScratchDir d;
  expect_user_error(run_zaya_in(d.path, "tune gemm --config " + kTiny + " --out " + d / "t.csv"),
                    "zaya tune gemm needs a GPU");
}

TEST(TuneCli, RecordUntunedNeedsTheGpuDevice) {
  test::ScratchDir d;
  std::ofstream(d / "train.toml") << "[model]\nconfig = \"" << kTiny << "\"\n[data]\ndataset = \""
                                  << d / "data"
                                  << "\"\n";
  expect_user_error(run_zaya_in(d.path, "train --config " + d / "train.toml" +
                                            " --record-untuned " + d / "u.csv"),
                    "--record-untuned records GPU GEMMs: it needs train.device = gpu");
}

TEST(TuneCli, GemmTableKeyNeedsTheGpuDevice) {
  TrainConfig c;
  c.dataset = "some/dir";
  c.model_config = "config.json";
  EXPECT_EQ(c.gemm_table, "");
  apply_override(c, "train.gemm_table=gemm_table.csv");
  test::expect_error([&] { validate_train_config(c); },
                     {"train.gemm_table", "needs train.device = gpu"});
  apply_override(c, "train.device=gpu");
  validate_train_config(c);
  EXPECT_NE(train_config_to_toml(c).find("gemm_table = \"gemm_table.csv\""), std::string::npos);
  EXPECT_EQ(train_config_from_json(train_config_to_json(c)).gemm_table, "gemm_table.csv");
}

}  // namespace
}  // namespace zaya
