// Child processes for `zaya supervise`: start a command in a process group of its own (so that a
// whole job — a launcher and every rank it forked — is stopped with one signal), see whether it
// ended without blocking, and end the group: SIGTERM, a grace period, then SIGKILL. POSIX only.
//
// A Process owns its child: the destructor ends the group (as terminate) if the child was not
// reaped. Standard output is inherited; standard error is inherited too unless the caller asks
// for a pipe (Options::pipe_stderr), which it then reads with read_stderr.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace zaya::subprocess {

// The path `name` runs as: `name` itself if it holds a '/' (and is an executable file), else the
// first executable PATH entry; "" if there is none.
std::string find_executable(const std::string& name);

// Makes this process the reaper of its orphaned descendants (Linux PR_SET_CHILD_SUBREAPER), so
// that the ranks a dead launcher leaves behind are still ours to wait for and to see end.
void adopt_orphans();

// The processes of the job led by `leader`: its process group and every descendant of a member,
// whichever group or session it moved to; with adopt_orphans on and no other Process alive, also
// the orphans this process adopted. Read from /proc (Linux); zombies left out.
std::vector<pid_t> job_processes(pid_t leader);

// How a child ended.
struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code (when !signaled)
  int signal = 0;  // the signal that ended it (when signaled)
  bool ok() const { return !signaled && code == 0; }
};
// "exit code 3", "signal SIGKILL".
std::string describe(const ExitStatus& s);
// "SIGKILL" (or "signal 42" for one without a name).
std::string signal_name(int sig);

struct Options {
  std::vector<std::pair<std::string, std::string>> env;  // set (or replaced) in the child
  bool pipe_stderr = false;  // the child's stderr goes to a pipe the parent reads
  bool stdout_too = false;   // with pipe_stderr: its stdout goes to the same pipe
};

class Process {
 public:
  Process() = default;
  // Starts argv (argv[0] resolved on PATH) as the leader of a new process group. Throws
  // zaya::Error if argv[0] is not found or the start fails.
  static Process spawn(const std::vector<std::string>& argv, const Options& opt = {});
  ~Process();
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }
  // Non-blocking: true (and `out`) once the leader has ended; reaps it.
  bool poll(ExitStatus& out);
  // Blocks until the leader ends.
  ExitStatus wait();
  // Ends the whole job (job_processes: the group and every descendant, a launcher that ignores
  // SIGTERM or moved to a session of its own included): SIGTERM, up to `grace_s` for every one
  // to go, then SIGKILL. Returns the leader's status (a leader that had already ended keeps the
  // status poll gave).
  ExitStatus terminate(double grace_s);

  // The stderr pipe's read end (−1 without one), and a non-blocking read of what is there:
  // appends to `out`; false at end of file.
  int stderr_fd() const { return err_fd_; }
  bool read_stderr(std::string& out);

 private:
  void reset();
  bool group_alive();
  pid_t pid_ = -1;
  bool reaped_ = false, group_gone_ = false;
  ExitStatus status_;
  int err_fd_ = -1;
};

}  // namespace zaya::subprocess
