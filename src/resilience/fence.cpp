// The attempt file and the fencing watchdog (fence.h).
#include "resilience/fence.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "core/assert.h"
#include "core/heartbeat.h"
#include "io/file.h"
#include "resilience/supervise_files.h"

namespace zaya::fence {

std::string attempt_text(int attempt, bool ended) {
  return fmt::format("{} {}\n", attempt, ended ? "ended" : "running");
}

namespace {

// (number, ended) of a well-formed "N running" / "N ended" line; number 0 otherwise.
std::pair<int, bool> parse_attempt(const std::string& text) {
  int n = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || n < 1 || p == end || *p != ' ') return {0, false};
  const std::string state(p + 1, std::find(p + 1, end, '\n'));
  if (state != "running" && state != "ended") return {0, false};
  return {n, state == "ended"};
}

}  // namespace

int recorded_attempt(const std::string& text) {
  return parse_attempt(text).first;
}

std::string fence_reason(const std::string& text, int mine) {
  const auto [n, ended] = parse_attempt(text);
  if (n > mine) return fmt::format("attempt {} has {}", n, ended ? "ended" : "started");
  if (n == mine && ended) return fmt::format("attempt {} has ended", n);
  return "";
}

void write_attempt(const std::string& dir, int attempt, bool ended) {
  // No fsync: the file matters to the processes running now, not after a power cut.
  write_file(dir + "/attempt", attempt_text(attempt, ended),
             WriteMode{.atomic = true, .fsync = false});
}

void start_watchdog(double interval_s) {
  static std::atomic<bool> started{false};
  // Only under a supervisor, which names the attempt (a rank without one has none to be fenced by).
  const char* attempt = std::getenv("ZAYA_SUPERVISE_ATTEMPT");
  if (!heartbeat::supervised() || !attempt || !*attempt || started.exchange(true)) return;
  const std::string path = heartbeat::supervise_dir() + "/attempt";
  const int mine = heartbeat::attempt();
  std::thread([path, mine, interval_s] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
      heartbeat::touch();
      const std::string why = fence_reason(read_text(path), mine);
      if (why.empty()) continue;
      // One write, no locks: the other threads may hold any of them (a hung collective).
      const std::string line = fmt::format(
          "zaya: fenced: {} says {} (this rank is of attempt {}): exiting with code {}\n", path,
          why, mine, kExitCode);
      [[maybe_unused]] ssize_t n = ::write(2, line.data(), line.size());
      ::_exit(kExitCode);
    }
  }).detach();
}

}  // namespace zaya::fence
