// A graceful stop of `zaya train` on SIGINT (Ctrl-C) or SIGTERM (kill, a scheduler, `zaya
// supervise`): the first signal only records itself; the trainer finishes the step in progress,
// writes a checkpoint and returns, and the command says where the checkpoint is and how to resume
// (exit 128 + the signal: 130 or 143). A second signal aborts at once (exit 128 + the signal),
// for a step that would take too long. Several ranks agree on the step they stop after
// (train/trainer.cpp: the step's agreed all-reduce carries every rank's flag).
#pragma once

namespace zaya {

// Installs the handlers for SIGINT and SIGTERM (SA_RESTART: no system call fails because of
// them). `announce`: the first signal writes one line to stderr saying what happens next.
void install_stop_signals(bool announce);
// The first stop signal received since install (SIGINT or SIGTERM), or 0. Async-signal-safe.
int stop_signal_received();
// Forgets a received signal (a new run in the same process starts clean).
void clear_stop_signal();

// "SIGINT", "SIGTERM" ("a signal" for any other).
const char* stop_signal_name(int sig);

}  // namespace zaya
