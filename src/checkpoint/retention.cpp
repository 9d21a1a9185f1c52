// Listing, pruning, finding and cleaning checkpoints (retention.h, checkpoint.h).
#include "checkpoint/retention.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "core/assert.h"
#include "core/log.h"

namespace zaya {

namespace fs = std::filesystem;

int64_t parse_step_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0) return -1;
  int64_t step = -1;
  const char* b = name.data() + 5;
  const char* e = name.data() + name.size();
  auto [ptr, err] = std::from_chars(b, e, step);
  if (err != std::errc() || ptr != e || step < 0) return -1;
  return step;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::end(it); it.increment(ec)) {
    int64_t step = parse_step_name(it->path().filename().string());
    if (step >= 0 && it->is_directory()) out.emplace_back(step, it->path().string());
  }
  if (ec) fail("{}: cannot list checkpoints: {}", root, ec.message());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

void remove_all_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) log_info("warning: could not remove {}: {}", path, ec.message());
}

void prune_checkpoints(const std::string& root, int64_t step, int keep_last) {
  if (keep_last <= 0) return;
  int kept = 0;
  std::error_code ec;
  for (const auto& [s, path] : list_checkpoints(root)) {
    if (s > step) continue;  // a later run's checkpoints are not ours to prune
    if (!fs::exists(path + "/" + kManifest, ec)) continue;  // torn: not counted, left alone
    if (++kept > keep_last) {
      log_debug("checkpoint: removing old {}", path);
      remove_all_quietly(path);
    }
  }
}

std::string checkpoint_dir_name(int64_t step) {
  return fmt::format("step_{:08d}", step);
}

int64_t checkpoint_step(const std::string& dir) {
  return parse_step_name(fs::path(dir).filename().string());
}

std::string find_latest_valid_checkpoint(const std::string& root, int64_t before_step) {
  for (const auto& [step, path] : list_checkpoints(root)) {
    if (step >= before_step) continue;
    std::string why = verify_checkpoint(path);
    if (why.empty()) return path;
    log_info("warning: skipping checkpoint {}: {}", path, why);
  }
  return "";
}

int discard_checkpoints_after(const std::string& root, int64_t step) {
  int removed = 0;
  for (const auto& [s, path] : list_checkpoints(root)) {
    if (s <= step) continue;
    log_info("checkpoint: discarding {} (after the rollback point, step {})", path, step);
    remove_all_quietly(path);
    ++removed;
  }
  return removed;
}

std::string find_resume_checkpoint(const std::string& root) {
  const std::string latest = find_latest_valid_checkpoint(root);
  if (!latest.empty()) return latest;
  const auto all = list_checkpoints(root);
  if (!all.empty())
    fail(
        "{}: {} checkpoint(s) (newest {}) but none verifies (see the warnings above); refusing to "
        "start from step 0 and overwrite them: repair or move them away, or set resume = \"none\" "
        "to train from scratch",
        root, all.size(), all.front().second);
  return "";
}

namespace {

// ".tmp_step_00000042_123" / ".old_step_00000042_123" → ("step_00000042", 123); pid -1 otherwise.
std::pair<std::string, int64_t> parse_temp_name(const std::string& name,
                                                const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return {"", -1};
  const size_t us = name.rfind('_');
  if (us == std::string::npos || us <= prefix.size()) return {"", -1};
  const std::string step_name = name.substr(prefix.size(), us - prefix.size());
  int64_t pid = -1;
  const char* b = name.data() + us + 1;
  const char* e = name.data() + name.size();
  auto [ptr, err] = std::from_chars(b, e, pid);
  if (err != std::errc() || ptr != e || pid <= 0 || parse_step_name(step_name) < 0) return {"", -1};
  return {step_name, pid};
}

// True when process `pid` runs (on this machine) and is not this process.
bool other_process_alive(int64_t pid) {
  if (pid == int64_t(::getpid())) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

uint64_t tree_bytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  return bytes;
}

}  // namespace

int remove_stale_checkpoint_temps(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return 0;
  std::vector<fs::path> entries;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::end(it); it.increment(ec))
    entries.push_back(it->path());
  int removed = 0;
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    for (const char* prefix : {".tmp_", ".old_"}) {
      const auto [step_name, pid] = parse_temp_name(name, prefix);
      if (pid < 0 || !fs::is_directory(p, ec)) continue;
      if (other_process_alive(pid)) {
        log_info("warning: leaving {}: process {} (its writer?) is still running", p.string(), pid);
        continue;
      }
      const fs::path final_dir = fs::path(root) / step_name;
      if (std::string(prefix) == ".old_" && !fs::exists(final_dir, ec)) {
        // Killed between moving the old copy aside and renaming the new one into place.
        fs::rename(p, final_dir, ec);
        if (!ec) {
          log_info("checkpoint: restored {} from {} (a replacement was interrupted)",
                   final_dir.string(), name);
          continue;
        }
      }
      const uint64_t bytes = tree_bytes(p.string());
      remove_all_quietly(p.string());
      log_info("checkpoint: removed {} ({} bytes) left by an interrupted write", p.string(), bytes);
      ++removed;
    }
  }
  return removed;
}

}  // namespace zaya
