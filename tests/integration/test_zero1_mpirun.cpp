// Data-parallel training with ZeRO-1 through `mpirun … zaya train` (label mpi; skipped without
// mpirun). The same global batch of 12 rows per step (micro-batch × 2 micro-batches × ranks) is
// trained by 1 process (6 rows), 2 ranks (3 rows each) and 3 ranks (2 rows each, uneven optimizer
// shards): every step's loss agrees within 1e-5 relative over 20 steps and so do the final weights;
// the optimizer state per rank at 2 ranks is ≤ 0.55 of one process's. A checkpoint written by 2
// ranks (asynchronously) resumes on 1 and on 3 ranks, and one written by 3 ranks (synchronously)
// on 2, continuing with the uninterrupted run's losses (and bitwise on the same 2 ranks). Resumed
// with the checkpoint's own batch keys on another number of ranks, a run keeps its global batch
// (the micro-batches re-cut), or says why it cannot. Small ZeRO-1 buckets (reduce-scatters started
// during the backward) reproduce one process too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_util.h"
#include "model/model.h"
#include "test_skips.h"
#include "test_util.h"
#include "train/tiny_data.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

bool have_mpirun() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0;
}

// One thread per rank (the CI machine has 2 cores); a hung peer fails within a minute.
const std::string kEnv = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60";

struct TrainRun {
  std::string name;
  int ranks = 1;
  std::vector<std::string> sets;
};

class TrainZero : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir;
    const std::string shards = test::make_tiny_dataset(*dir_);
    test::write_tiny_toml(*dir_ / "run.toml", shards,
                          "grad_accum = 2\nsteps = 20\nlog_every = 5\neval_batches = 2\n",
                          "[optim]\nwarmup = 3\nlr = 0.003\nmin_lr = 0.0003\n"
                          "[checkpoint]\nkeep_last = 0\n");
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override {
    if (!have_mpirun()) ZAYA_SKIP(NoMpirun) << "no mpirun on the PATH";
  }

  // Runs `zaya train` on `ranks` processes (the global batch stays 12 rows); returns stderr.
  static std::string train(const TrainRun& r) {
    std::string args = "train --config " + *dir_ / "run.toml";
    args += " --set train.micro_batch=" + std::to_string(6 / r.ranks);
    args += " --set train.metrics=" + *dir_ / (r.name + ".jsonl");
    args += " --set checkpoint.dir=" + *dir_ / (r.name + "_ckpt");
    for (const std::string& s : r.sets) args += " --set " + s;
    const std::string launcher =
        r.ranks == 1 ? ""
                     : "mpirun --oversubscribe --allow-run-as-root -np " + std::to_string(r.ranks) +
                           " -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x ZAYA_DIST_TIMEOUT ";
    const std::string out = *dir_ / (r.name + ".log");
    const std::string cmd =
        kEnv + " " + launcher + ZAYA_BINARY + " " + args + " >" + out + " 2>&1 </dev/null";
    const int status = std::system(cmd.c_str());
    const std::string log = test::slurp(out);
    EXPECT_EQ(status, 0) << cmd << "\n" << log;
    const std::string backend = r.ranks == 1 ? "(single)" : "(mpi)";
    EXPECT_NE(log.find(std::to_string(r.ranks) + " rank(s) " + backend), std::string::npos) << log;
    return log;
  }

  // step → loss from a metrics file.
  static std::map<int64_t, double> losses(const std::string& name) {
    std::map<int64_t, double> out;
    std::ifstream f(*dir_ / (name + ".jsonl"));
    for (std::string line; std::getline(f, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      const nlohmann::json& loss = j.at("loss");  // NaN is written as null
      out[j.at("step").get<int64_t>()] = loss.is_number() ? loss.get<double>() : NAN;
    }
    return out;
  }

  // Largest relative loss difference over the steps of `b` (all must be in `a`).
  static double max_loss_diff(const std::string& a, const std::string& b, size_t want_steps) {
    const auto la = losses(a), lb = losses(b);
    EXPECT_EQ(lb.size(), want_steps) << b;
    double worst = 0;
    for (const auto& [step, loss] : lb) {
      EXPECT_TRUE(la.count(step)) << a << " lacks step " << step;
      if (!la.count(step)) continue;
      const double rel = std::fabs(loss - la.at(step)) / std::fabs(la.at(step));
      EXPECT_LE(rel, 1e-5) << b << " vs " << a << " at step " << step << ": " << loss << " vs "
                           << la.at(step);
      worst = std::max(worst, rel);
    }
    return worst;
  }

  // Largest |Δw| / max(|w|, 1) over the final (step 20) weights of two runs.
  static double max_weight_diff(const std::string& a, const std::string& b) {
    const std::string step = "/step_00000020/model";
    const Model ma = Model::load_dir(*dir_ / (a + "_ckpt") + step);
    const Model mb = Model::load_dir(*dir_ / (b + "_ckpt") + step);
    EXPECT_EQ(ma.layout().total, mb.layout().total);
    double worst = 0;
    for (size_t i = 0; i < ma.layout().total; ++i) {
      const double x = ma.params()[i], y = mb.params()[i];
      worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(x)));
    }
    EXPECT_LE(worst, 1e-5) << a << " vs " << b << " final weights";
    return worst;
  }

  static ScratchDir* dir_;
};

