// Training across hosts (label mpi; root: the hosts are namespaces of this machine made by
// scripts/multihost.sh, through tests/integration/multihost.h). mpirun and srun run on the login
// host zmh0, one rank on each compute host zmh1..zmh3, over TCP on the hosts' bridge.
// (a) ZeRO-1 on 3 hosts equals one process: the global batch of 12 rows (micro-batch × 2
//     micro-batches × ranks) per step, every step's loss and the final weights within 1e-5
//     relative over 12 steps, as on one host (tests/integration/test_zero1_mpirun.cpp), with
//     ZeRO-1 buckets of one layer each, reduced as the backward finishes them. Ranks 1 and 2 are
//     slowed for 3 steps each (which changes no number): the log names each as a straggler with
//     its host's name (zmh2, zmh3).
// (b) Its step-6 checkpoint resumes on 2 hosts (resharded from 3 to 2 ranks) and continues with
//     the 3-host run's losses and final weights within 1e-5.
// (c) `zaya supervise -- mpirun …` over 3 hosts with rank 1 SIGKILLed at step 6: the attempt
//     ends, the job restarts from the step-4 checkpoint and completes with final weights
//     byte-identical to an uninterrupted 3-host run, every step once in the metrics, and no
//     process left on any host. The ranks' heartbeats name their hosts.
// (d) The same under a real Slurm cluster (munged, slurmctld on zmh0, a slurmd per host):
//     `zaya supervise --launcher "srun -N3 -n3 --mpi=pmix"`.
// (e) The harness itself: hostnames, a link taken down and back, a process in a host killed by
//     the teardown, an `up` interrupted half-way that leaves nothing.
// Every case ends with the teardown and `multihost.sh check-clean`: nothing of the hosts is left.
// ZAYA_TEST_SHOW_LOG=1 prints the supervised runs' logs.
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
#include "model/model.h"
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

