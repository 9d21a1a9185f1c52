// Fencing: a rank of a supervised job never runs beside its replacement, and a supervisor that
// ends leaves no rank running, even on a host it cannot signal (a partitioned one).
//
// The supervisor records its current attempt in DIR/attempt (DIR = ZAYA_SUPERVISE_DIR), one line
// "N running" written before attempt N is launched and "N ended" once attempt N has been torn
// down (and when the supervisor exits), each written atomically (a temporary file renamed over
// it). Every rank runs a watchdog thread (start_watchdog, started by the trainer right after the
// heartbeat) that reads the file every interval and exits the process at once — one line to
// stderr, then _exit(kExitCode) — when it names a newer attempt than the rank's own
// (ZAYA_SUPERVISE_ATTEMPT) or the rank's own attempt as ended. A missing or unreadable file fences
// nothing (a job not under a supervisor that writes it). The same thread rewrites the rank's
// heartbeat record with a new `beat` (heartbeat::touch), so the supervisor sees which ranks are
// still alive after a tear-down (docs/fault-tolerance.md, "attempt").
#pragma once
#include <string>

namespace zaya::fence {

// The exit code of a fenced rank (distinct from a crash's 1, SIGINT's 130 and SIGTERM's 143).
constexpr int kExitCode = 75;

// DIR/attempt's line: "N running\n" or "N ended\n".
std::string attempt_text(int attempt, bool ended);
// The attempt number DIR/attempt's text names (0 when it names none).
int recorded_attempt(const std::string& text);
// Why a rank of attempt `mine` must stop, given DIR/attempt's text: "attempt 3 has started" or
// "attempt 2 has ended"; "" to keep running (also for a text that does not parse).
std::string fence_reason(const std::string& text, int mine);

// Supervisor side: writes DIR/attempt atomically. Throws zaya::Error naming the file on failure.
void write_attempt(const std::string& dir, int attempt, bool ended);

// Rank side: starts the watchdog thread once per process (a no-op unless ZAYA_SUPERVISE_DIR and
// ZAYA_SUPERVISE_ATTEMPT are set): every
// `interval_s` it touches the heartbeat and reads DIR/attempt, and ends the process when fenced.
void start_watchdog(double interval_s = 0.5);

}  // namespace zaya::fence
