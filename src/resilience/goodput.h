// The goodput report of `zaya supervise`: where the wall time of a supervised job went. A pure
// function of the supervisor's attempt records (launch / end on its steady clock, how each ended)
// and each attempt's events.jsonl and faults_fired.txt (docs/fault-tolerance.md).
//
// The parts sum to the wall time, each one ≥ 0:
//   wall = productive + overhead (before_launch + setup + after_step + shutdown) + anomalies
//          + Σ failures (detection + restart + recomputed + other)
// - productive: step_s of the steps in the final result (a step redone later — after a restart
//   from an older checkpoint, or after a rollback — is lost work; a skipped step is lost to its
//   anomaly). If the job did not complete, the steps of its last attempt count as kept.
// - overhead: before_launch (supervisor start to the first launch: preflight), setup (the first
//   attempt's setup_s), after_step (after_s of the kept steps: log, eval, checkpoint), shutdown
//   (the completed attempt's time outside setup and steps — launcher start-up, exit — and the
//   supervisor's own end).
// - anomalies: skipped steps, steps undone by a rollback and the rollbacks' own seconds.
// - per failed attempt: detection (hang: the at-fault rank's silence until the job was ended;
//   crash: the attempt's last heartbeat change until its end), restart (the gap to the next
//   launch + the next attempt's setup), recomputed (the steps this attempt ran that were redone
//   because of it), other (the rest of the attempt: launcher start-up, the step in flight).
// Inside one attempt the job's own durations (setup_s, step_s, after_s) are trusted; if with the
// detection they exceed the attempt's measured length, they are scaled down to fit.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "core/enum_words.h"

namespace zaya {

// One attempt's events.jsonl.
struct AttemptEvents {
  bool started = false;  // a "start" event was seen
  int64_t resumed_step = 0;
  double setup_s = 0;
  bool done = false;
  struct Item {  // "step" and "rollback" events, in file order
    bool rollback = false;
    int64_t step = 0;  // step: its number; rollback: the step after which it rolled back
    double step_s = 0, after_s = 0;
    bool skipped = false;
    int64_t to_step = 0;  // rollback: the checkpoint step it went back to
    double seconds = 0;   // rollback: its own time
  };
  std::vector<Item> items;
  std::vector<nlohmann::json> anomalies, rollbacks, stragglers;  // the events as written
  int torn_lines = 0;                                            // lines that did not parse
};
AttemptEvents parse_events(const std::string& text);

// faults_fired.txt: "<spec>\t<rank>\t<attempt>" per line (malformed lines are skipped).
struct FiredFault {
  std::string spec;
  int rank = 0, attempt = 0;
};
std::vector<FiredFault> parse_faults_fired(const std::string& text);

enum class AttemptEnd { Completed, Crashed, Hung, Stopped };
const char* attempt_end_name(AttemptEnd e);  // "completed", "crash", "hang", "stopped"

struct AttemptRecord {
  int attempt = 1;
  double launch_s = 0, end_s = 0;  // supervisor clock (end: the job's processes are gone)
  AttemptEnd end = AttemptEnd::Completed;
  std::string exit;   // "exit code 1", "signal SIGKILL"
  std::string cause;  // one line: the hang verdict, or the job's error message
  // Supervisor clock: when the job was last seen making progress (a heartbeat seq change; the
  // launch when none). For a hang: when the at-fault rank fell silent.
  double progress_stop_s = 0;
  AttemptEvents events;
  // Across hosts: the hosts its ranks ran on (from the heartbeats), those the reachability probe
  // found unreachable when it ended ("zmh3 (10.78.0.13)"), and its ranks still alive after the
  // tear-down ("rank 2 on host zmh3 (pid 77)"). A failure with an unreachable host does not
  // spend the restart budget.
  std::vector<std::string> hosts, unreachable_hosts, left_running;
};

// How the supervised job ended: it completed; the restarts ran out; an attempt made no progress
// (the same failure before the first step, every time); or it was stopped (a signal, a failed
// pre-flight check).
enum class JobOutcome { Completed, RestartsSpent, NoProgress, Stopped };
template <>
struct EnumWords<JobOutcome> {
  static constexpr std::pair<JobOutcome, std::string_view> words[] = {
      {JobOutcome::Completed, "completed"},
      {JobOutcome::RestartsSpent, "restarts spent"},
      {JobOutcome::NoProgress, "no progress"},
      {JobOutcome::Stopped, "stopped"}};
};

struct GoodputInput {
  double start_s = 0, end_s = 0;  // the supervisor's own run
  std::vector<AttemptRecord> attempts;
  std::vector<FiredFault> faults;
  JobOutcome outcome = JobOutcome::Completed;
};

// The report, one JSON object (seconds are wall seconds; times of attempts are from the
// supervisor's start):
//   outcome             completed | restarts spent | no progress | stopped
//   wall_s, productive_s, goodput (= productive_s / wall_s), overhead_s, anomaly_s, failures_s,
//   parts_sum_s         productive + overhead + anomalies + failures (= wall_s)
//   overhead            {before_launch_s, setup_s, after_step_s, shutdown_s}
//   attempts[]          {attempt, launch_s, end_s, outcome (completed|crash|hang|stopped), exit
//                        ("exit code 1" | "signal SIGKILL"), cause, resumed_step, setup_s, steps,
//                        clock_scale, torn_event_lines, hosts[], unreachable_hosts[],
//                        left_running[]}
//   restarts            attempts − 1
//   failures[]          one per attempt that did not complete: {attempt, kind (crash|hang|
//                        stopped), exit, cause, detection_s, restart_s, recomputed_s,
//                        recomputed_steps[], other_s, total_s, unreachable_hosts[]}
//   unreachable_hosts[] every host found unreachable in any attempt ("zmh3 (10.78.0.13)")
//   steps_kept, steps_skipped, steps_recomputed, steps_rolled_back
//   faults_fired[]      {spec, rank, attempt}
//   anomalies[], rollbacks[], stragglers[]   the job's events as it wrote them
nlohmann::json goodput_report(const GoodputInput& in);
// The human-readable summary of a report, several lines, each ending in '\n'.
std::string goodput_summary(const nlohmann::json& report);

}  // namespace zaya