class MultiHostTrain : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir;
    const std::string shards = test::make_tiny_dataset(*dir_);
    test::write_tiny_toml(*dir_ / "run.toml", shards,
                          "grad_accum = 2\nlog_every = 100\neval_batches = 1\n"
                          "straggler_steps = 3\nstraggler_factor = 3\n",
                          "[optim]\nwarmup = 3\nlr = 0.003\nmin_lr = 0.0003\n"
                          "[checkpoint]\nkeep_last = 0\nasync = false\nresume = \"auto\"\n");
  }
  static void TearDownTestSuite() { delete dir_; }

  // The `zaya train` words of run NAME on `ranks` ranks (the global batch stays 12 rows).
  static std::string train_args(const std::string& name, int ranks, int steps,
                                const std::vector<std::string>& sets) {
    std::string a = std::string(ZAYA_BINARY) + " train --config " + *dir_ / "run.toml" +
                    " --set train.steps=" + std::to_string(steps) +
                    " --set train.micro_batch=" + std::to_string(6 / ranks) +
                    " --set train.metrics=" + *dir_ / (name + ".jsonl") +
                    " --set checkpoint.dir=" + *dir_ / (name + "_ckpt");
    for (const std::string& s : sets) a += " --set " + s;
    return a;
  }

  // mpirun from the login host over the first `ranks` compute hosts, one rank each.
  static std::string mpirun(const MultiHost& mh, int ranks) {
    return std::string(ZAYA_MPIRUN) + " -np " + std::to_string(ranks) + " --hostfile " +
           mh.hostfile() + kMpirunForward;
  }

  // Runs `cmd` on the login host (or, without `mh`, here), output to NAME.log; the log.
  static std::string run(const MultiHost* mh, const std::string& name, const std::string& cmd,
                         const std::string& faults = "") {
    const std::string log = *dir_ / (name + ".log");
    const std::string line = kJobEnv +
                             (faults.empty() ? "" : "export ZAYA_FAULT='" + faults + "'; ") + cmd +
                             " >" + log + " 2>&1";
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = mh ? mh->exec("zmh0", line, 300) : test::run_shell(line, 300);
    std::printf("%s: %.1f s, exit %d\n", name.c_str(), seconds_since(t0), r.code);
    EXPECT_EQ(r.code, 0) << cmd << "\n" << slurp(log) << r.err;
    return slurp(log);
  }

  // step → loss of a metrics file.
  static std::map<int64_t, double> losses(const std::string& name) {
    std::map<int64_t, double> out;
    std::ifstream f(*dir_ / (name + ".jsonl"));
    for (std::string line; std::getline(f, line);) {
      const json j = json::parse(line);
      const json& loss = j.at("loss");  // NaN is written as null
      out[j.at("step").get<int64_t>()] = loss.is_number() ? loss.get<double>() : NAN;
    }
    return out;
  }

  // Largest relative loss difference over the steps of `b` (each must be in `a`, ≤ 1e-5).
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

  // Largest |Δw| / max(|w|, 1) over the final weights of two runs (≤ 1e-5).
  static double max_weight_diff(const std::string& a, const std::string& b, int step) {
    const std::string at = fmt::format("/step_{:08d}/model", step);
    const Model ma = Model::load_dir(*dir_ / (a + "_ckpt") + at);
    const Model mb = Model::load_dir(*dir_ / (b + "_ckpt") + at);
    EXPECT_EQ(ma.layout().total, mb.layout().total);
    double worst = 0;
    for (size_t i = 0; i < ma.layout().total; ++i) {
      const double x = ma.params()[i], y = mb.params()[i];
      worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(x)));
    }
    EXPECT_LE(worst, 1e-5) << a << " vs " << b << " final weights";
    return worst;
  }

  static std::string final_weights(const std::string& name, int step) {
    return slurp(*dir_ / (name + "_ckpt") +
                 fmt::format("/step_{:08d}/model/model.safetensors", step));
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

  struct Supervised {
    int code = -1;
    std::string log;
    json report;
  };
  // `zaya supervise --launcher LAUNCHER -- train words` on the login host, with ZAYA_FAULT.
  static Supervised supervise(const MultiHost& mh, const std::string& name,
                              const std::string& launcher, const std::string& job,
                              const std::string& faults) {
    const std::string cmd = std::string(ZAYA_BINARY) + " supervise --dir " +
                            *dir_ / (name + "_sup") +
                            " --poll 0.1 --restart-delay 0 --max-restarts 3 --grace 3 --launcher " +
                            test::shell_quote(launcher) + " -- " + job;
    Supervised s;
    const std::string log = *dir_ / (name + ".log");
    const std::string line =
        kJobEnv + "export ZAYA_FAULT='" + faults + "'; " + cmd + " >" + log + " 2>&1";
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = mh.exec("zmh0", line, 300);
    s.code = r.code;
    s.log = slurp(log) + r.err;
    std::printf("%s: %.1f s, exit %d\n", name.c_str(), seconds_since(t0), s.code);
    if (std::getenv("ZAYA_TEST_SHOW_LOG")) std::printf("%s\n", s.log.c_str());
    const std::string rep = slurp(*dir_ / (name + "_sup/goodput.json"));
    if (!rep.empty()) s.report = without_startup_crashes(json::parse(rep));
    return s;
  }

  // The hosts of the ranks' last heartbeats in a supervise directory, by rank.
  static std::vector<std::string> heartbeat_hosts(const std::string& name, int ranks) {
    std::vector<std::string> out;
    for (int r = 0; r < ranks; ++r) {
      const std::string text =
          slurp(*dir_ / (name + "_sup") + fmt::format("/heartbeat_rank{:05d}.json", r));
      out.push_back(text.empty() ? "" : json::parse(text).value("host", ""));
    }
    return out;
  }

  // Tears down and checks that nothing is left.
  static void expect_clean(MultiHost& mh) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult d = mh.down();
    EXPECT_EQ(d.code, 0) << d.out << d.err;
    std::printf("teardown: %.1f s\n", seconds_since(t0));
    const CliResult c = MultiHost::script("check-clean", 60);
    EXPECT_EQ(c.code, 0) << c.out << c.err;
  }

  static ScratchDir* dir_;
};

