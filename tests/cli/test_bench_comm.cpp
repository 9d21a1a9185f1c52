// `zaya bench comm` on one process (no launcher: the single group): a small sweep prints the
// nccl-tests table with 0 wrong elements, and every bad flag gives one "zaya: error:" line and
// exit code 1. (The same command under mpirun at 2 and 4 ranks: tests/integration/test_train_mpirun.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli_util.h"

using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

CliResult run_zaya(const std::string& args) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("zaya_bench_comm_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return run_zaya_in(dir.string(), args);
}

}  // namespace

TEST(BenchCommCli, OneProcessSweep) {
  const CliResult r = run_zaya(
      "bench comm --min-bytes 1K --max-bytes 64K --factor 4 --iters 2 "
      "--warmup 1 --ops all_reduce,broadcast --dtype f64");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("# zaya bench comm: 1 rank (single group), f64 elements"), 0u) << r.out;
  EXPECT_NE(r.out.find("# all_reduce\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# broadcast\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("# all_gather"), std::string::npos) << r.out;
  // 1K, 4K, 16K, 64K for each of the two collectives.
  EXPECT_NE(r.out.find("           65536         8192    f64    sum"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("           65536         8192    f64   none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# wrong elements: 0"), std::string::npos) << r.out;
}

TEST(BenchCommCli, BadFlagsAreOneLineErrors) {
  expect_user_error(run_zaya("bench comm --max-bytes 12Q"), "'12Q' is not a size");
  expect_user_error(run_zaya("bench comm --min-bytes 1M --max-bytes 1K"),
                    "--min-bytes (1048576) is larger than --max-bytes (1024)");
  expect_user_error(run_zaya("bench comm --ops allreduce"), "unknown collective 'allreduce'");
  expect_user_error(run_zaya("bench comm --dtype bf16"), "--dtype 'bf16' is not supported");
  expect_user_error(run_zaya("bench comm --iters 0"), "--iters must be at least 1");
  expect_user_error(run_zaya("bench comm --factor 1"), "--factor must be at least 2");
  expect_user_error(run_zaya("bench comm --max-time 0"), "--max-time must be positive");
#if !defined(ZAYA_HAS_GPU_BACKEND)
  expect_user_error(run_zaya("bench comm --backend nccl"),
                    "this build has no GPU backend, so no NCCL group");
#endif
  expect_user_error(run_zaya("bench comm --group nccl2"), "unknown process group kind 'nccl2'");
  expect_user_error(run_zaya("bench comm --timeout -1"), "timeout must be positive");
}
