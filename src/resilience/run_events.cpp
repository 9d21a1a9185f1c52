// events.jsonl of a supervised run (run_events.h).
#include "resilience/run_events.h"

#include <cerrno>
#include <cstring>

#include "core/heartbeat.h"
#include "core/log.h"

namespace zaya {

RunEvents::~RunEvents() {
  if (f_) std::fclose(f_);
}

void RunEvents::open(int rank) {
  if (f_ || rank != 0 || !heartbeat::supervised()) return;
  const std::string path = heartbeat::supervise_dir() + "/events.jsonl";
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) log_info("warning: cannot write {}: {} (no goodput events)", path, std::strerror(errno));
}

void RunEvents::write(nlohmann::json j) {
  if (!f_) return;
  j["attempt"] = heartbeat::attempt();
  const std::string line = j.dump() + "\n";
  if ((std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0) &&
      !warned_) {
    warned_ = true;
    log_info("warning: writing the supervisor's events.jsonl failed: {}", std::strerror(errno));
  }
}

}  // namespace zaya
