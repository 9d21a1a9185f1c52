// Several hosts on this machine for a test (scripts/multihost.sh; docs/testing.md, "Multi-host
// tests"): MultiHost(3) brings up zmh1..zmh3 and the login host zmh0 — each a network and UTS
// namespace of its own on a private bridge — and optionally a Slurm cluster over them; its
// destructor tears everything down and fails the test if anything is left. The hosts share this
// machine's filesystem, so a scratch directory is the run directory every host sees.
//
//   SKIP_WITHOUT_MULTIHOST(false);         // not root, no namespaces, no mpirun: an allowed skip
//   MultiHost mh(3);
//   ASSERT_TRUE(mh.ok);
//   mh.exec("zmh0", "mpirun -np 3 --hostfile " + mh.hostfile() + " zaya train …");
//
// Run mpirun and srun inside a host (zmh0, the login host), not in this machine's own namespace:
// what OpenMPI leaves in /tmp then carries a host's name, and the teardown finds it. Every command
// runs under `timeout -k 10` (a job whose peer became unreachable can ignore SIGTERM). ctest runs
// the tests that use this one at a time (RESOURCE_LOCK multihost, tests/CMakeLists.txt): they
// share the bridge, the namespaces and the state directory.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "test_skips.h"
#include "test_util.h"

namespace zaya::test {

// scripts/multihost.sh of this source tree (two levels above tests/fixtures).
inline std::string multihost_script() {
  return (std::filesystem::path(ZAYA_TEST_FIXTURES).parent_path().parent_path() /
          "scripts/multihost.sh")
      .lexically_normal()
      .string();
}

// The harness's state directory (scripts/multihost.sh: $ZAYA_MH_DIR, default /run/zaya-mh).
inline std::string multihost_dir() {
  return env_or("ZAYA_MH_DIR", "/run/zaya-mh");
}

// Runs `sh -c cmd` under `timeout -k 10 timeout_s`; captures its exit status and output.
inline CliResult run_shell(const std::string& cmd, int timeout_s) {
  const ScratchDir scratch;
  const std::string full = "timeout -k 10 " + std::to_string(timeout_s) + " sh -c " +
                           shell_quote(cmd) + " </dev/null >" + scratch / "out" + " 2>" +
                           scratch / "err";
  const int status = std::system(full.c_str());
  CliResult r;
  r.crashed = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 125);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(scratch / "out");
  r.err = slurp(scratch / "err");
  return r;
}

// Why the harness cannot run here: `message` is empty when it can. An allowed reason
// (tests/test_skips.h) when the machine lacks a capability; otherwise a broken setup, whose skip
// fails under ZAYA_STRICT_SKIPS=1.
struct MultiHostLack {
  bool allowed = false;
  SkipReason reason = SkipReason::NotRoot;
  std::string message;
};

