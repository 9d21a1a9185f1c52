// Fault injection (ZAYA_FAULT): failures on purpose, through the code paths a real one takes — a
// SIGKILL, a hang, an exit, a slow rank, a NaN or a spike in the loss, a corrupted checkpoint —
// so that `zaya supervise`'s detection and recovery can be tested (docs/fault-tolerance.md).
//
// Grammar: comma-separated specs, each KIND@WHEN[:key:value...][:always]
//   KIND  kill | hang | exit | slow | nan | spike | corrupt-checkpoint
//   WHEN  step:N | setup | preflight (nan and slow only)
//   keys  rank:R (default 0)  section:S (heartbeat section; default forward-backward)
//         seconds:X (hang: forever by default; slow: 1)  factor:F (spike: 100)  code:C (exit: 1)
//   always  fire on every attempt; otherwise once per supervised job (ZAYA_SUPERVISE_DIR/
//           faults_fired.txt records the fired ones) or once per run (Trainer) when not supervised.
// kill with section:checkpoint fires inside the checkpoint write (after the tensors, before the
// manifest); corrupt-checkpoint fires once step N's checkpoint is complete.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya::faults {

enum class Kind { Kill, Hang, Exit, Slow, Nan, Spike, CorruptCheckpoint };
enum class When { Step, Setup, Preflight };

struct FaultSpec {
  std::string text;  // as written (the record in faults_fired.txt and the report)
  Kind kind = Kind::Kill;
  When when = When::Step;
  int64_t step = 0;
  int rank = 0;
  std::string section = "forward-backward";
  double seconds = -1;  // hang: −1 = forever; slow: 1 when not given
  double factor = 100;
  int code = 1;
  bool always = false;
};

// Throws zaya::Error naming the bad spec and what was expected.
std::vector<FaultSpec> parse_fault_specs(const std::string& text);

// Parses ZAYA_FAULT (a bad spec is a zaya::Error) for this rank and installs the section hook
// (core/heartbeat.h) that fires kill / hang / exit / slow. Call after heartbeat::start. The plan
// is read again when ZAYA_FAULT has changed since (a later Trainer in the same process).
void install(int rank);

// At the end of the trainer's setup (KIND@setup).
void at_setup();
// The loss this rank reports for `step`: NaN (nan) or loss × factor (spike) when a fault is due.
double apply_loss_fault(int64_t step, double loss);
// Inside a checkpoint write of `step` (kill@step:N:section:checkpoint).
void at_checkpoint_write(int64_t step);
// Whether step's complete checkpoint is to be corrupted now (corrupt-checkpoint@step:N); marks
// it fired.
bool corrupt_checkpoint_due(int64_t step);
// Flips a byte in the middle of the complete checkpoint's weights (DIR/model/model.safetensors),
// so that it no longer verifies.
void corrupt_checkpoint(const std::string& dir);

// `zaya preflight`'s sgemm check on this rank: extra seconds inside the timed product (slow) and
// whether its result is to be poisoned (nan).
struct PreflightFault {
  double slow_seconds = 0;
  bool nan = false;
};
PreflightFault preflight_fault(int rank);

}  // namespace zaya::faults