ScratchDir* MultiHostTrain::dir_ = nullptr;

// Whether process `pid` runs (a zombie, ended but not yet reaped by its new parent, does not).
bool running(int pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

TEST_F(MultiHostTrain, ZeroOneOnThreeHostsEqualsOneProcessAndResumesOnTwo) {
  SKIP_WITHOUT_MULTIHOST(false);
  const auto t0 = std::chrono::steady_clock::now();
  MultiHost mh(3);
  ASSERT_TRUE(mh.ok);
  std::printf("up: %.1f s\n", seconds_since(t0));

  run(nullptr, "one", train_args("one", 1, 12, {}));
  // Ranks 1 and 2 (hosts zmh2, zmh3) sleep in forward-backward for 3 steps each.
  std::string slow;
  for (int step : {2, 3, 4}) slow += fmt::format("slow@step:{}:rank:1:seconds:0.3,", step);
  for (int step : {7, 8, 9}) slow += fmt::format("slow@step:{}:rank:2:seconds:0.3,", step);
  slow.pop_back();
  // Buckets of about 26 elements (one per layer): their reduce-scatters start during the backward.
  const std::vector<std::string> sets = {"checkpoint.every=6", "optim.zero_bucket_mb=0.0001"};
  const std::string three =
      run(&mh, "three", mpirun(mh, 3) + train_args("three", 3, 12, sets), slow);
  test::expect_contains(three, "3 rank(s) (mpi)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(three, m, std::regex("([0-9]+) bucket\\(s\\) reduced"))) << three;
  EXPECT_GT(std::stoi(m[1]), 2) << three;
  std::printf("3 hosts: %s ZeRO-1 buckets reduced during the backward\n", m[1].str().c_str());
  test::expect_contains(three, "straggler: rank 1 (zmh2)");
  test::expect_contains(three, "straggler: rank 2 (zmh3)");
  {  // the metrics name every rank's host
    std::ifstream f(*dir_ / "three.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(f, line));
    EXPECT_EQ(json::parse(line).at("rank_hosts"),
              json(std::vector<std::string>{"zmh1", "zmh2", "zmh3"}))
        << line;
  }

  const std::string resume = "checkpoint.resume=" + *dir_ / "three_ckpt/step_00000006";
  const std::string two =
      run(&mh, "three_to_two", mpirun(mh, 2) + train_args("three_to_two", 2, 12, {resume}));
  test::expect_contains(two, "2 rank(s) (mpi)");
  test::expect_contains(two, "resharded from 3 to 2 ranks");

  const double d3 = max_loss_diff("one", "three", 12);
  const double w3 = max_weight_diff("one", "three", 12);
  const double d2 = max_loss_diff("three", "three_to_two", 6);
  const double w2 = max_weight_diff("three", "three_to_two", 12);
  std::printf("3 hosts vs 1 process: max rel loss diff %.3g, final weights %.3g\n", d3, w3);
  std::printf("3 → 2 hosts resumed at step 6 vs 3 hosts: max rel loss diff %.3g, weights %.3g\n",
              d2, w2);
  expect_clean(mh);
}

TEST_F(MultiHostTrain, SupervisedMpirunRestartsAfterAKillAndLeavesNoProcess) {
  SKIP_WITHOUT_MULTIHOST(false);
  MultiHost mh(3);
  ASSERT_TRUE(mh.ok);
  const std::vector<std::string> sets = {"checkpoint.every=4"};
  run(&mh, "mpi_ref", mpirun(mh, 3) + train_args("mpi_ref", 3, 10, sets));
  const Supervised s = supervise(mh, "mpi_kill", mpirun(mh, 3), train_args("mpi_kill", 3, 10, sets),
                                 "kill@step:6:rank:1");
  ASSERT_EQ(s.code, 0) << s.log;
  expect_no_job_process(mh);
  EXPECT_EQ(s.report["restarts"], 1) << s.log;
  ASSERT_GE(s.report["failures"].size(), 1u) << s.log;
  EXPECT_EQ(s.report["failures"][0]["kind"], "crash") << s.report.dump(2);
  // The launcher ended the attempt, not the other ranks' collective timeout (60 s).
  EXPECT_LT(s.report["failures"][0]["total_s"].get<double>(), 30) << s.report.dump(2);
  test::expect_contains(s.report["failures"][0]["cause"], "kill@step:6:rank:1");
  ASSERT_EQ(s.report["attempts"].size(), 2u) << s.log;
  EXPECT_EQ(s.report["attempts"][1]["resumed_step"], 4) << s.report.dump(2);
  const std::string want = final_weights("mpi_ref", 10), got = final_weights("mpi_kill", 10);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(got == want) << "final model.safetensors differs from the uninterrupted run's";
  expect_each_step_once("mpi_kill", 10);
  EXPECT_EQ(heartbeat_hosts("mpi_kill", 3), (std::vector<std::string>{"zmh1", "zmh2", "zmh3"}));
  expect_clean(mh);
}

TEST_F(MultiHostTrain, SupervisedSrunOnSlurmRestartsAfterAKillAndLeavesNoProcess) {
  SKIP_WITHOUT_MULTIHOST(true);
  const auto t0 = std::chrono::steady_clock::now();
  MultiHost mh(3, true);
  ASSERT_TRUE(mh.ok);
  std::printf("up and slurm-up: %.1f s\n", seconds_since(t0));
  // --kill-on-bad-exit: Slurm ends the step when a task dies; without it the other ranks wait
  // out ZAYA_DIST_TIMEOUT in their collective before the attempt ends.
  const std::string srun = "srun -N3 -n3 --mpi=pmix --kill-on-bad-exit=1";
  const std::vector<std::string> sets = {"checkpoint.every=4"};
  const std::string ref = run(&mh, "srun_ref", srun + " " + train_args("srun_ref", 3, 10, sets));
  test::expect_contains(ref, "3 rank(s) (mpi)");
  const Supervised s =
      supervise(mh, "srun_kill", srun, train_args("srun_kill", 3, 10, sets), "kill@step:6:rank:1");
  ASSERT_EQ(s.code, 0) << s.log;
  expect_no_job_process(mh);
  EXPECT_EQ(s.report["restarts"], 1) << s.log;
  ASSERT_GE(s.report["failures"].size(), 1u) << s.log;
  EXPECT_EQ(s.report["failures"][0]["kind"], "crash") << s.report.dump(2);
  // The launcher ended the attempt, not the other ranks' collective timeout (60 s).
  EXPECT_LT(s.report["failures"][0]["total_s"].get<double>(), 30) << s.report.dump(2);
  ASSERT_EQ(s.report["attempts"].size(), 2u) << s.log;
  EXPECT_EQ(s.report["attempts"][1]["resumed_step"], 4) << s.report.dump(2);
  const std::string want = final_weights("srun_ref", 10), got = final_weights("srun_kill", 10);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(got == want) << "final model.safetensors differs from the uninterrupted run's";
  expect_each_step_once("srun_kill", 10);
  EXPECT_EQ(heartbeat_hosts("srun_kill", 3), (std::vector<std::string>{"zmh1", "zmh2", "zmh3"}));
  expect_clean(mh);
}

// The report filter of multihost.h: an attempt that crashed before its first step goes, with its
// failure; the crash the test caused (after steps) and the completed attempt stay.
TEST(MultiHostReport, StartupCrashesAreLeftOut) {
  const json r = without_startup_crashes(json::parse(R"({
    "restarts": 2,
    "attempts": [{"attempt": 1, "outcome": "crash", "steps": 0, "exit": "exit code 143"},
                 {"attempt": 2, "outcome": "crash", "steps": 6, "exit": "exit code 137"},
                 {"attempt": 3, "outcome": "completed", "steps": 6, "resumed_step": 4}],
    "failures": [{"attempt": 1, "kind": "crash"}, {"attempt": 2, "kind": "crash"}]})"));
  ASSERT_EQ(r["attempts"].size(), 2u) << r.dump(2);
  EXPECT_EQ(r["attempts"][0]["attempt"], 2);
  EXPECT_EQ(r["attempts"][1]["resumed_step"], 4);
  ASSERT_EQ(r["failures"].size(), 1u) << r.dump(2);
  EXPECT_EQ(r["failures"][0]["attempt"], 2);
  EXPECT_EQ(r["restarts"], 1);
  // Nothing to leave out: the report as it was.
  const json plain = json::parse(R"({"restarts": 0, "attempts": [{"attempt": 1,
    "outcome": "completed", "steps": 3}], "failures": []})");
  EXPECT_EQ(without_startup_crashes(plain), plain);
}

