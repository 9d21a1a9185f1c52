// Child processes in their own process group (subprocess.h): posix_spawn with
// POSIX_SPAWN_SETPGROUP, waitpid(WNOHANG), and a group end of SIGTERM → grace → SIGKILL.
#include "resilience/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/assert.h"

extern char** environ;

namespace zaya::subprocess {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

ExitStatus decode(int status) {
  ExitStatus s;
  if (WIFSIGNALED(status)) {
    s.signaled = true;
    s.signal = WTERMSIG(status);
  } else {
    s.code = WEXITSTATUS(status);
  }
  return s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The leaders of the Processes alive now, and whether this process adopts orphans: an orphan it
// adopted that is not one of these leaders belongs to the job of one of them.
std::mutex g_leaders_mu;
std::set<pid_t> g_leaders;
bool g_subreaper = false;

// A live (not zombie) process: its id, parent, process group and start time (clock ticks after
// boot: with the pid, it names the process, even once the pid is reused).
struct ProcEntry {
  pid_t pid = 0, ppid = 0, pgrp = 0;
  unsigned long long start = 0;
};

std::optional<ProcEntry> read_proc(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  // "pid (comm) state ppid pgrp … starttime(22nd)": comm may hold spaces and parentheses; it ends
  // at the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  char state = 0;
  ProcEntry e;
  long ppid = 0, pgrp = 0;
  if (!(rest >> state >> ppid >> pgrp)) return std::nullopt;
  std::string skip;
  for (int field = 6; field < 22 && rest >> skip; ++field) {
  }
  if (!(rest >> e.start) || state == 'Z' || state == 'X') return std::nullopt;
  e.pid = pid, e.ppid = pid_t(ppid), e.pgrp = pid_t(pgrp);
  return e;
}

std::vector<ProcEntry> list_processes() {
  std::vector<ProcEntry> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.size() > 9 ||
        name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (auto p = read_proc(pid_t(std::stol(name)))) out.push_back(*p);
  }
  return out;
}

// `leader_known` / `group_known`: whether the leader's pid / its group id still name the job (not
// once the leader was reaped / the group is gone: the id may be reused).
std::vector<ProcEntry> job_entries(pid_t leader, bool leader_known = true,
                                   bool group_known = true) {
  const std::vector<ProcEntry> all = list_processes();
  std::set<pid_t> others;
  bool adopt = false;
  {
    std::lock_guard lock(g_leaders_mu);
    others = g_leaders;
    adopt = g_subreaper;
  }
  others.erase(leader);
  // Adopted orphans are this job's only when no other job of ours runs.
  adopt &= others.empty();
  const pid_t self = ::getpid();
  std::set<pid_t> family;
  for (const ProcEntry& p : all)
    if (p.pid != self && ((leader_known && p.pid == leader) || (group_known && p.pgrp == leader) ||
                          (adopt && p.ppid == self && !others.count(p.pid))))
      family.insert(p.pid);
  // Their descendants, whatever group or session they moved to.
  for (bool grew = true; grew;) {
    grew = false;
    for (const ProcEntry& p : all)
      if (!family.count(p.pid) && family.count(p.ppid) && p.pid != self)
        grew = family.insert(p.pid).second;
  }
  std::vector<ProcEntry> out;
  for (const ProcEntry& p : all)
    if (family.count(p.pid)) out.push_back(p);
  return out;
}

}  // namespace

std::vector<pid_t> job_processes(pid_t leader) {
  std::vector<pid_t> out;
  for (const ProcEntry& p : job_entries(leader)) out.push_back(p.pid);
  return out;
}

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return "";
}

void adopt_orphans() {
  // Best effort: without it orphans go to PID 1.
  const bool ok = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  std::lock_guard lock(g_leaders_mu);
  g_subreaper = ok;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : fmt::format("signal {}", sig);
}

std::string describe(const ExitStatus& s) {
  return s.signaled ? "signal " + signal_name(s.signal) : fmt::format("exit code {}", s.code);
}

Process Process::spawn(const std::vector<std::string>& argv, const Options& opt) {
  ZAYA_ASSERT(!argv.empty(), "spawn: empty argv");
  const std::string exe = find_executable(argv[0]);
  ZAYA_CHECK_INPUT(!exe.empty(), "'{}' not found on PATH", argv[0]);

  // The environment: ours, with opt.env set or replaced.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool replaced = false;
    for (const auto& [k, v] : opt.env) replaced |= kv.rfind(k + "=", 0) == 0;
    if (!replaced) env.push_back(std::move(kv));
  }
  for (const auto& [k, v] : opt.env) env.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (std::string& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);  // the child leads a group of its own
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int fds[2] = {-1, -1};
  if (opt.pipe_stderr) {
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("cannot make a pipe: {}", std::strerror(errno));
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    if (opt.stdout_too) posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (fds[1] >= 0) ::close(fds[1]);
  if (rc != 0) {
    if (fds[0] >= 0) ::close(fds[0]);
    fail("cannot start '{}': {}", exe, std::strerror(rc));
  }
  {
    std::lock_guard lock(g_leaders_mu);
    g_leaders.insert(pid);
  }
  Process p;
  p.pid_ = pid;
  p.err_fd_ = fds[0];
  if (p.err_fd_ >= 0) ::fcntl(p.err_fd_, F_SETFL, ::fcntl(p.err_fd_, F_GETFL) | O_NONBLOCK);
  return p;
}

