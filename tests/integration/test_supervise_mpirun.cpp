// `zaya supervise` with the real trainer (label mpi): the tiny model, seq_len 16, micro_batch 2.
// (a) Chaos: a 60-step run (a checkpoint every 5 steps, asynchronous) with 5 kills at seeded
//     random steps, one inside a checkpoint write, completes; its final model.safetensors is
//     byte-identical to an uninterrupted run's, its metrics hold every step once and goodput.json
//     adds up (within 1%).
// (b) Under `mpirun -np 2`, a rank killed (step 3) and then a rank hung (step 5): the crash is
//     seen, the hang detected (tight computed timeouts) and named (rank 1, its host,
//     forward-backward of step 5), and the job restarts each time and completes.
// (c) The newest checkpoint corrupted before a kill: the restart falls back to the one before and
//     the final weights equal an uninterrupted run's.
// (d) --preflight with a rank made slow (slow@preflight): the real `mpirun -np 2 zaya preflight`
//     refuses, naming rank 1, and the job is not started.
// (e) Two NaN losses in a row (train.anomaly_rollback = 2): both skipped, then a rollback to the
//     step-5 checkpoint; goodput.json lists the anomalies and the rollback, counts the undone
//     steps as lost to them, and keeps 20 steps.
// (f) Fencing: a `mpirun -np 2` job of attempt 1 left hung by a supervisor before (as on a host
//     the network cut off) is ended by its ranks' watchdogs as soon as a supervisor in the same
//     directory starts attempt 2 — each rank prints its "zaya: fenced:" line and exits — and
//     the new job completes.
// ZAYA_TEST_SHOW_LOG=1 prints each supervised run's log.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "core/heartbeat.h"
#include "resilience/hang_detector.h"

#include "cli_util.h"
#include "integration/mpirun_job.h"
#include "test_util.h"
#include "train/tiny_data.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::ScratchDir;
using test::slurp;

// One thread per process (2 cores); a peer that stops answering fails the collective in 60 s
// (the supervisor's own hang timeouts are tighter).
const std::string kEnv = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60";

class SuperviseTrain : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir;
    const std::string shards = test::make_tiny_dataset(*dir_);
    test::write_tiny_toml(*dir_ / "run.toml", shards,
                          "micro_batch = 2\ngrad_accum = 1\nlog_every = 10\neval_batches = 1\n",
                          "[optim]\nwarmup = 3\nlr = 0.003\nmin_lr = 0.0003\n"
                          "[checkpoint]\nevery = 5\nkeep_last = 0\nresume = \"auto\"\n");
  }
  static void TearDownTestSuite() { delete dir_; }

  // The `zaya train` words of run NAME (steps, async checkpoints or not).
  static std::string train_args(const std::string& name, int steps, bool async) {
    return std::string(ZAYA_BINARY) + " train --config " + *dir_ / "run.toml" +
           " --set train.steps=" + std::to_string(steps) +
           " --set checkpoint.async=" + (async ? "true" : "false") +
           " --set train.metrics=" + *dir_ / (name + ".jsonl") +
           " --set checkpoint.dir=" + *dir_ / (name + "_ckpt");
  }

  // An uninterrupted run (once per suite for each length).
  static void reference(int steps, bool async) {
    const std::string name = "ref" + std::to_string(steps);
    if (fs::exists(*dir_ / (name + ".jsonl"))) return;
    const std::string log = *dir_ / (name + ".log");
    const std::string cmd = kEnv + " " + train_args(name, steps, async) + " >" + log + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(log);
  }

  struct Supervised {
    int code = -1;
    std::string log;
    json report;
    double seconds = 0;
  };
  // `ZAYA_FAULT=faults zaya supervise FLAGS -- train words` (stderr and stdout in the log).
  static Supervised supervise(const std::string& name, const std::string& faults,
                              const std::string& flags, const std::string& job) {
    const std::string log = *dir_ / (name + ".log");
    const std::string cmd = kEnv + " ZAYA_FAULT='" + faults + "' " + ZAYA_BINARY +
                            " supervise --dir " + *dir_ / (name + "_sup") +
                            " --poll 0.1 --restart-delay 0 --max-restarts 8 " + flags + " -- " +
                            job + " >" + log + " 2>&1 </dev/null";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    Supervised s;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    s.log = slurp(log);
    const std::string rep = slurp(*dir_ / (name + "_sup/goodput.json"));
    if (!rep.empty()) s.report = json::parse(rep);
    std::printf("%s: %.1f s, exit %d\n", name.c_str(), s.seconds, s.code);
    if (getenv("ZAYA_TEST_SHOW_LOG")) std::printf("%s\n", s.log.c_str());
    return s;
  }

  static std::string final_weights(const std::string& name, int steps) {
    return slurp(*dir_ / (name + "_ckpt") +
                 fmt::format("/step_{:08d}/model/model.safetensors", steps));
  }

  // Every step 1..steps exactly once in the metrics file.
  static void expect_each_step_once(const std::string& name, int steps) {
    std::map<int64_t, int> seen;
    std::ifstream f(*dir_ / (name + ".jsonl"));
    for (std::string line; std::getline(f, line);)
      ++seen[json::parse(line).at("step").get<int64_t>()];
    EXPECT_EQ(seen.size(), size_t(steps)) << name;
    for (int s = 1; s <= steps; ++s) EXPECT_EQ(seen[s], 1) << name << " step " << s;
  }

  static void expect_adds_up(const json& r) {
    ASSERT_TRUE(r.is_object());
    double parts = r["productive_s"].get<double>() + r["overhead_s"].get<double>() +
                   r["anomaly_s"].get<double>();
    for (const json& f : r["failures"]) parts += f["total_s"].get<double>();
    const double wall = r["wall_s"];
    EXPECT_NEAR(parts, wall, 0.01 * wall) << r.dump(2);
    EXPECT_GT(r["productive_s"].get<double>(), 0) << r.dump(2);
  }

  // mpirun -np 2 with the variables the job needs (local ranks inherit them; -x for other hosts).
  static std::string mpirun2() {
    return std::string(ZAYA_MPIRUN) + " " + ZAYA_MPIRUN_FLAGS +
           " -np 2 -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x ZAYA_DIST_TIMEOUT -x ZAYA_FAULT "
           "-x ZAYA_SUPERVISE_DIR -x ZAYA_SUPERVISE_ATTEMPT";
  }

  static ScratchDir* dir_;
};

