// `zaya supervise` end to end against small shell-script jobs that follow the job side of the
// contract (docs/fault-tolerance.md: heartbeat files, events.jsonl, error_rank files, exit codes):
// bad input (fault spec, missing launcher / job, bad flags), a job that fails at setup every time
// (stops after 3 attempts, with the cause), --max-restarts 0, a crash with the rank's message, a
// hang named by rank / host / section, a clean run whose goodput.json adds up, a preflight that
// fails, and SIGINT (exit 130 with the report); across hosts: DIR/attempt (numbering on from a
// supervisor before), a rank left running after the tear-down named and fenced, an unreachable
// host (a blackholed local port, tests/resilience/blackhole.h) named and waited for without
// spending a restart, and an elastic restart through a stand-in srun. Every job here lasts a few
// seconds at most.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <thread>

#include "cli_util.h"
#include "resilience/blackhole.h"
#include "test_util.h"

using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// Bash helpers for the scripts: hb RANK SEQ STEP LAST_STEP SECTION DETAIL COLLECTIVES writes a
// heartbeat record; ev JSON appends an event.
const char* kPrelude = R"(#!/bin/bash
D="$ZAYA_SUPERVISE_DIR"; A="$ZAYA_SUPERVISE_ATTEMPT"
hb() { printf '{"attempt":%d,"rank":%d,"world":%d,"host":"host%d","pid":%d,"seq":%d,"step":%d,"last_step":%d,"section":"%s","detail":"%s","collectives":%d,"max_step_s":0.01,"max_eval_s":0,"max_checkpoint_s":0,"time":0}\n' "$A" "$1" "${WORLD:-1}" "$1" $$ "$2" "$3" "$4" "$5" "$6" "$7" > "$D/heartbeat_rank0000$1.json"; }
ev() { echo "$1" >> "$D/events.jsonl"; }
steps() { ev "{\"event\":\"start\",\"attempt\":$A,\"world\":1,\"resumed_step\":$1,\"setup_s\":0.001}"; for s in $(seq $(($1 + 1)) $2); do ev "{\"event\":\"step\",\"attempt\":$A,\"step\":$s,\"step_s\":0.0005,\"after_s\":0.0001,\"skipped\":false}"; done; }
)";

struct Supervised {
  ScratchDir tmp;
  std::string script(const std::string& name, const std::string& body) const {
    const std::string path = tmp / name;
    std::ofstream(path) << kPrelude << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  // `[ENV] zaya supervise --dir DIR --poll 0.05 --restart-delay 0 FLAGS -- JOB`
  CliResult run(const std::string& flags, const std::string& job, const std::string& env = "",
                double* seconds = nullptr) const {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string cmd = env + " " + std::string(ZAYA_BINARY) + " supervise --dir " +
                            (tmp / "run") + " --poll 0.05 --restart-delay 0 " + flags + " -- " +
                            job + " </dev/null >" + (tmp / "out") + " 2>" + (tmp / "err");
    const int status = std::system(cmd.c_str());
    if (seconds)
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CliResult r;
    r.crashed = WIFSIGNALED(status) ||
                (WIFEXITED(status) && WEXITSTATUS(status) > 125 && WEXITSTATUS(status) != 130);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(tmp / "out");
    r.err = slurp(tmp / "err");
    return r;
  }
  nlohmann::json report() const { return nlohmann::json::parse(slurp(tmp / "run/goodput.json")); }
};

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The last line of stderr (the "zaya: error:" line of a supervisor that gave up).
std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') + 1);
}

void expect_adds_up(const nlohmann::json& r) {
  double parts = r["productive_s"].get<double>() + r["overhead_s"].get<double>() +
                 r["anomaly_s"].get<double>();
  for (const auto& f : r["failures"]) parts += f["total_s"].get<double>();
  EXPECT_NEAR(parts, r["wall_s"].get<double>(), 0.01 * r["wall_s"].get<double>()) << r.dump(2);
}

}  // namespace

TEST(SuperviseCli, UnknownFaultSpecIsRejectedBeforeLaunching) {
  Supervised s;
  const std::string job = s.script("job.sh", "touch " + (s.tmp / "ran"));
  expect_user_error(s.run("", job, "ZAYA_FAULT=explode@step:3"), "explode");
  EXPECT_FALSE(fs::exists(s.tmp / "ran"));
}

