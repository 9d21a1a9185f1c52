// The events of a supervised run (docs/fault-tolerance.md, "events.jsonl"): rank 0 appends one JSON
// object per line — start, step, anomaly, rollback, straggler, done — flushed after each, for the
// supervisor's goodput report. Nothing is written when the run is not supervised. Best effort:
// a failed write is reported once and never stops training.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>

namespace zaya {

class RunEvents {
 public:
  RunEvents() = default;
  RunEvents(const RunEvents&) = delete;
  RunEvents& operator=(const RunEvents&) = delete;
  ~RunEvents();

  // Opens ZAYA_SUPERVISE_DIR/events.jsonl for appending on rank 0 of a supervised run.
  void open(int rank);
  // Writes j (which names its "event") with the attempt number added.
  void write(nlohmann::json j);

 private:
  std::FILE* f_ = nullptr;
  bool warned_ = false;
};

}  // namespace zaya
