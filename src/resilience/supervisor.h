// `zaya supervise`: runs a training job (optionally under a launcher such as mpirun or srun) in a
// process group of its own, watches its heartbeats (docs/fault-tolerance.md), ends it on a crash or
// a hang, and restarts it (the job resumes from its newest valid checkpoint) until it completes or
// the restart budget is spent. Writes DIR/goodput.json and prints its summary when it ends.
//
// Across hosts: it records the attempt in DIR/attempt (resilience/fence.h), so that every rank of
// an ended attempt exits by itself, even on a host it cannot signal; it names the hosts a probe
// finds unreachable (resilience/reach.h) before every restart and on a hang at one point; a
// failure with an unreachable host does not spend the restart budget: the supervisor waits for
// the host with back-off, or restarts on the hosts that answer (min_hosts, resilience/elastic.h).
//
// Exit: 0 when the job completed; 130 when the supervisor was stopped (SIGINT / SIGTERM: the job
// is ended and the report written first). Everything else — a bad fault spec, a launcher or job
// that is not there, a failed preflight, restarts spent, a job that fails before its first step
// three attempts in a row — is a zaya::Error naming the cause (thrown after the report).
// Progress lines go to stderr, prefixed "supervise: ".
#pragma once
#include <string>
#include <vector>

#include "resilience/hang_detector.h"

namespace zaya {

struct SuperviseOptions {
  std::vector<std::string> launcher;  // words before the command ("mpirun", "-np", "2"), or none
  std::vector<std::string> command;   // the job ("zaya", "train", "--config", "x.toml")
  std::string dir = "zaya-supervise";
  int max_restarts = 10;
  HangTimeouts timeouts;
  double poll_s = 0.2;
  double restart_delay_s = 1;
  double grace_s = 5;       // SIGTERM → SIGKILL
  bool preflight = false;   // run `launcher zaya preflight` first
  std::string self_exe;     // the zaya binary for the preflight ("" = /proc/self/exe)
  std::string report;       // a second copy of goodput.json ("" = none)
  int max_no_progress = 3;  // attempts in a row that fail before their first step → give up
  // Across hosts (docs/fault-tolerance.md, "Across hosts"): the reachability probe's TCP port and
  // timeout; the least number of answering hosts an elastic restart runs on (0: none, wait for
  // the lost hosts instead); the most seconds in all spent waiting for unreachable hosts (past
  // it, failures with an unreachable host count against max_restarts like any other).
  int probe_port = 22;
  double probe_timeout_s = 2;
  int min_hosts = 0;
  double host_wait_s = 600;
};

// Splits a launcher string into words: blanks separate, '…' and "…" quote, \ escapes.
std::vector<std::string> split_words(const std::string& text);

// Runs the supervised job (see the file comment). Returns 0 or 130; throws zaya::Error.
int supervise(const SuperviseOptions& opt);

}  // namespace zaya
