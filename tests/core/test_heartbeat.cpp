// What a supervised job writes for `zaya supervise` (docs/fault-tolerance.md): with
// ZAYA_SUPERVISE_DIR set, `zaya train` keeps a fixed-size heartbeat record per rank (ending in
// section "done"), appends its events (start, one per step, done), records fired faults once per
// job, and a failing run leaves its error message in error_rank00000.txt.
#include <filesystem>
#include <fstream>

#include "cli_util.h"
#include "test_util.h"
#include "train/tiny_data.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

class SupervisedJob : public testing::Test {
 protected:
  void SetUp() override {
    const std::string shards = make_tiny_dataset(dir);
    fs::create_directories(dir / "sup");
    write_tiny_toml(dir / "run.toml", shards,
                    "micro_batch = 2\nsteps = 6\nlog_every = 100\neval_batches = 1\n",
                    "[checkpoint]\ndir = \"" + dir / "ckpt" + "\"\nevery = 3\n");
  }
  CliResult train(const std::string& env, const std::string& extra = "") {
    const std::string cmd = "ZAYA_SUPERVISE_DIR=" + dir / "sup" + " ZAYA_SUPERVISE_ATTEMPT=2 " +
                            env + " " + ZAYA_BINARY + " train --config " + dir / "run.toml" + " " +
                            extra + " >" + dir / "out" + " 2>" + dir / "err";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.crashed = WIFSIGNALED(status) || r.code > 125;  // the shell reports a signal as 128 + it
    r.err = slurp(dir / "err");
    return r;
  }
  std::vector<nlohmann::json> events() {
    std::vector<nlohmann::json> out;
    std::ifstream f(dir / "sup/events.jsonl");
    for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  ScratchDir dir;
};

TEST_F(SupervisedJob, WritesHeartbeatsAndEvents) {
  const CliResult r = train("ZAYA_FAULT=slow@step:2:seconds:0.01");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string beat = slurp(dir / "sup/heartbeat_rank00000.json");
  ASSERT_EQ(beat.size(), 512u);
  EXPECT_EQ(beat.back(), '\n');
  const nlohmann::json hb = nlohmann::json::parse(beat);
  EXPECT_EQ(hb["section"], "done");
  EXPECT_EQ(hb["attempt"], 2);
  EXPECT_EQ(hb["rank"], 0);
  EXPECT_EQ(hb["world"], 1);
  EXPECT_EQ(hb["step"], 6);
  EXPECT_EQ(hb["last_step"], 6);
  EXPECT_GT(hb["collectives"].get<int64_t>(), 6);  // at least one per step
  EXPECT_GT(hb["max_step_s"].get<double>(), 0.0);
  EXPECT_GT(hb["max_checkpoint_s"].get<double>(), 0.0);
  EXPECT_GT(hb["seq"].get<int64_t>(), 6 * 4);  // data, forward-backward, collectives, optimizer

  const auto ev = events();
  ASSERT_EQ(ev.size(), 8u);  // start, 6 steps, done
  EXPECT_EQ(ev[0]["event"], "start");
  EXPECT_EQ(ev[0]["resumed_step"], 0);
  EXPECT_GT(ev[0]["setup_s"].get<double>(), 0.0);
  for (int s = 1; s <= 6; ++s) {
    EXPECT_EQ(ev[size_t(s)]["event"], "step");
    EXPECT_EQ(ev[size_t(s)]["step"], s);
    EXPECT_EQ(ev[size_t(s)]["attempt"], 2);
    EXPECT_GE(ev[size_t(s)]["step_s"].get<double>(), s == 2 ? 0.01 : 0.0);
  }
  EXPECT_EQ(ev[7]["event"], "done");
  EXPECT_EQ(slurp(dir / "sup/faults_fired.txt"), "slow@step:2:seconds:0.01\t0\t2\n");

  // The same job again (a restart): the fired fault does not fire twice; it resumes at step 6.
  fs::remove(dir / "sup/events.jsonl");
  const CliResult again = train("ZAYA_FAULT=slow@step:2:seconds:0.01", "--set train.steps=8");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.err.find("fault injected"), std::string::npos) << again.err;
  EXPECT_EQ(events().front()["resumed_step"], 6);
}

TEST_F(SupervisedJob, AFailingRunLeavesItsError) {
  const CliResult r = train("", "--set data.dataset=" + dir / "missing");
  EXPECT_EQ(r.code, 1) << r.err;
  const std::string error = slurp(dir / "sup/error_rank00000.txt");
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
  EXPECT_NE(r.err.find(error.substr(0, error.size() - 1)), std::string::npos) << r.err;
}

TEST_F(SupervisedJob, AnExitFaultAtSetupExitsWithItsCode) {
  const CliResult r = train("ZAYA_FAULT=exit@setup:code:7");
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_NE(r.err.find("fault injected on rank 0: exit@setup:code:7"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "sup/heartbeat_rank00000.json"))["section"], "setup");
}

TEST_F(SupervisedJob, AKillFaultKillsTheProcess) {
  const CliResult r = train("ZAYA_FAULT=kill@step:4");
  EXPECT_EQ(r.code, 128 + 9) << r.err;  // SIGKILL
  const nlohmann::json hb = nlohmann::json::parse(slurp(dir / "sup/heartbeat_rank00000.json"));
  EXPECT_EQ(hb["step"], 4);
  EXPECT_EQ(hb["section"], "forward-backward");
  EXPECT_EQ(events().back()["step"], 3);
}

}  // namespace
