// scripts/zaya-train.sbatch under a real Slurm cluster (label mpi; root: the hosts are namespaces
// of this machine made by scripts/multihost.sh, through tests/integration/multihost.h). The
// script is submitted from the login host zmh0 with `sbatch -N3 --wait`, as a user would: Slurm
// runs it on zmh1, where it starts `zaya supervise --launcher "srun --mpi=pmix …"`, which
// launches one rank on each of zmh1..zmh3 inside the allocation. Rank 1 is SIGKILLed at step 6
// (ZAYA_FAULT): the step ends, the supervisor starts a new one that resumes from the step-4
// checkpoint, and the job completes. Checked: sbatch's exit status and the job's final state
// (COMPLETED, exit 0:0); the script's header line (job id, nodes, the default run directory
// under the submit directory); the supervisor's goodput.json there (one crash naming the fault,
// two attempts, the job completed); the final weights byte-identical to an uninterrupted 3-node
// `srun` run; every step once in the metrics; no process left on any host; the teardown leaves
// nothing. ZAYA_TEST_SHOW_LOG=1 prints the job's output.
#include <gtest/gtest.h>

#include <chrono>
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
using test::MultiHost;
using test::ScratchDir;
using test::slurp;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// scripts/zaya-train.sbatch of this source tree (beside scripts/multihost.sh).
std::string sbatch_script() {
  return (fs::path(test::multihost_script()).parent_path() / "zaya-train.sbatch").string();
}

// step → how many times it is in the metrics file.
std::map<int64_t, int> step_counts(const std::string& path) {
  std::map<int64_t, int> seen;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    ++seen[json::parse(line).at("step").get<int64_t>()];
  return seen;
}

