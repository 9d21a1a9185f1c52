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

}  // namespace

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
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // best effort: without it orphans go to PID 1
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
  auto wait_group = [&](double seconds) {
    const double deadline = now_s() + seconds;
    for (;;) {
      poll(s);
      if (reaped_ && !group_alive()) return true;
      if (now_s() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  if (group_alive()) {
    ::kill(-pid_, SIGTERM);
    if (!wait_group(grace_s)) {
      ::kill(-pid_, SIGKILL);
      // Bounded: a member adopted by a PID 1 that never reaps stays a zombie of the group.
      wait_group(5.0);
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
