// scripts/zaya-train.sbatch under a real Slurm cluster (label mpi; root: the hosts are namespaces
// of this machine made by scripts/multihost.sh, through tests/integration/multihost.h). The
// script is submitted from the login host zmh0 with `sbatch -N3 --wait`, as a user would: Slurm
// runs it on zmh1, where it starts `zaya supervise --launcher "srun --mpi=pmix …"`, which
// launches one rank on each of zmh1..zmh3 inside the allocation.
// (a) Rank 1 SIGKILLed at step 6 (ZAYA_FAULT): the step ends, the supervisor starts a new one that
//     resumes from the step-4 checkpoint, and the job completes. Checked: sbatch's exit status and
//     the job's final state (COMPLETED, exit 0:0); the script's header (job id, nodes, the default
//     run directory under the submit directory); the supervisor's goodput.json there (one crash
//     naming the fault, two attempts, the job completed); the final weights byte-identical to an
//     uninterrupted 3-node `srun` run; every step once in the metrics.
// (b) zmh3's link taken down mid-run: the supervisor names zmh3 unreachable and restarts inside
//     the same allocation on zmh1 and zmh2 (`srun --exclude=zmh3 … --overlap -N 2 -n 2`: the
//     failed step keeps its CPUs there) at the same global batch: every step's loss within 1e-5
//     of the uninterrupted 3-node run, every step once; the run directory ZAYA_RUN_DIR names.
//     The job ends before Slurm marks zmh3 down (SlurmdTimeout), so --no-kill is not exercised.
// Both: no process left on any host, and the teardown leaves nothing. ZAYA_TEST_SHOW_LOG=1 prints
// the jobs' output.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cli_util.h"
#include "integration/multihost.h"
#include "test_util.h"
#include "train/tiny_data.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::expect_no_job_process;
using test::kJobEnv;
using test::kMpirunForward;
using test::MultiHost;
using test::ScratchDir;
using test::seconds_since;
using test::slurp;
using test::without_startup_crashes;

// scripts/zaya-train.sbatch of this source tree (beside scripts/multihost.sh).
std::string sbatch_script() {
  return (fs::path(test::multihost_script()).parent_path() / "zaya-train.sbatch").string();
}

// The metrics of a run: step → loss, and step → how many times it is there.
struct Metrics {
  std::map<int64_t, double> loss;
  std::map<int64_t, int> count;
};
Metrics read_metrics(const std::string& path) {
  Metrics m;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    const json j = json::parse(line);
    const int64_t step = j.at("step").get<int64_t>();
    ++m.count[step];
    m.loss[step] = j.at("loss").is_number() ? j.at("loss").get<double>() : NAN;
  }
  return m;
}

class MultiHostSbatch : public testing::Test {
 protected:
  // One thread per rank (2 cores shared by every host); a peer that stops answering fails a
  // collective in 60 s (the supervisor's timeouts are tighter).
  const std::string env_ = "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60; ";

  void SetUp() override {
    const std::string shards = test::make_tiny_dataset(dir_);
    // 2 rows per rank on 3 ranks: a global batch of 6 rows, which 2 ranks share as 3 each.
    test::write_tiny_toml(config_, shards,
                          "micro_batch = 2\ngrad_accum = 1\nlog_every = 100\neval_batches = 1\n",
                          "[optim]\nwarmup = 3\nlr = 0.003\nmin_lr = 0.0003\n"
                          "[checkpoint]\nkeep_last = 0\nasync = false\nresume = \"auto\"\n");
  }

  // The `zaya train` flags after the config: run NAME's metrics and checkpoints.
  std::string train_flags(const std::string& name, int steps, int every) const {
    return " --set train.steps=" + std::to_string(steps) +
           " --set checkpoint.every=" + std::to_string(every) +
           " --set train.metrics=" + dir_ / (name + ".jsonl") +
           " --set checkpoint.dir=" + dir_ / (name + "_ckpt");
  }

  // An uninterrupted run from the login host: one rank on each node, as the script launches them.
  void reference(const MultiHost& mh, const std::string& name, int steps, int every) const {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string log = dir_ / (name + ".log");
    const CliResult r = mh.exec("zmh0",
                                env_ + "srun -N3 -n3 --mpi=pmix --kill-on-bad-exit=1 " +
                                    ZAYA_BINARY + " train --config " + config_ +
                                    train_flags(name, steps, every) + " >" + log + " 2>&1",
                                300);
    ASSERT_EQ(r.code, 0) << slurp(log) << r.err;
    std::printf("uninterrupted srun run: %.1f s\n", seconds_since(t0));
  }