// No process but the cluster's daemons on any host (zmh0 included) once the job has ended: polled
// for up to 10 s, the time for exiting processes (a step daemon reports to the controller first).
void expect_no_job_process(const MultiHost& mh) {
  std::vector<std::string> all = mh.hosts;
  all.insert(all.begin(), "zmh0");
  const auto t0 = std::chrono::steady_clock::now();
  std::string left;
  do {
    left.clear();
    for (const std::string& h : all)
      for (const std::string& p : mh.job_processes(h)) left += h + ": " + p + "\n";
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (seconds_since(t0) < 10);
  EXPECT_EQ(left, "") << "processes left on the hosts after the job ended";
  std::printf("no process on any host (checked in %.1f s)\n", seconds_since(t0));
}

TEST(MultiHostSbatch, TheSbatchScriptRestartsAfterAKillAndCompletes) {
  SKIP_WITHOUT_MULTIHOST(true);
  const ScratchDir dir;
  const std::string shards = test::make_tiny_dataset(dir);
  const std::string config = dir / "run.toml";
  test::write_tiny_toml(config, shards, "micro_batch = 2\nlog_every = 100\neval_batches = 1\n",
                        "[optim]\nwarmup = 3\nlr = 0.003\nmin_lr = 0.0003\n"
                        "[checkpoint]\nkeep_last = 0\nasync = false\nresume = \"auto\"\n");
  const int steps = 10;
  // The `zaya train` flags after the config: run NAME's metrics and checkpoints.
  auto train_flags = [&](const std::string& name) {
    return " --set train.steps=" + std::to_string(steps) + " --set checkpoint.every=4" +
           " --set train.metrics=" + dir / (name + ".jsonl") +
           " --set checkpoint.dir=" + dir / (name + "_ckpt");
  };
  auto final_weights = [&](const std::string& name) {
    return slurp(dir / (name + "_ckpt") +
                 fmt::format("/step_{:08d}/model/model.safetensors", steps));
  };

  auto t0 = std::chrono::steady_clock::now();
  MultiHost mh(3, true);
  ASSERT_TRUE(mh.ok);
  std::printf("up and slurm-up: %.1f s\n", seconds_since(t0));

  // The uninterrupted run: one rank on each node, as the script launches them.
  const std::string env = "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60; ";
  t0 = std::chrono::steady_clock::now();
  {
    const std::string log = dir / "ref.log";
    const CliResult r =
        mh.exec("zmh0",
                env + "srun -N3 -n3 --mpi=pmix --kill-on-bad-exit=1 " + ZAYA_BINARY +
                    " train --config " + config + train_flags("ref") + " >" + log + " 2>&1",
                300);
    ASSERT_EQ(r.code, 0) << slurp(log) << r.err;
  }
  std::printf("uninterrupted srun run: %.1f s\n", seconds_since(t0));

  // The script as a user submits it, from the submit directory `dir`; the environment goes with
  // the job (sbatch's default --export=ALL) and on to the ranks.
  const std::string submit =
      env + "cd " + dir.path + " && ZAYA=" + ZAYA_BINARY +
      " ZAYA_SUPERVISE_ARGS='--poll 0.1 --restart-delay 0 --max-restarts 3 --grace 3'"
      " ZAYA_FAULT=kill@step:6:rank:1 sbatch -N3 --ntasks-per-node=1 --cpus-per-task=1 --time=10"
      " --wait --output=" +
      dir / "job-%j.out" + " " + sbatch_script() + " " + config + train_flags("sb");
  t0 = std::chrono::steady_clock::now();
  const CliResult sb = mh.exec("zmh0", submit, 300);
  const double job_s = seconds_since(t0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(sb.out, m, std::regex("Submitted batch job ([0-9]+)")))
      << sb.out << sb.err;
  const std::string id = m[1];
  const std::string out = slurp(dir / ("job-" + id + ".out"));
  std::printf("sbatch --wait (job %s): %.1f s, exit %d\n", id.c_str(), job_s, sb.code);
  if (std::getenv("ZAYA_TEST_SHOW_LOG")) std::printf("%s\n", out.c_str());
  ASSERT_EQ(sb.code, 0) << sb.out << sb.err << out;

  // The controller's record of the job.
  const CliResult job = mh.exec("zmh0", "scontrol show job " + id, 30);
  test::expect_contains(job.out, "JobState=COMPLETED");
  test::expect_contains(job.out, "ExitCode=0:0");
  test::expect_contains(job.out, "NumNodes=3");

  const std::string run = dir / ("zaya-run-" + id);
  test::expect_contains(out, "zaya-train: job " + id + ", 3 node(s) (zmh[1-3]), 3 rank(s), " +
                                 "1 thread(s) each, run dir " + run + "\n");
  test::expect_contains(out,
                        "--launcher \"srun --mpi=pmix --kill-on-bad-exit=1 -N 3 -n 3 -c 1\" "
                        "--min-hosts 2 --dir " +
                            run + "/supervise");

  const std::string rep = slurp(run + "/supervise/goodput.json");
  ASSERT_FALSE(rep.empty()) << "no goodput.json in " << run << "/supervise\n" << out;
  const json report = json::parse(rep);
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

  const std::string want = final_weights("ref");
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(final_weights("sb") == want)
      << "final model.safetensors differs from the uninterrupted run's";
  const std::map<int64_t, int> seen = step_counts(dir / "sb.jsonl");
  EXPECT_EQ(seen.size(), size_t(steps));
  for (int s = 1; s <= steps; ++s) EXPECT_EQ(seen.count(s) ? seen.at(s) : 0, 1) << "step " << s;

  expect_no_job_process(mh);
  t0 = std::chrono::steady_clock::now();
  const CliResult d = mh.down();
  EXPECT_EQ(d.code, 0) << d.out << d.err;
  std::printf("teardown: %.1f s\n", seconds_since(t0));
  const CliResult c = MultiHost::script("check-clean", 60);
  EXPECT_EQ(c.code, 0) << c.out << c.err;
}

}  // namespace
}  // namespace zaya