ScratchDir* TrainZero::dir_ = nullptr;

TEST_F(TrainZero, RanksReproduceOneProcessAndCheckpointsReshard) {
  // 1 process; 2 ranks with an asynchronous checkpoint at step 10; 3 ranks with a synchronous one.
  train({"one", 1, {}});
  const std::string two_log = train({"two", 2, {"checkpoint.every=10", "checkpoint.async=true"}});
  train({"three", 3, {"checkpoint.every=10", "checkpoint.async=false"}});

  const double d2 = max_loss_diff("one", "two", 20), d3 = max_loss_diff("one", "three", 20);
  const double w2 = max_weight_diff("one", "two"), w3 = max_weight_diff("one", "three");
  std::printf("loss: max rel diff vs 1 process: 2 ranks %.3g, 3 ranks %.3g\n", d2, d3);
  std::printf("final weights: max rel diff vs 1 process: 2 ranks %.3g, 3 ranks %.3g\n", w2, w3);

  std::smatch m;
  ASSERT_TRUE(std::regex_search(two_log, m, std::regex("optimizer state: .* ratio ([0-9.]+)")))
      << two_log;
  const double ratio = std::stod(m[1]);
  std::printf("optimizer state per rank at 2 ranks: %.4f of one process\n", ratio);
  EXPECT_LE(ratio, 0.55);

  // Resharding: 2 → 1 and 2 → 3 ranks from step 10 of the 2-rank run, 3 → 2 from the 3-rank one.
  const std::string from2 = "checkpoint.resume=" + *dir_ / "two_ckpt/step_00000010";
  const std::string from3 = "checkpoint.resume=" + *dir_ / "three_ckpt/step_00000010";
  const std::string two_to_one = train({"two_to_one", 1, {from2}});
  EXPECT_NE(two_to_one.find("resharded from 2 to 1 ranks"), std::string::npos) << two_to_one;
  train({"two_to_three", 3, {from2}});
  train({"two_to_two", 2, {from2}});  // the same rank count: bitwise
  const std::string final_model = "_ckpt/step_00000020/model/model.safetensors";
  EXPECT_TRUE(test::slurp(*dir_ / ("two" + final_model)) ==
              test::slurp(*dir_ / ("two_to_two" + final_model)))
      << "2 → 2 ranks resume is not bitwise";
  train({"three_to_two", 2, {from3}});
  const double r1 = max_loss_diff("two", "two_to_one", 10);
  const double r3 = max_loss_diff("two", "two_to_three", 10);
  const double r2 = max_loss_diff("three", "three_to_two", 10);
  const double rw1 = max_weight_diff("two", "two_to_one");
  const double rw3 = max_weight_diff("two", "two_to_three");
  std::printf(
      "resumed steps 11-20: max rel loss diff 2→1 %.3g, 2→3 %.3g, 3→2 %.3g; final weights 2→1 "
      "%.3g, 2→3 %.3g\n",
      r1, r3, r2, rw1, rw3);
}