  struct Job {
    int code = -1;     // sbatch's exit status: the job's
    std::string id;    // the job id
    std::string out;   // the job's output file
    std::string show;  // `scontrol show job ID` after it ended
  };
  // Submits the script as a user does, from the submit directory dir_, with `vars` (K=V words)
  // in its environment, which goes with the job (sbatch's default --export=ALL) and on to the
  // ranks; waits for the job to end.
  // `supervise` adds to the supervisor's flags (ZAYA_SUPERVISE_ARGS).
  Job submit(const MultiHost& mh, const std::string& vars, const std::string& supervise,
             const std::string& train) const {
    const std::string cmd =
        env_ + "cd " + dir_.path + " && ZAYA=" + ZAYA_BINARY +
        " ZAYA_SUPERVISE_ARGS='--poll 0.1 --restart-delay 0 --max-restarts 3 --grace 3" +
        supervise + "' " + vars +
        " sbatch -N3 --ntasks-per-node=1 --cpus-per-task=1 --time=10 --wait --output=" +
        dir_ / "job-%j.out" + " " + sbatch_script() + " " + config_ + train;
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult sb = mh.exec("zmh0", cmd, 400);
    Job job;
    job.code = sb.code;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(sb.out, m, std::regex("Submitted batch job ([0-9]+)")))
        << sb.out << sb.err;
    if (m.empty()) return job;
    job.id = m[1];
    job.out = slurp(dir_ / ("job-" + job.id + ".out"));
    std::printf("sbatch --wait (job %s): %.1f s, exit %d\n", job.id.c_str(), seconds_since(t0),
                sb.code);
    if (std::getenv("ZAYA_TEST_SHOW_LOG")) std::printf("%s\n", job.out.c_str());
    job.show = mh.exec("zmh0", "scontrol show job " + job.id, 30).out;
    return job;
  }

  std::string final_weights(const std::string& name, int step) const {
    return slurp(dir_ / (name + "_ckpt") +
                 fmt::format("/step_{:08d}/model/model.safetensors", step));
  }

  static void expect_each_step_once(const Metrics& m, int steps) {
    EXPECT_EQ(m.count.size(), size_t(steps));
    for (int s = 1; s <= steps; ++s)
      EXPECT_EQ(m.count.count(s) ? m.count.at(s) : 0, 1) << "step " << s;
  }

  static void expect_clean(MultiHost& mh) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult d = mh.down();
    EXPECT_EQ(d.code, 0) << d.out << d.err;
    std::printf("teardown: %.1f s\n", seconds_since(t0));
    const CliResult c = MultiHost::script("check-clean", 60);
    EXPECT_EQ(c.code, 0) << c.out << c.err;
  }

  const ScratchDir dir_;
  const std::string config_ = dir_ / "run.toml";
};

