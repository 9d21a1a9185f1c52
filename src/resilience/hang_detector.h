// Hang detection for `zaya supervise` (docs/fault-tolerance.md, "Localising a hang"): pure logic
// over the ranks' heartbeat records and the supervisor-clock time each record's `seq` last changed.
//
// Timeouts per section: setup (also while a rank's heartbeat file does not exist yet), eval and
// checkpoint are fixed (600 s by default); the in-step sections data / forward-backward /
// collective / optimizer are "auto": 600 s until a step has completed (on any rank), then
// max(floor, factor × the slowest step seen on any rank). Each can be set by name.
//
// The job is hung when a rank it waits for is silent past its section's timeout — the ranks at
// fault are those with the fewest collectives entered, then the lowest step, then the earliest
// section — or when every rank still running is silent past its own. A rank in "done" is never
// hung (and never at fault).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/heartbeat.h"

namespace zaya {

// One heartbeat_rankRRRRR.json record.
struct HeartbeatRecord {
  int attempt = 0, rank = 0, world = 1;
  std::string host;
  int64_t pid = 0, seq = 0, step = 0, last_step = 0, collectives = 0;
  int64_t beat = 0;                // liveness beats of the rank's fencing watchdog (0: none)
  std::vector<std::string> addrs;  // the host's IPv4 addresses (absent in older records)
  heartbeat::Section section = heartbeat::Section::Setup;
  std::string detail;
  double max_step_s = 0, max_eval_s = 0, max_checkpoint_s = 0;
  double time = 0;
};
// Parses one record (trailing padding allowed); nullopt for a torn or malformed one.
std::optional<HeartbeatRecord> parse_heartbeat(const std::string& text);

// What the supervisor knows of one rank.
struct RankState {
  int rank = 0;
  bool seen = false;       // a record has been read (else: in setup since the attempt began)
  HeartbeatRecord record;  // the newest record read (when seen)
  double changed_at = 0;   // supervisor clock: when `seq` last changed (or the attempt began)
};

constexpr int kSections = int(heartbeat::Section::Done) + 1;

struct HangTimeouts {
  // Seconds per section; a negative value is "auto" (the in-step sections by default).
  std::array<double, kSections> seconds{600, -1, -1, -1, -1, 600, 600, 0};
  double before_first_step = 600;  // "auto" before any step completed
  double floor = 60, factor = 10;  // "auto" after: max(floor, factor × max_step_s)
};
// Applies "SECTION=SECONDS" (a section name, or "step" for all four in-step sections; SECONDS a
// positive number, or "auto" for an in-step section). Throws zaya::Error on a bad one.
void set_timeout(HangTimeouts& t, const std::string& assignment);
// The timeout that applies now to section `s`, given the slowest step seen (0: none yet).
double section_timeout(const HangTimeouts& t, heartbeat::Section s, double max_step_s);

// A rank named in a verdict.
struct RankReport {
  int rank = 0;
  std::string host;  // "" when its heartbeat file does not exist yet
  heartbeat::Section section = heartbeat::Section::Setup;
  std::string detail;
  int64_t step = 0;
  double silence_s = 0, timeout_s = 0;
  bool seen = false;
};

struct HangVerdict {
  bool hung = false;
  std::vector<RankReport> at_fault;  // the ranks the others wait for
  std::vector<RankReport> waiting;   // the other ranks still running
  bool same_point = false;           // every running rank is at fault: inside the collective
  // One line: "rank 1 on host H silent 3.2 s in forward-backward of step 5 (timeout 3.0 s);
  // rank 0 waits in collective all_reduce".
  std::string message;
};

// `ranks` is every rank of the job (those without a record included, seen=false); `now` on the
// same clock as changed_at.
HangVerdict detect_hang(const std::vector<RankState>& ranks, double now, const HangTimeouts& t);

}  // namespace zaya