// A 3-rank checkpoint (2 rows × 2 micro-batches × 3 ranks = 12) resumed on 2 ranks with the same
// train.micro_batch keeps 12 rows a step (2 rows × 3 micro-batches × 2 ranks) and the 3-rank
// run's losses; on 5 ranks, which cannot share 12 rows, it is an error naming both.
TEST_F(TrainZero, SameBatchKeysOnAnotherRankCountKeepTheGlobalBatch) {
  if (!fs::exists(*dir_ / "three_ckpt/step_00000010"))
    train({"three", 3, {"checkpoint.every=10", "checkpoint.async=false"}});
  const std::string from3 = "checkpoint.resume=" + *dir_ / "three_ckpt/step_00000010";
  const std::string log = train({"three_to_two_kept", 2, {from3, "train.micro_batch=2"}});
  EXPECT_NE(log.find("train: 2 ranks instead of the checkpoint's 3: the global batch stays 12 "
                     "rows = 2 × 3 micro-batches × 2 ranks"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("global batch 12 rows = 2 × 3 micro-batches × 2 ranks"), std::string::npos)
      << log;
  std::printf("3 → 2 ranks, the global batch kept: max rel loss diff %.3g\n",
              max_loss_diff("three", "three_to_two_kept", 10));

  const std::string out = *dir_ / "three_to_five.log";
  const std::string cmd =
      kEnv +
      " mpirun --oversubscribe --allow-run-as-root -np 5 -x OMP_NUM_THREADS "
      "-x OPENBLAS_NUM_THREADS -x ZAYA_DIST_TIMEOUT " +
      ZAYA_BINARY + " train --config " + *dir_ / "run.toml" + " --set train.micro_batch=2 --set " +
      from3 + " --set train.metrics=" + *dir_ / "three_to_five.jsonl" +
      " --set checkpoint.dir=" + *dir_ / "three_to_five_ckpt" + " >" + out + " 2>&1 </dev/null";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  const std::string err = test::slurp(out);
  EXPECT_NE(err.find("the checkpoint was trained with a global batch of 12 rows on 3 ranks, which "
                     "5 ranks cannot share evenly"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("train.micro_batch"), std::string::npos) << err;
}

// AdamW for every parameter (no whole-matrix ownership: every tensor may be split).
TEST_F(TrainZero, AdamWOnlyRanksReproduceOneProcess) {
  train({"adamw_one", 1, {"optim.use_muon=false", "train.steps=10"}});
  train({"adamw_three", 3, {"optim.use_muon=false", "train.steps=10"}});
  std::printf("AdamW only: max rel loss diff 3 ranks vs 1 process %.3g\n",
              max_loss_diff("adamw_one", "adamw_three", 10));
}

// ZeRO-1 buckets of ~26 elements (every layer its own): each bucket's reduce-scatter starts as
// the backward finishes its layers, and the runs still reproduce one process.
TEST_F(TrainZero, BucketsReducedDuringTheBackwardReproduceOneProcess) {
  const std::string small = "optim.zero_bucket_mb=0.0001";
  train({"buckets_one", 1, {"train.steps=10"}});
  const std::string two = train({"buckets_two", 2, {small, "train.steps=10"}});
  train({"buckets_three", 3, {small, "train.steps=10", "optim.use_muon=false"}});
  train({"buckets_adamw_one", 1, {"train.steps=10", "optim.use_muon=false"}});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(two, m, std::regex("([0-9]+) bucket\\(s\\) reduced"))) << two;
  EXPECT_GT(std::stoi(m[1]), 2) << two;
  std::printf(
      "%s buckets: max rel loss diff vs 1 process: 2 ranks (Muon) %.3g, 3 ranks "
      "(AdamW) %.3g\n",
      m[1].str().c_str(), max_loss_diff("buckets_one", "buckets_two", 10),
      max_loss_diff("buckets_adamw_one", "buckets_three", 10));
}

// A non-finite gradient on the ranks skips the step on all of them, in agreement.
TEST_F(TrainZero, NonFiniteStepsAreSkippedOnAllRanks) {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(1);
  m.param("model.final_norm.weight").ptr<float>()[0] = NAN;
  m.save_dir(*dir_ / "nan_model");
  train({"nan", 2, {"model.init_from=" + *dir_ / "nan_model", "train.steps=3"}});
  const auto rows = losses("nan");
  EXPECT_EQ(rows.size(), 3u);
  std::ifstream f(*dir_ / "nan.jsonl");
  std::string last;
  for (std::string line; std::getline(f, line);) last = line;
  EXPECT_EQ(nlohmann::json::parse(last).at("skipped"), 3) << last;
}

}  // namespace
}  // namespace zaya
