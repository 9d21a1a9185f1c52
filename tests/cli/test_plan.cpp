// `zaya plan` end to end on one process: its byte figures equal a real one-process run's (the
// start-up memory line, the first step's collective line, the checkpoint manifest's sizes; Muon
// with fp32 activations, AdamW with bf16 ones); the shipped ZAYA1 cluster file plans ZAYA1-base
// as docs/plan.md says (ZeRO-1 alone fits with one bucket); bad flags and cluster files are one
// error line naming the file and the key or the flag. The 2- and 3-rank equality is
// test_plan_mpi.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/plan_util.h"
#include "cli_util.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::ScratchDir;

TEST(PlanCli, ByteFiguresEqualAOneProcessRun) {
  const ScratchDir dir;
  test::expect_plan_matches_run(dir, "muon", 1, {});
  test::expect_plan_matches_run(dir, "adamw", 1,
                                {"optim.use_muon=false", "train.activations=bf16"});
}

// The repository's own files: ZAYA1-base's architecture on ZAYA1's cluster.
const std::string kRoot = std::string(ZAYA_TEST_FIXTURES) + "/../..";

TEST(PlanCli, Zaya1BaseFitsWithZero1AloneOnItsCluster) {
  const ScratchDir dir;
  const std::string base = " --model " + kRoot + "/configs/models/zaya1-8b.json" + " --cluster " +
                           kRoot + "/configs/clusters/zaya1-mi300x.toml" +
                           " --set data.seq_len=4096 --set train.micro_batch=1" +
                           " --set train.precision=bf16";
  const std::string args = "plan --json" + base;
  const CliResult one = test::run_zaya_in(dir.path, args + " --set optim.zero_bucket_mb=0");
  ASSERT_EQ(one.code, 0) << one.err;
  const nlohmann::json p = nlohmann::json::parse(one.out);
  EXPECT_EQ(p.at("cluster").at("ranks").get<int>(), 1024);
  EXPECT_TRUE(p.at("memory_per_gpu").at("fits").get<bool>()) << one.out;
  // One bucket of every parameter: about 4 bytes per parameter, the weights' size.
  const double bucket = p.at("memory_per_gpu").at("zero_bucket").get<double>();
  const double weights = p.at("memory_per_gpu").at("weights").get<double>();
  EXPECT_GT(bucket, weights);
  EXPECT_LT(bucket, 1.05 * weights);
  // Per-layer buckets pad every bucket to ranks × its largest rank's share (a whole Muon matrix):
  // at 1024 ranks they do not fit.
  const CliResult layered = test::run_zaya_in(dir.path, args);
  ASSERT_EQ(layered.code, 0) << layered.err;
  EXPECT_FALSE(nlohmann::json::parse(layered.out).at("memory_per_gpu").at("fits").get<bool>());
  // The text report says the same.
  const CliResult text =
      test::run_zaya_in(dir.path, "plan" + base + " --set optim.zero_bucket_mb=0");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("fits"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("DOES NOT FIT"), std::string::npos) << text.out;
}

// A cluster file with `line` replaced (or added when `from` is empty).
std::string cluster_with(const ScratchDir& dir, const std::string& from, const std::string& to) {
  std::string text = test::slurp(test::write_one_node_cluster(dir, 2));
  if (from.empty())
    text += to + "\n";
  else
    text.replace(text.find(from), from.size(), to);
  const std::string path = dir / "bad.toml";
  std::ofstream(path) << text;
  return path;
}

TEST(PlanCli, RefusesBadClusterFilesNamingTheFileAndTheKey) {
  const ScratchDir dir;
  const std::string model = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";
  const auto plan = [&](const std::string& cluster, const std::string& more = "") {
    return test::run_zaya_in(dir.path, "plan --model " + model + " --cluster " + cluster + more);
  };
  const std::string bad = dir / "bad.toml";
  test::expect_user_error(plan(cluster_with(dir, "hbm_tbyte_per_s = 3.35\n", "")),
                          bad + ": key 'hbm_tbyte_per_s' is missing");
  test::expect_user_error(plan(cluster_with(dir, "nodes = 1", "nodes = -2")),
                          bad + ": key 'nodes' must be at least 1, got -2");
  test::expect_user_error(plan(cluster_with(dir, "gpu_memory_gb = 80", "gpu_memory_gb = -80")),
                          bad + ": key 'gpu_memory_gb' must be a positive finite number");
  test::expect_user_error(plan(cluster_with(dir, "", "nodez = 2")), bad + ": unknown key 'nodez'");
  test::expect_user_error(plan(cluster_with(dir, "\"single-node\"", "\"torus\"")),
                          bad +
                              ": key 'topology' must be single-node, rails-only or fat-tree, "
                              "got 'torus'");
  test::expect_user_error(plan(cluster_with(dir, "nodes = 1", "nodes = 4")),
                          bad + ": key 'topology' is single-node but key 'nodes' is 4");
  test::expect_user_error(plan(cluster_with(dir, "nodes = 1", "nodes = \"one\"")),
                          bad + ": key 'nodes' must be an integer");
  test::expect_user_error(plan(cluster_with(dir, "nodes = 1", "nodes = [")), bad + ":");
  test::expect_user_error(plan(dir / "absent.toml"), "cannot open " + dir / "absent.toml");
  // Flags.
  const std::string good = test::write_one_node_cluster(dir, 2);
  test::expect_user_error(plan(good, " --mfu 1.5"), "--mfu 1.5");
  test::expect_user_error(plan(good, " --mfu 0"), "--mfu");
  test::expect_user_error(plan(good, " --mtbf-hours -1"), "--mtbf-hours");
  test::expect_user_error(plan(good, " --global-batch 7"),
                          "--global-batch 7 rows is not a multiple of train.micro_batch × ranks");
  test::expect_user_error(plan(good, " --set train.micro_batch=0"), "train.micro_batch");
  test::expect_user_error(plan(good, " --set train.stesp=3"), "train.steps");
  test::expect_user_error(test::run_zaya_in(dir.path, "plan --model " + model),
                          "--cluster is required");
  test::expect_user_error(plan(good, " --set data.seq_len=4096"), "max_position_embeddings");
}

TEST(PlanCli, GlobalBatchSetsTheMicroBatchesPerStep) {
  const ScratchDir dir;
  const CliResult r = test::run_zaya_in(
      dir.path, "plan --json --model " + std::string(ZAYA_TEST_FIXTURES) +
                    "/configs/tiny.json --cluster " + test::write_one_node_cluster(dir, 2) +
                    " --set train.micro_batch=3 --global-batch 24");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json p = nlohmann::json::parse(r.out);
  EXPECT_EQ(p.at("run").at("grad_accum").get<int>(), 4);  // 24 = 3 × 4 × 2
  EXPECT_EQ(p.at("run").at("global_batch_rows").get<int>(), 24);
}

}  // namespace
}  // namespace zaya