TEST_F(MultiHostSbatch, AKilledRankIsRestartedAndTheJobCompletes) {
  SKIP_WITHOUT_MULTIHOST(true);
  const auto t0 = std::chrono::steady_clock::now();
  MultiHost mh(3, true);
  ASSERT_TRUE(mh.ok);
  std::printf("up and slurm-up: %.1f s\n", seconds_since(t0));
  const int steps = 10;
  reference(mh, "ref", steps, 4);
  const Job job = submit(mh, "ZAYA_FAULT=kill@step:6:rank:1", "", train_flags("sb", steps, 4));
  ASSERT_EQ(job.code, 0) << job.out;
  test::expect_contains(job.show, "JobState=COMPLETED");
  test::expect_contains(job.show, "ExitCode=0:0");
  test::expect_contains(job.show, "NumNodes=3");

  // The default run directory: under the submit directory, named by the job id.
  const std::string run = dir_ / ("zaya-run-" + job.id);
  test::expect_contains(job.out, "zaya-train: job " + job.id +
                                     ", 3 node(s) (zmh[1-3]), 3 rank(s), 1 thread(s) each, "
                                     "run dir " +
                                     run + "\n");
  test::expect_contains(
      job.out,
      "--launcher \"srun --mpi=pmix --kill-on-bad-exit=1 --overlap -N 3 -n 3 -c 1\" "
      "--min-hosts 2 --dir " +
          run + "/supervise");

  const std::string rep = slurp(run + "/supervise/goodput.json");
  ASSERT_FALSE(rep.empty()) << "no goodput.json in " << run << "/supervise\n" << job.out;
  const json report = without_startup_crashes(json::parse(rep));
  EXPECT_EQ(report["outcome"], "completed") << report.dump(2);
  EXPECT_EQ(report["restarts"], 1) << report.dump(2);
  ASSERT_EQ(report["failures"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["failures"][0]["kind"], "crash") << report.dump(2);
  test::expect_contains(report["failures"][0]["cause"], "kill@step:6:rank:1");
  // srun's --kill-on-bad-exit ended the step, not the other ranks' collective timeout (60 s).
  EXPECT_LT(report["failures"][0]["total_s"].get<double>(), 30) << report.dump(2);
  ASSERT_EQ(report["attempts"].size(), 2u) << report.dump(2);
  EXPECT_EQ(report["attempts"][0]["hosts"], json::array({"zmh1", "zmh2", "zmh3"}));
  EXPECT_EQ(report["attempts"][1]["resumed_step"], 4) << report.dump(2);
  EXPECT_EQ(report["attempts"][1]["outcome"], "completed") << report.dump(2);

  const std::string want = final_weights("ref", steps);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(final_weights("sb", steps) == want)
      << "final model.safetensors differs from the uninterrupted run's";
  expect_each_step_once(read_metrics(dir_ / "sb.jsonl"), steps);
  expect_no_job_process(mh);
  expect_clean(mh);
}

// zmh3's link taken down mid-run (once its rank has finished step 5): the supervisor localises
// the fault to zmh3 and restarts on zmh1 and zmh2 inside the allocation (srun --exclude=zmh3
// -N 2 -n 2) at the same global batch; the run directory is the one ZAYA_RUN_DIR names.
TEST_F(MultiHostSbatch, ALostNodeEndsInARestartOnTheNodesLeft) {
  SKIP_WITHOUT_MULTIHOST(true);
  MultiHost mh(3, true);
  ASSERT_TRUE(mh.ok);
  const int steps = 12;
  reference(mh, "l_ref", steps, 2);
  const std::string run = dir_ / "lost_node_run";
  Job job;
  std::thread submitter([&] {
    job = submit(mh, "ZAYA_RUN_DIR=" + run, " --timeout step=5", train_flags("l_sb", steps, 2));
  });
  const std::string hb = run + "/supervise/heartbeat_rank00002.json";
  const auto t0 = std::chrono::steady_clock::now();
  std::string cut;
  while (cut.empty() && seconds_since(t0) < 300) {
    const json j = json::parse(slurp(hb), nullptr, false);
    // In whichever attempt gets there first (an earlier one may crash at start-up: multihost.h).
    if (j.is_object() && j.value("last_step", 0) >= 5) {
      cut = j.value("host", std::string("zmh3"));
      mh.link(cut, false);
      std::printf("link of %s down after %.1f s\n", cut.c_str(), seconds_since(t0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  submitter.join();
  if (!cut.empty()) mh.link(cut, true);
  ASSERT_EQ(cut, "zmh3") << "rank 2 never reached step 5 on zmh3\n" << job.out;
  ASSERT_EQ(job.code, 0) << job.out;
  test::expect_contains(job.show, "ExitCode=0:0");
  test::expect_contains(job.out, "run dir " + run + "\n");
  test::expect_contains(job.out, "host zmh3 (10.78.0.13) unreachable");
  test::expect_contains(
      job.out,
      "supervise: elastic restart on the 2 host(s) that answer (zmh1, zmh2): "
      "srun --exclude=zmh3 --mpi=pmix --kill-on-bad-exit=1 --overlap -N 2 -n 2 -c 1");
  const json report =
      without_startup_crashes(json::parse(slurp(run + "/supervise/goodput.json"), nullptr, false));
  ASSERT_TRUE(report.is_object()) << job.out;
  EXPECT_EQ(report["outcome"], "completed") << report.dump(2);
  EXPECT_EQ(report["unreachable_hosts"], json::array({"zmh3 (10.78.0.13)"})) << report.dump(2);
  ASSERT_EQ(report["attempts"].size(), 2u) << report.dump(2);
  EXPECT_EQ(report["attempts"][1]["hosts"], json::array({"zmh1", "zmh2"})) << report.dump(2);
  // The same global batch on 2 ranks: the uninterrupted run's losses.
  const Metrics want = read_metrics(dir_ / "l_ref.jsonl"), got = read_metrics(dir_ / "l_sb.jsonl");
  double worst = 0;
  for (const auto& [step, loss] : got.loss) {
    ASSERT_TRUE(want.loss.count(step)) << step;
    const double rel = std::fabs(loss - want.loss.at(step)) / std::fabs(want.loss.at(step));
    EXPECT_LE(rel, 1e-5) << "step " << step << ": " << loss << " vs " << want.loss.at(step);
    worst = std::max(worst, rel);
  }
  std::printf("3 nodes, then 2 after zmh3's link went down, vs 3 nodes: max rel loss diff %.3g\n",
              worst);
  expect_each_step_once(got, steps);
  expect_no_job_process(mh);
  expect_clean(mh);
}

}  // namespace
}  // namespace zaya