ScratchDir* SuperviseTrain::dir_ = nullptr;

TEST_F(SuperviseTrain, ChaosKillsFinishBitIdentical) {
  reference(60, true);
  // 5 distinct steps in 2..59, seeded; one of them a checkpoint step, killed inside its write.
  std::mt19937 rng(20261201);
  std::set<int> steps;
  const int ckpt_step = 5 * std::uniform_int_distribution<int>(1, 11)(rng);
  steps.insert(ckpt_step);
  while (steps.size() < 5) steps.insert(std::uniform_int_distribution<int>(2, 59)(rng));
  std::string faults;
  for (int s : steps)
    faults += (faults.empty() ? "" : ",") + fmt::format("kill@step:{}", s) +
              (s == ckpt_step ? ":section:checkpoint" : "");
  std::printf("faults: %s\n", faults.c_str());
  const Supervised s = supervise("chaos", faults, "", train_args("chaos", 60, true));
  ASSERT_EQ(s.code, 0) << s.log;
  EXPECT_EQ(s.report["restarts"], 5) << s.log;
  EXPECT_EQ(s.report["faults_fired"].size(), 5u) << s.log;
  const std::string want = final_weights("ref60", 60), got = final_weights("chaos", 60);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(got == want) << "final model.safetensors differs from the uninterrupted run's";
  expect_each_step_once("chaos", 60);
  expect_adds_up(s.report);
  EXPECT_EQ(s.report["steps_kept"], 60) << s.report.dump(2);
}

TEST_F(SuperviseTrain, HungRankIsNamedAndTheJobCompletes) {
  SKIP_WITHOUT_MPIRUN();
  const std::string launcher = mpirun2();
  const Supervised s =
      supervise("hang", "kill@step:3:rank:1,hang@step:5:rank:1",
                "--timeout-floor 4 --timeout-factor 10 --grace 3 --launcher '" + launcher + "'",
                train_args("hang", 12, false));
  ASSERT_EQ(s.code, 0) << s.log;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  test::expect_contains(s.log, fmt::format("supervise: hang: rank 1 on host {} silent", host));
  test::expect_contains(s.log, "in forward-backward of step 5 (timeout ");
  test::expect_contains(s.log, "rank 0 waits in collective");
  test::expect_contains(s.log, "supervise: attempt 1 failed after");
  ASSERT_GE(s.report["failures"].size(), 2u);
  EXPECT_EQ(s.report["failures"][0]["kind"], "crash") << s.report.dump(2);
  test::expect_contains(s.report["failures"][0]["cause"], "kill@step:3:rank:1");
  bool hang_seen = false;
  for (const json& f : s.report["failures"]) hang_seen |= f["kind"] == "hang";
  EXPECT_TRUE(hang_seen) << s.report.dump(2);
  expect_each_step_once("hang", 12);
  expect_adds_up(s.report);
}

TEST_F(SuperviseTrain, CorruptNewestCheckpointFallsBackToThePrevious) {
  reference(20, false);
  const Supervised s = supervise("corrupt", "corrupt-checkpoint@step:10,kill@step:12", "",
                                 train_args("corrupt", 20, false));
  ASSERT_EQ(s.code, 0) << s.log;
  ASSERT_EQ(s.report["attempts"].size(), 2u) << s.log;
  EXPECT_EQ(s.report["attempts"][1]["resumed_step"], 5) << s.report.dump(2);
  EXPECT_EQ(s.report["failures"][0]["recomputed_steps"], json::array({6, 7, 8, 9, 10, 11}))
      << s.report.dump(2);
  const std::string want = final_weights("ref20", 20), got = final_weights("corrupt", 20);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(got == want) << "final model.safetensors differs from the uninterrupted run's";
  expect_each_step_once("corrupt", 20);
  expect_adds_up(s.report);
}