Process::~Process() {
  reset();
}

Process::Process(Process&& o) noexcept
    : pid_(o.pid_),
      reaped_(o.reaped_),
      group_gone_(o.group_gone_),
      status_(o.status_),
      err_fd_(o.err_fd_) {
  o.pid_ = -1;
  o.err_fd_ = -1;
}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    reset();
    pid_ = o.pid_, reaped_ = o.reaped_, group_gone_ = o.group_gone_;
    status_ = o.status_, err_fd_ = o.err_fd_;
    o.pid_ = -1;
    o.err_fd_ = -1;
  }
  return *this;
}

void Process::reset() {
  if (pid_ > 0) terminate(2.0);
  if (pid_ > 0) {
    std::lock_guard lock(g_leaders_mu);
    g_leaders.erase(pid_);
  }
  if (err_fd_ >= 0) ::close(err_fd_);
  pid_ = -1;
  err_fd_ = -1;
  reaped_ = group_gone_ = false;
}

bool Process::poll(ExitStatus& out) {
  if (pid_ <= 0) return false;
  if (!reaped_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      status_ = decode(status);
    } else if (r < 0 && errno == ECHILD) {
      reaped_ = true;  // reaped elsewhere: nothing known of its status
      status_ = ExitStatus{.signaled = false, .code = 255};
    }
  }
  // Members of the group that are our children (a subreaper adopts orphans): reap them too.
  int status = 0;
  while (!group_gone_ && ::waitpid(-pid_, &status, WNOHANG) > 0) {
  }
  if (reaped_) out = status_;
  return reaped_;
}

ExitStatus Process::wait() {
  ExitStatus s;
  while (!poll(s)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return s;
}

bool Process::group_alive() {
  // Once the leader is reaped and the group empty, its id may be reused: never signal it again.
  if (group_gone_) return false;
  const bool alive = ::kill(-pid_, 0) == 0 || errno == EPERM;
  group_gone_ = reaped_ && !alive;
  return alive;
}

ExitStatus Process::terminate(double grace_s) {
  ExitStatus s;
  if (pid_ <= 0) return s;
  // The job: its group, and every process descended from it or adopted by us from it (a launcher
  // daemon that moved to a session of its own, a rank whose parent died) — each remembered with
  // its start time, so that a pid reused meanwhile is never signalled.
  std::map<pid_t, unsigned long long> members;
  auto still_there = [](pid_t pid, unsigned long long start) {
    const std::optional<ProcEntry> e = read_proc(pid);
    return e && e->start == start;
  };
  auto signal_all = [&](int sig) {
    for (const ProcEntry& p : job_entries(pid_, !reaped_, !group_gone_))
      members.emplace(p.pid, p.start);
    if (!group_gone_) ::kill(-pid_, sig);
    for (const auto& [p, start] : members)
      if (p != pid_ && still_there(p, start)) ::kill(p, sig);
  };
  auto any_left = [&] {
    poll(s);
    int status = 0;
    for (const auto& [p, start] : members) ::waitpid(p, &status, WNOHANG);  // ours among them
    if (!reaped_ || group_alive()) return true;
    if (!job_entries(pid_, !reaped_, !group_gone_).empty()) return true;
    for (const auto& [p, start] : members)
      if (still_there(p, start)) return true;
    return false;
  };
  auto wait_gone = [&](double seconds) {
    const double deadline = now_s() + seconds;
    for (;;) {
      if (!any_left()) return true;
      if (now_s() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  if (any_left()) {
    signal_all(SIGTERM);
    if (!wait_gone(grace_s)) {
      signal_all(SIGKILL);
      // Bounded: a member adopted by a PID 1 that never reaps stays a zombie of the group.
      wait_gone(5.0);
    }
  }
  while (!poll(s)) {  // the leader itself (never a zombie of someone else: it is our child)
    ::kill(pid_, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

bool Process::read_stderr(std::string& out) {
  if (err_fd_ < 0) return false;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, size_t(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

}  // namespace zaya::subprocess