TEST(SuperviseCli, MissingLauncherOrJobIsAnError) {
  Supervised s;
  const std::string job = s.script("job.sh", "exit 0");
  expect_user_error(s.run("--launcher 'mpirunx -np 2'", job),
                    "launcher 'mpirunx' not found on PATH");
  expect_user_error(s.run("", s.tmp / "no-such-job"), "not found on PATH");
  expect_user_error(s.run("", ""), "no job to supervise");
  expect_user_error(s.run("--timeout fwd=3", job), "unknown section 'fwd'");
  expect_user_error(s.run("--launcher \"mpirun 'unbalanced\"", job), "unbalanced");
}

TEST(SuperviseCli, JobThatFailsAtSetupEveryTimeStopsAfterThreeAttempts) {
  Supervised s;
  const std::string job = s.script(
      "job.sh", "echo 'zaya: error: cannot read config run.toml: no such file' >&2; exit 1");
  double seconds = 0;
  const CliResult r = s.run("--max-restarts 10", job, "", &seconds);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(count(r.err, "failed after"), 3u) << r.err;
  EXPECT_EQ(count(r.err, "started (pid"), 3u) << r.err;
  const std::string last = last_line(r.err);
  EXPECT_EQ(last.rfind("zaya: error: the job fails before its first step every time", 0), 0u)
      << r.err;
  expect_contains(last, "cannot read config run.toml: no such file");
  EXPECT_LT(seconds, 30);
  const auto rep = s.report();
  EXPECT_EQ(rep["outcome"], "no progress");
  EXPECT_EQ(rep["attempts"].size(), 3u);
  expect_adds_up(rep);
}

TEST(SuperviseCli, MaxRestartsZeroRunsOneAttempt) {
  Supervised s;
  // Progress (a step) each time, so only the restart budget stops it.
  const std::string job = s.script("job.sh", "steps 0 1; exit 3");
  const CliResult r = s.run("--max-restarts 0", job);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(count(r.err, "started (pid"), 1u) << r.err;
  expect_contains(last_line(r.err), "restarts spent (--max-restarts 0)");
  expect_contains(last_line(r.err), "exit code 3");
  EXPECT_EQ(s.report()["outcome"], "restarts spent");
}

TEST(SuperviseCli, CrashIsRestartedAndTheRankErrorNamed) {
  Supervised s;
  const std::string job = s.script("job.sh", R"(
echo "kill@step:3	0	$A" >> "$D/faults_fired.txt"
[ -e "$D/events.jsonl" ] && { echo "stale events" >&2; exit 9; }
if [ "$A" = 1 ]; then steps 0 4; echo 'data: shard 3 is truncated' > "$D/error_rank00000.txt"; exit 3; fi
[ -e "$D/error_rank00000.txt" ] && { echo "stale error file" >&2; exit 9; }
steps 2 6; exit 0)");
  const CliResult r = s.run("", job);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: attempt 1 failed after");
  expect_contains(r.err, "exit code 3: rank 0: data: shard 3 is truncated");
  expect_contains(r.err, "supervise: attempt 2 completed");
  const auto rep = s.report();
  EXPECT_EQ(rep["outcome"], "completed");
  EXPECT_EQ(rep["restarts"], 1);
  EXPECT_EQ(rep["steps_kept"], 6);
  EXPECT_EQ(rep["steps_recomputed"], 2);  // 3 and 4, after the checkpoint of step 2
  EXPECT_EQ(rep["failures"][0]["recomputed_steps"], nlohmann::json::array({3, 4}));
  EXPECT_EQ(rep["faults_fired"].size(), 2u);  // faults_fired.txt survives the attempts
  expect_adds_up(rep);
}

TEST(SuperviseCli, HungRankIsNamedAndTheJobRestarted) {
  Supervised s;
  const std::string job = s.script("job.sh", R"(
export WORLD=2
hb 0 2 5 4 collective all_reduce 10; hb 1 2 5 4 forward-backward "" 9
if [ "$A" -ge 2 ]; then hb 0 3 5 5 done "" 10; hb 1 3 5 5 done "" 10; steps 0 5; exit 0; fi
sleep 60)");
  double seconds = 0;
  const CliResult r = s.run("--timeout step=1 --grace 2", job, "", &seconds);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: hang: rank 1 on host host1 silent ");
  expect_contains(r.err,
                  " in forward-backward of step 5 (timeout 1.0 s); rank 0 waits in "
                  "collective all_reduce");
  EXPECT_EQ(count(r.err, "started (pid"), 2u) << r.err;
  EXPECT_LT(seconds, 30);
  const auto rep = s.report();
  ASSERT_EQ(rep["failures"].size(), 1u);
  EXPECT_EQ(rep["failures"][0]["kind"], "hang");
  EXPECT_GE(rep["failures"][0]["detection_s"].get<double>(), 1.0);
  expect_adds_up(rep);
}