inline bool have_command(const std::string& name) {
  return std::system(
             ("PATH=$PATH:/usr/sbin:/sbin command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

inline MultiHostLack multihost_lack(bool slurm) {
  if (geteuid() != 0)
    return {true, SkipReason::NotRoot, "the hosts are network namespaces, which take root"};
  if (std::string(ZAYA_MPIRUN).empty())
    return {true, SkipReason::NoMpirun, "none at configure time"};
  for (const char* tool : {"ip", "nsenter", "unshare"})
    if (!have_command(tool))
      return {false,
              {},
              std::string(tool) + " not found: scripts/setup.sh installs iproute2 and util-linux"};
  if (std::system("unshare --net --uts true >/dev/null 2>&1") != 0)
    return {true, SkipReason::NoNamespaces, "`unshare --net --uts true` failed here"};
  if (slurm)
    for (const char* tool : {"munged", "mungekey", "slurmctld", "slurmd", "srun"})
      if (!have_command(tool))
        return {false,
                {},
                std::string("Slurm is not installed (no ") + tool +
                    "): scripts/setup.sh installs munge, slurmctld, slurmd and slurm-client"};
  return {};
}

class MultiHost {
 public:
  // `up hosts` (and `slurm-up`); `ok` says whether it worked (a failure is reported as one).
  explicit MultiHost(int n, bool slurm = false) {
    CliResult r = script("up " + std::to_string(n), 60);
    ok = r.code == 0;
    EXPECT_EQ(r.code, 0) << "multihost.sh up " << n << ":\n" << r.out << r.err;
    if (ok && slurm) {
      r = script("slurm-up", 90);
      ok = r.code == 0;
      EXPECT_EQ(r.code, 0) << "multihost.sh slurm-up:\n" << r.out << r.err;
    }
    for (int k = 1; k <= n; ++k) hosts.push_back("zmh" + std::to_string(k));
  }
  // Tears down (unless down() did) and fails the test when anything is left.
  ~MultiHost() {
    if (!downed_) {
      const CliResult r = down();
      EXPECT_EQ(r.code, 0) << "multihost.sh down:\n" << r.out << r.err;
    }
  }
  MultiHost(const MultiHost&) = delete;
  MultiHost& operator=(const MultiHost&) = delete;

  std::vector<std::string> hosts;  // the compute hosts "zmh1" … "zmhN"
  bool ok = false;

  // "env K=V … " with the state directory's env file (OpenMPI's settings, SLURM_CONF), to put
  // before a command.
  std::string env_prefix() const {
    std::string s = "env";
    for (const std::string& kv : env_lines()) s += " " + kv;
    return s + " ";
  }
  // `cmd` through sh in this machine's own namespaces, with the env file exported.
  CliResult sh(const std::string& cmd, int timeout_s = 600) const {
    return run_shell(exports() + cmd, timeout_s);
  }
  // `cmd` through sh inside `host`'s namespaces, with the env file exported.
  CliResult exec(const std::string& host, const std::string& cmd, int timeout_s = 600) const {
    return script("exec " + host + " sh -c " + shell_quote(exports() + cmd), timeout_s);
  }
  void link(const std::string& host, bool up) const {
    const CliResult r = script("link " + host + (up ? " up" : " down"), 30);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
  }
  // Every process in `host`'s network namespace.
  std::vector<int> pids(const std::string& host) const {
    const CliResult r = script("pids " + host, 30);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    std::vector<int> out;
    std::istringstream in(r.out);
    for (int p; in >> p;) out.push_back(p);
    return out;
  }
  // "PID: command line" of each process in `host` but the cluster's own daemons (munged,
  // slurmctld and its slurmscriptd, slurmd): what is left of jobs.
  std::vector<std::string> job_processes(const std::string& host) const {
    std::vector<std::string> out;
    for (int p : pids(host)) {
      std::string comm = slurp("/proc/" + std::to_string(p) + "/comm");
      while (!comm.empty() && comm.back() == '\n') comm.pop_back();
      if (comm == "munged" || comm == "slurmctld" || comm == "slurmscriptd" || comm == "slurmd")
        continue;
      std::string cmdline = slurp("/proc/" + std::to_string(p) + "/cmdline");
      if (comm.empty() && cmdline.empty()) continue;  // gone meanwhile
      for (char& c : cmdline)
        if (c == '\0') c = ' ';
      out.push_back(std::to_string(p) + ": " + cmdline.substr(0, 200));
    }
    return out;
  }
  std::string hostfile() const { return multihost_dir() + "/hostfile"; }
  // Tears everything down now; exit 0 when nothing is left (its stderr names what is).
  CliResult down() {
    downed_ = true;
    return script("down", 120);
  }
  // `multihost.sh ARGS` (run as a shell line).
  static CliResult script(const std::string& args, int timeout_s) {
    return run_shell(multihost_script() + " " + args, timeout_s);
  }

 private:
  std::vector<std::string> env_lines() const {
    std::vector<std::string> out;
    std::ifstream f(multihost_dir() + "/env");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("export ", 0) == 0) line = line.substr(7);
      if (line.find('=') != std::string::npos) out.push_back(line);
    }
    return out;
  }
  std::string exports() const {
    std::string s;
    for (const std::string& kv : env_lines()) s += "export " + kv + "; ";
    return s;
  }
  bool downed_ = false;
};

// The environment of a multi-host job's commands: one thread per rank (2 cores shared by every
// host); a peer that stops answering fails a collective in 60 s.
inline const std::string kJobEnv =
    "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60; ";
// What mpirun forwards to the ranks on other hosts (the OMPI_MCA_* settings go by themselves).
inline const std::string kMpirunForward =
    " -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x ZAYA_DIST_TIMEOUT -x ZAYA_FAULT"
    " -x ZAYA_SUPERVISE_DIR -x ZAYA_SUPERVISE_ATTEMPT ";

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// No process but the cluster's daemons on any host (zmh0 included) once a job has ended: polled
// for up to 10 s, the time for exiting processes (a step daemon reports to the controller first).
inline void expect_no_job_process(const MultiHost& mh) {
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

// The supervisor's report (goodput.json) without the attempts that crashed before their first
// step, and their failures. OpenMPI 4.1's TCP BTL can segfault inside MPI_Init on a loaded machine
// (a peer's first message reaching a rank still in MPI_Init's final fence); the supervisor restarts
// such an attempt like any crash, and the test's own fault then falls in a later attempt. What is
// left is what the test caused: its attempts, failures and restarts (each dropped one printed).
inline nlohmann::json without_startup_crashes(nlohmann::json r) {
  if (!r.is_object() || !r.contains("attempts") || !r.contains("failures")) return r;
  nlohmann::json attempts = nlohmann::json::array(), failures = nlohmann::json::array();
  std::vector<int> dropped;
  for (const nlohmann::json& a : r["attempts"]) {
    if (a.value("outcome", "") == "crash" && a.value("steps", int64_t(-1)) == 0) {
      dropped.push_back(a.value("attempt", 0));
      std::printf("attempt %d crashed before its first step (%s): not counted\n",
                  a.value("attempt", 0), a.value("exit", std::string("?")).c_str());
    } else {
      attempts.push_back(a);
    }
  }
  for (const nlohmann::json& f : r["failures"])
    if (std::find(dropped.begin(), dropped.end(), f.value("attempt", 0)) == dropped.end())
      failures.push_back(f);
  r["attempts"] = attempts;
  r["failures"] = failures;
  r["restarts"] = attempts.empty() ? 0 : int64_t(attempts.size()) - 1;
  return r;
}

}  // namespace zaya::test

// Skips unless the harness can run here: root, namespaces that work, mpirun (and with slurm =
// true: munged, slurmctld, slurmd, srun). Root, namespaces and mpirun are allowed reasons
// (tests/test_skips.h); a missing tool that scripts/setup.sh installs is not.
#define SKIP_WITHOUT_MULTIHOST(slurm)                                                         \
  if (const ::zaya::test::MultiHostLack lack_ = ::zaya::test::multihost_lack(slurm);          \
      lack_.allowed)                                                                          \
    GTEST_SKIP() << ::zaya::test::allowed_skip(lack_.reason).prefix << ": " << lack_.message; \
  else if (!lack_.message.empty())                                                            \
  GTEST_SKIP() << lack_.message