TEST_F(MultiHostTrain, HarnessHostsLinksAndTeardown) {
  SKIP_WITHOUT_MULTIHOST(false);
  {
    MultiHost mh(2);
    ASSERT_TRUE(mh.ok);
    EXPECT_EQ(mh.hosts, (std::vector<std::string>{"zmh1", "zmh2"}));
    for (const char* h : {"zmh0", "zmh1", "zmh2"}) {
      const CliResult r = mh.exec(h, "hostname", 30);
      EXPECT_EQ(r.out, std::string(h) + "\n") << r.err;
    }
    EXPECT_EQ(slurp(mh.hostfile()), "zmh1 slots=1\nzmh2 slots=1\n");
    // A TCP connection to a closed port of zmh2: refused at once over a working link; with the
    // link down nothing answers, and it times out.
    const std::string knock = "timeout 2 bash -c 'echo > /dev/tcp/10.78.0.12/9'";
    CliResult r = mh.exec("zmh1", knock, 30);
    EXPECT_EQ(r.code, 1) << "link up: " << r.err;
    mh.link("zmh2", false);
    r = mh.exec("zmh1", knock, 30);
    EXPECT_EQ(r.code, 124) << "link down: " << r.err;
    mh.link("zmh2", true);
    // (the bridge port learns again within a second or so)
    for (int i = 0; i < 20 && (r = mh.exec("zmh1", knock, 30)).code != 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_EQ(r.code, 1) << "link up again: " << r.err;
    // A process left running in a host is found there and ended by the teardown.
    EXPECT_TRUE(mh.job_processes("zmh1").empty());
    r = mh.exec("zmh1", "setsid sleep 300 >/dev/null 2>&1 & echo $!", 30);
    const int pid = std::atoi(r.out.c_str());
    ASSERT_GT(pid, 0) << r.out << r.err;
    const std::vector<int> p = mh.pids("zmh1");
    EXPECT_NE(std::find(p.begin(), p.end(), pid), p.end());
    EXPECT_TRUE(mh.pids("zmh2").empty());
    expect_clean(mh);
    EXPECT_FALSE(running(pid)) << "sleep survived the teardown";
  }
  // An `up` interrupted while it makes the hosts tears down what it made.
  const CliResult r = test::run_shell(
      test::multihost_script() +
          " up 16 >/dev/null 2>&1 & p=$!; for i in $(seq 2000); do "
          "ip netns list | grep -q '^zmh3' && break; sleep 0.01; done; kill -TERM $p; wait $p",
      120);
  EXPECT_EQ(r.code, 130) << "up was not interrupted: " << r.out << r.err;
  const CliResult c = MultiHost::script("check-clean", 60);
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  if (c.code != 0) MultiHost::script("down", 120);  // leave the machine clean all the same
}

}  // namespace
}  // namespace zaya
