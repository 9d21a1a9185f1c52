// Reading a supervised job's directory (supervise_files.h).
#include "resilience/supervise_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace zaya {

namespace fs = std::filesystem;

namespace {

// The rank in a name PREFIX<digits>SUFFIX, or −1.
int rank_of(const std::string& name, const std::string& prefix, const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

// (rank, path) of the files PREFIX<rank>SUFFIX in dir, by rank.
std::vector<std::pair<int, std::string>> rank_files(const std::string& dir,
                                                    const std::string& prefix,
                                                    const std::string& suffix) {
  std::vector<std::pair<int, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int r = rank_of(e.path().filename().string(), prefix, suffix);
    if (r >= 0) out.emplace_back(r, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void remove_attempt_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& [rank, path] : rank_files(dir, "heartbeat_rank", ".json")) fs::remove(path, ec);
  for (const auto& [rank, path] : rank_files(dir, "error_rank", ".txt")) fs::remove(path, ec);
  fs::remove(fs::path(dir) / "events.jsonl", ec);
}

std::vector<HeartbeatRecord> read_heartbeats(const std::string& dir) {
  std::vector<HeartbeatRecord> out;
  for (const auto& [rank, path] : rank_files(dir, "heartbeat_rank", ".json"))
    if (auto r = parse_heartbeat(read_text(path)); r && r->rank == rank) out.push_back(*r);
  return out;
}

std::vector<std::pair<int, std::string>> read_rank_errors(const std::string& dir) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& [rank, path] : rank_files(dir, "error_rank", ".txt")) {
    std::string msg = read_text(path);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ' || msg.back() == '\r'))
      msg.pop_back();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    if (!msg.empty()) out.emplace_back(rank, msg);
  }
  return out;
}

}  // namespace zaya