TEST(SuperviseCli, CleanRunExitsZeroWithAReportThatAddsUp) {
  Supervised s;
  const std::string job =
      s.script("job.sh", "hb 0 1 0 0 setup '' 0; steps 0 20; hb 0 2 20 20 done '' 0; exit 0");
  const CliResult r = s.run("--report " + (s.tmp / "copy.json"), job);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: attempt 1 completed");
  expect_contains(r.err, "supervise: goodput: completed; wall ");
  const auto rep = s.report();
  EXPECT_EQ(rep["outcome"], "completed");
  EXPECT_EQ(rep["restarts"], 0);
  EXPECT_EQ(rep["steps_kept"], 20);
  // 20 steps of 0.5 ms (scaled down if the job's clock claims more than the attempt lasted).
  EXPECT_NEAR(rep["productive_s"].get<double>(),
              20 * 0.0005 * rep["attempts"][0]["clock_scale"].get<double>(), 1e-9);
  EXPECT_EQ(rep["failures"].size(), 0u);
  expect_adds_up(rep);
  EXPECT_EQ(nlohmann::json::parse(slurp(s.tmp / "copy.json")), rep);
}

TEST(SuperviseCli, WhatTheJobLeavesBehindIsEnded) {
  Supervised s;
  // The job's leader exits at once, leaving a process of its group running.
  const std::string job =
      s.script("job.sh", "sleep 30 & echo $! > " + (s.tmp / "pid") + "; steps 0 1; exit 0");
  double seconds = 0;
  const CliResult r = s.run("", job, "", &seconds);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(seconds, 20);
  pid_t left = 0;
  std::ifstream(s.tmp / "pid") >> left;
  ASSERT_GT(left, 0);
  EXPECT_NE(::kill(left, 0), 0) << "pid " << left << " outlived the supervisor";
}

TEST(SuperviseCli, FailedPreflightRefusesToStart) {
  Supervised s;
  // A stand-in launcher: it prints what a refusing `mpirun -np 2 zaya preflight` does and exits 1.
  const std::string launcher = s.script("launch.sh", R"(
echo 'zaya: fault injected on rank 1: slow@preflight:rank:1:seconds:2' >&2
echo '# rank host  sgemm GFLOP/s  ratio'
echo 'preflight: rank 1 (host vm): sgemm 0.134 GFLOP/s is 0.00309x the median 43.2 (limit 0.5x)' >&2
echo 'preflight: refused: 1 of 2 ranks bad (min ratio 0.5x of the median)'
echo '-----------------------------------' >&2
exit 1)");
  const std::string job = s.script("job.sh", "touch " + (s.tmp / "ran"));
  const CliResult r = s.run("--preflight --launcher " + launcher, job);
  expect_contains(r.err, "supervise: preflight: " + launcher + " " +
                             fs::canonical(ZAYA_BINARY).string() + " preflight");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(last_line(r.err),
            "zaya: error: preflight failed (exit code 1): preflight: rank 1 (host vm): sgemm 0.134 "
            "GFLOP/s is 0.00309x the median 43.2 (limit 0.5x) — the job was not started");
  EXPECT_FALSE(fs::exists(s.tmp / "ran"));
}

TEST(SuperviseCli, PassingPreflightStartsTheJob) {
  Supervised s;
  // A stand-in launcher that runs its command's checks as passed, and the job itself directly.
  const std::string launcher = s.script(
      "launch.sh",
      "[ \"$2\" = preflight ] && { echo 'preflight: 2 ranks good'; exit 0; }; exec \"$@\"");
  const std::string job = s.script("job.sh", "touch " + (s.tmp / "ran"));
  const CliResult r = s.run("--preflight --launcher " + launcher, job);
  EXPECT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: preflight passed");
  EXPECT_TRUE(fs::exists(s.tmp / "ran"));
}

