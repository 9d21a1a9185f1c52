// resilience/subprocess.h: PATH lookup, exit codes and signals, the environment a child gets, its
// own process group (a grandchild is ended with it), SIGTERM → grace → SIGKILL for a child that
// ignores SIGTERM, a descendant in a session of its own and an adopted orphan ended with the job,
// the stderr pipe. Each child lives a second or less.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "resilience/subprocess.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::subprocess;

namespace {

ExitStatus run_sh(const std::string& script, const Options& opt = {}) {
  Process p = Process::spawn({"sh", "-c", script}, opt);
  return p.wait();
}

bool pid_alive(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

}  // namespace

TEST(Subprocess, FindsExecutablesOnPath) {
  EXPECT_FALSE(find_executable("sh").empty());
  EXPECT_EQ(find_executable("zaya-no-such-program-xyz"), "");
  EXPECT_EQ(find_executable("/bin/sh"), "/bin/sh");
  EXPECT_EQ(find_executable("/etc/hostname-not-a-program"), "");
  EXPECT_EQ(find_executable(""), "");
  test::expect_error([] { Process::spawn({"zaya-no-such-program-xyz"}); },
                     {"'zaya-no-such-program-xyz' not found on PATH"});
}

TEST(Subprocess, ExitCodesSignalsAndTheirNames) {
  EXPECT_TRUE(run_sh("exit 0").ok());
  const ExitStatus three = run_sh("exit 3");
  EXPECT_FALSE(three.signaled);
  EXPECT_EQ(three.code, 3);
  EXPECT_EQ(describe(three), "exit code 3");
  const ExitStatus killed = run_sh("kill -KILL $$");
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_EQ(describe(killed), "signal SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
}

TEST(Subprocess, ChildGetsTheExtraEnvironment) {
  const test::ScratchDir dir;
  Options opt;
  opt.env = {{"ZAYA_TEST_A", "one"}, {"HOME", "/replaced"}};
  ASSERT_TRUE(run_sh("echo \"$ZAYA_TEST_A $HOME\" > " + (dir / "env"), opt).ok());
  std::string line;
  std::getline(std::ifstream(dir / "env"), line);
  EXPECT_EQ(line, "one /replaced");
}

TEST(Subprocess, OwnProcessGroupAndTheGroupEnds) {
  const test::ScratchDir dir;
  // A grandchild in the background; the child waits for it.
  Process p = Process::spawn({"sh", "-c", "sleep 30 & echo $! > " + (dir / "pid") + "; wait"});
  EXPECT_EQ(::getpgid(p.pid()), p.pid());
  pid_t grandchild = 0;
  for (int i = 0; i < 200 && grandchild == 0; ++i) {
    std::ifstream(dir / "pid") >> grandchild;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(::getpgid(grandchild), p.pid());
  ExitStatus st;
  EXPECT_FALSE(p.poll(st));
  const ExitStatus end = p.terminate(5.0);
  EXPECT_TRUE(end.signaled);
  EXPECT_EQ(end.signal, SIGTERM);
  EXPECT_FALSE(p.running());
  for (int i = 0; i < 200 && pid_alive(grandchild); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(pid_alive(grandchild));
}

TEST(Subprocess, ChildIgnoringSigtermIsKilledAfterTheGrace) {
  Options opt;
  opt.pipe_stderr = true;
  Process p = Process::spawn(
      {"sh", "-c", "trap '' TERM; echo ready >&2; while :; do sleep 0.05; done"}, opt);
  std::string err;
  for (int i = 0; i < 200 && err.find("ready") == std::string::npos; ++i) {
    p.read_stderr(err);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(err.find("ready"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  const ExitStatus end = p.terminate(0.3);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(end.signaled);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 10);
}

TEST(Subprocess, StderrPipeCarriesBothStreamsWhenAsked) {
  Options opt;
  opt.pipe_stderr = opt.stdout_too = true;
  Process p = Process::spawn({"sh", "-c", "echo out; echo err >&2"}, opt);
  p.wait();
  std::string text;
  while (p.read_stderr(text)) {
  }
  EXPECT_NE(text.find("out\n"), std::string::npos) << text;
  EXPECT_NE(text.find("err\n"), std::string::npos) << text;
}

namespace {

// A process that is gone: no such pid, or a zombie (its parent has not reaped it yet).
bool gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

pid_t read_pid(const std::string& path) {
  pid_t pid = 0;
  for (int i = 0; i < 300 && pid == 0; ++i) {
    std::ifstream(path) >> pid;
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

}  // namespace

TEST(Subprocess, DescendantInASessionOfItsOwnIgnoringSigtermIsEnded) {
  const test::ScratchDir dir;
  // A launcher whose daemon left the job's process group (setsid) and ignores SIGTERM (as mpirun's
  // does when a peer is unreachable): a group signal does not reach it, the descendant walk does.
  Process p = Process::spawn(
      {"sh", "-c",
       "setsid sh -c 'trap \"\" TERM; echo $$ > " + (dir / "pid") + "; exec sleep 30' & wait"});
  const pid_t daemon = read_pid(dir / "pid");
  ASSERT_GT(daemon, 0);
  EXPECT_NE(::getpgid(daemon), p.pid());
  const std::vector<pid_t> job = job_processes(p.pid());
  EXPECT_NE(std::find(job.begin(), job.end(), daemon), job.end());
  const auto t0 = std::chrono::steady_clock::now();
  p.terminate(0.3);
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.3);
  for (int i = 0; i < 300 && !gone(daemon); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(gone(daemon)) << "pid " << daemon << " outlived its job";
}

TEST(Subprocess, OrphanAdoptedFromAJobThatEndedIsEndedWithIt) {
  const test::ScratchDir dir;
  adopt_orphans();  // from here on this test process reaps the orphans of its children
  // The leader exits at once; its child, in a session of its own and deaf to SIGTERM, is adopted.
  Process p = Process::spawn(
      {"sh", "-c",
       "setsid sh -c 'trap \"\" TERM; echo $$ > " + (dir / "pid") + "; exec sleep 30' &"});
  const pid_t orphan = read_pid(dir / "pid");
  ASSERT_GT(orphan, 0);
  ExitStatus st;
  for (int i = 0; i < 300 && !p.poll(st); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(p.running());
  p.terminate(0.2);
  EXPECT_TRUE(gone(orphan)) << "pid " << orphan << " outlived its job";
}
