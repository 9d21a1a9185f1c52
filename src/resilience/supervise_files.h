// The files of a supervised job's directory, as the supervisor reads them
// (docs/fault-tolerance.md): heartbeat_rankRRRRR.json, events.jsonl, error_rankRRRRR.txt,
// faults_fired.txt.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "resilience/hang_detector.h"

namespace zaya {

// Removes the files of the attempt before (heartbeats, events, error messages) — not
// faults_fired.txt, which spans the whole supervised job.
void remove_attempt_files(const std::string& dir);
// The heartbeat records that parse now (a torn one is left out: the caller keeps the last good).
std::vector<HeartbeatRecord> read_heartbeats(const std::string& dir);
// (rank, message) of each error_rankRRRRR.txt, by rank.
std::vector<std::pair<int, std::string>> read_rank_errors(const std::string& dir);
// The whole file; "" when it does not exist.
std::string read_text(const std::string& path);

}  // namespace zaya