TEST(SuperviseCli, SigintStopsTheJobAndWritesTheReport) {
  Supervised s;
  const std::string job =
      s.script("job.sh", "steps 0 3; touch " + (s.tmp / "started") + "; sleep 60");
  // The supervisor in the background, interrupted once its job is running.
  const std::string cmd = "(" + std::string(ZAYA_BINARY) + " supervise --dir " + (s.tmp / "run") +
                          " --poll 0.05 -- " + job + " 2>" + (s.tmp / "err") + " & p=$!; " +
                          "for i in $(seq 200); do [ -e " + (s.tmp / "started") +
                          " ] && break; sleep 0.05; done; kill -INT $p; wait $p; echo $? > " +
                          (s.tmp / "rc") + ")";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
  EXPECT_EQ(slurp(s.tmp / "rc"), "130\n") << slurp(s.tmp / "err");
  expect_contains(slurp(s.tmp / "err"), "supervise: stop requested: ending attempt 1");
  const auto rep = s.report();
  EXPECT_EQ(rep["outcome"], "stopped");
  EXPECT_EQ(rep["steps_kept"], 3);
  expect_adds_up(rep);
}

TEST(SuperviseCli, AttemptFileNamesEachAttemptAndItsEnd) {
  Supervised s;
  // Each attempt records what DIR/attempt says while it runs.
  const std::string job = s.script("job.sh", R"(
cat "$D/attempt" >> ")" + (s.tmp / "seen") + R"("
if [ "$A" = 5 ]; then steps 0 2; exit 3; fi
steps 2 4; exit 0)");
  fs::create_directories(s.tmp / "run");
  // A supervisor ran in this directory before: its attempts went up to 4.
  std::ofstream(s.tmp / "run/attempt") << "4 ended\n";
  const CliResult r = s.run("", job);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: attempt 5 started");
  EXPECT_EQ(slurp(s.tmp / "seen"), "5 running\n6 running\n");
  EXPECT_EQ(slurp(s.tmp / "run/attempt"), "6 ended\n");
  EXPECT_EQ(s.report()["attempts"][1]["attempt"], 6);
}

TEST(SuperviseCli, RankLeftRunningAfterTheTearDownIsNamedAndFenced) {
  Supervised s;
  // Rank 1 "on another host": started by the test, not by the supervisor, so no signal of the
  // supervisor reaches it. It follows the contract: it beats in its heartbeat and exits (75)
  // once DIR/attempt fences attempt 1 (a beat, then a look at the file, as the watchdog does).
  const std::string d = s.tmp / "run";
  const std::string far = s.script("far.sh", R"SH(
D=)SH" + d + R"SH(; mkdir -p "$D"; echo $$ > )SH" +
                                                 (s.tmp / "far.pid") + R"SH(
for i in $(seq 300); do
  [ -e "$D/attempt" ] && printf '{"attempt":1,"rank":1,"world":2,"host":"far","pid":%d,"seq":1,"beat":%d,"step":2,"last_step":1,"section":"collective","detail":"all_reduce","collectives":3,"max_step_s":0.01,"time":0}\n' $$ $i > "$D/heartbeat_rank00001.json"
  case "$(cat "$D/attempt" 2>/dev/null)" in "1 ended"|[2-9]*) echo fenced > )SH" +
                                                 (s.tmp / "far.out") + R"SH(; exit 75;; esac
  sleep 0.1
done; exit 0)SH");
  ASSERT_EQ(std::system((far + " >/dev/null 2>&1 &").c_str()), 0);
  const std::string job = s.script("job.sh", R"(
export WORLD=2
if [ "$A" = 1 ]; then hb 0 2 2 1 collective all_reduce 3; steps 0 1; sleep 0.5; exit 3; fi
steps 1 3; exit 0)");
  const CliResult r = s.run("--grace 2", job);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: after the tear-down still running: rank 1 on host far (pid ");
  expect_contains(r.err, "fenced (" + d + "/attempt says attempt 1 ended)");
  EXPECT_EQ(r.err.find("still running after the fence"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(s.tmp / "far.out"), "fenced\n");
  const auto left = s.report()["attempts"][0]["left_running"];
  ASSERT_EQ(left.size(), 1u) << s.report().dump(2);
  EXPECT_EQ(left[0].get<std::string>().rfind("rank 1 on host far (pid ", 0), 0u);
  pid_t pid = 0;
  std::ifstream(s.tmp / "far.pid") >> pid;
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(::kill(pid, 0), 0);
}

namespace {

// Two ranks stuck in one collective; rank 1's host ("lost", on 127.0.0.1) does not answer the
// probe's port (a blackhole) while rank 0's ("good", 127.0.0.2: loopback, refused) does.
const char* kStuckAtOnePoint = R"(
export WORLD=2
hbh() { printf '{"attempt":%d,"rank":%d,"world":%d,"host":"%s","addrs":["%s"],"pid":%d,"seq":%d,"step":3,"last_step":2,"section":"collective","detail":"all_reduce","collectives":7,"max_step_s":0.01,"time":0}\n' "$A" "$1" "$WORLD" "$2" "$3" $$ "$4" > "$D/heartbeat_rank0000$1.json"; }
)";

}  // namespace

