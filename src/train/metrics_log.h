// MetricsLog: the per-step JSONL metrics file of `zaya train` (train.metrics). Every step appears
// exactly once: opening it for a run that starts at step S (0 = from scratch, else the resumed
// checkpoint's step) first cuts the file back to its lines with "step" <= S (dropping the steps
// after the checkpoint that a killed run had logged, and a torn last line), atomically (temporary
// file + rename). Every write is checked: a failed write (full disk, I/O error) is a zaya::Error
// naming the file, never a silently lost line.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace zaya {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Creates the parent directory if needed; throws zaya::Error.
  MetricsLog(const std::string& path, int64_t start_step);
  MetricsLog(MetricsLog&& o) noexcept;
  MetricsLog& operator=(MetricsLog&& o) noexcept;
  ~MetricsLog();

  bool is_open() const { return f_ != nullptr; }
  // One line, flushed; throws zaya::Error when the write or the flush fails.
  void append(const nlohmann::json& j);
  // Lines kept from an earlier run when the file was opened.
  int64_t kept_lines() const { return kept_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  int64_t kept_ = 0;
};

}  // namespace zaya