TEST_F(SuperviseTrain, PreflightRefusesASlowRank) {
  SKIP_WITHOUT_MPIRUN();
  const Supervised s =
      supervise("preflight", "slow@preflight:rank:1:seconds:2",
                "--preflight --launcher '" + mpirun2() + "'", train_args("preflight", 12, false));
  EXPECT_EQ(s.code, 1) << s.log;
  std::string last = s.log;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_EQ(last.rfind("zaya: error: preflight failed (exit code 1): preflight: rank 1 (host ", 0),
            0u)
      << s.log;
  test::expect_contains(last, "the job was not started");
  EXPECT_FALSE(fs::exists(*dir_ / "preflight.jsonl"));
}

TEST_F(SuperviseTrain, AnomaliesAndRollbackAreInTheReport) {
  const Supervised s = supervise("nan", "nan@step:8,nan@step:9", "",
                                 train_args("nan", 20, false) + " --set train.anomaly_rollback=2");
  ASSERT_EQ(s.code, 0) << s.log;
  const json& r = s.report;
  EXPECT_EQ(r["restarts"], 0) << s.log;
  ASSERT_EQ(r["anomalies"].size(), 2u) << r.dump(2);
  EXPECT_EQ(r["anomalies"][0]["step"], 8);
  EXPECT_EQ(r["anomalies"][0]["kind"], "nonfinite");
  EXPECT_EQ(r["anomalies"][1]["step"], 9);
  ASSERT_EQ(r["rollbacks"].size(), 1u) << r.dump(2);
  EXPECT_EQ(r["rollbacks"][0]["to_step"], 5);
  EXPECT_EQ(r["steps_rolled_back"], 4);  // 6 and 7 done, 8 and 9 skipped, all undone
  EXPECT_EQ(r["steps_skipped"], 0);
  EXPECT_EQ(r["steps_kept"], 20);
  EXPECT_GT(r["anomaly_s"].get<double>(), 0);
  test::expect_contains(s.log, "supervise:   rollback: after step 9 to step 5 (attempt 1)");
  expect_each_step_once("nan", 20);
  expect_adds_up(r);
}

// Whether process `pid` runs (a zombie, ended but not yet reaped by its new parent, does not).
bool running(int64_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

TEST_F(SuperviseTrain, StaleRanksOfAnEarlierAttemptAreFenced) {
  SKIP_WITHOUT_MPIRUN();
  const std::string sup = *dir_ / "stale_sup";
  fs::create_directories(sup);
  std::ofstream(sup + "/attempt") << "1 running\n";
  // Attempt 1's job, outside any supervisor: rank 0 hangs at step 3, rank 1 waits for it.
  const std::string old_log = *dir_ / "stale_old.log";
  const std::string old =
      kEnv + " ZAYA_SUPERVISE_DIR=" + sup + " ZAYA_SUPERVISE_ATTEMPT=1 ZAYA_FAULT='hang@step:3' " +
      mpirun2() + " " + train_args("stale_old", 12, false) + " >" + old_log + " 2>&1 </dev/null &";
  ASSERT_EQ(std::system(old.c_str()), 0);
  std::vector<int64_t> pids;
  const auto t0 = std::chrono::steady_clock::now();
  while (pids.size() < 2 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 120) {
    pids.clear();
    for (int r = 0; r < 2; ++r) {
      const auto hb = parse_heartbeat(slurp(sup + fmt::format("/heartbeat_rank{:05d}.json", r)));
      if (hb && hb->step == 3 && hb->beat > 0) pids.push_back(hb->pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(pids.size(), 2u) << "attempt 1's ranks never reached step 3\n" << slurp(old_log);
  for (int64_t pid : pids) EXPECT_TRUE(running(pid));

  const Supervised s =
      supervise("stale", "", "--launcher '" + mpirun2() + "'", train_args("stale", 12, false));
  ASSERT_EQ(s.code, 0) << s.log;
  test::expect_contains(s.log, "supervise: attempt 2 started");
  for (int64_t pid : pids) {
    for (int i = 0; i < 100 && running(pid); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(running(pid)) << "rank pid " << pid << " of attempt 1 still runs";
  }
  const std::string old_out = slurp(old_log);
  test::expect_contains(old_out, "zaya: fenced: " + sup +
                                     "/attempt says attempt 2 has started (this rank is of "
                                     "attempt 1): exiting with code 75");
  EXPECT_FALSE(fs::exists(*dir_ / "stale_old_ckpt/step_00000012"));
  EXPECT_FALSE(final_weights("stale", 12).empty());
  expect_each_step_once("stale", 12);
}

}  // namespace
}  // namespace zaya