TEST(SuperviseCli, UnreachableHostIsNamedAndWaitedForWithoutSpendingARestart) {
  Supervised s;
  Blackhole lost;
  const std::string job = s.script("job.sh", std::string(kStuckAtOnePoint) + R"(
if [ "$A" = 1 ]; then hbh 0 good 127.0.0.2 1; hbh 1 lost 127.0.0.1 1; steps 0 2; sleep 60; fi
steps 2 4; exit 0)");
  // The lost host comes back once the supervisor waits for it.
  std::thread back([&] {
    for (int i = 0;
         i < 1500 && slurp(s.tmp / "err").find("before relaunching") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    lost.open_up();
  });
  const CliResult r = s.run(
      fmt::format("--max-restarts 0 --timeout step=1 --grace 1 --host-wait 20 --probe-port {} "
                  "--probe-timeout 0.5",
                  lost.port()),
      job);
  back.join();
  ASSERT_EQ(r.code, 0) << r.err;  // the host's failure spent no restart of the 0 allowed
  expect_contains(r.err,
                  "every rank is at the same point: the fault is inside the collective (or the "
                  "network); host lost (127.0.0.1) unreachable");
  expect_contains(r.err, "host lost (127.0.0.1) unreachable: waiting 1.0 s before relaunching");
  expect_contains(r.err, "supervise: every host answers again: relaunching");
  const auto rep = s.report();
  EXPECT_EQ(rep["unreachable_hosts"], nlohmann::json::array({"lost (127.0.0.1)"}));
  EXPECT_EQ(rep["failures"][0]["unreachable_hosts"], rep["unreachable_hosts"]);
  EXPECT_EQ(rep["attempts"][0]["hosts"], nlohmann::json::array({"good", "lost"}));
  expect_adds_up(rep);
}

TEST(SuperviseCli, ElasticRestartOnTheHostsThatAnswer) {
  Supervised s;
  Blackhole lost;
  // A stand-in srun: it records its words and runs the job (its last word).
  fs::create_directories(s.tmp / "bin");
  const std::string srun = s.tmp / "bin/srun";
  std::ofstream(srun) << "#!/bin/bash\necho \"${@:1:$#-1}\" >> " << (s.tmp / "calls")
                      << "\nexec \"${@: -1}\"\n";
  ::chmod(srun.c_str(), 0755);
  const std::string job = s.script("job.sh", std::string(kStuckAtOnePoint) + R"(
if [ "$A" = 1 ]; then hbh 0 good 127.0.0.2 1; hbh 1 lost 127.0.0.1 1; steps 0 2; sleep 60; fi
steps 2 4; exit 0)");
  const CliResult r = s.run(fmt::format("--launcher '{} -N2 -n 2 --mpi=pmix' --min-hosts 1 "
                                        "--max-restarts 0 --timeout step=1 --grace 1 "
                                        "--probe-port {} --probe-timeout 0.5",
                                        srun, lost.port()),
                            job);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, "supervise: elastic restart on the 1 host(s) that answer (good): " + srun +
                             " --exclude=lost -N1 -n 1 --mpi=pmix " + job);
  EXPECT_EQ(slurp(s.tmp / "calls"), "-N2 -n 2 --mpi=pmix\n--exclude=lost -N1 -n 1 --mpi=pmix\n");
  EXPECT_EQ(r.err.find("before relaunching"), std::string::npos) << r.err;  // no waiting
  // Too few hosts answer for --min-hosts 2: it waits for the lost one instead (then gives up the
  // wait at once with --host-wait 0, and the failure counts).
  Supervised t;
  const CliResult w = t.run(fmt::format("--launcher '{} -N2 -n 2' --min-hosts 2 --host-wait 0 "
                                        "--max-restarts 0 --timeout step=1 --grace 1 "
                                        "--probe-port {} --probe-timeout 0.5",
                                        srun, lost.port()),
                            job);
  EXPECT_EQ(w.code, 1) << w.err;
  expect_contains(w.err, "no elastic restart: 1 host(s) answer, fewer than --min-hosts 2");
  expect_contains(last_line(w.err), "restarts spent (--max-restarts 0)");
  expect_contains(last_line(w.err), "host lost (127.0.0.1) unreachable");
}
