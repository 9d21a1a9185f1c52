// MetricsLog (see metrics_log.h).
#include "train/metrics_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

// The lines of `path` up to the first one that is not a JSON object with an integer "step" <= S.
std::string kept_prefix(const std::string& path, int64_t start_step, int64_t& lines) {
  std::ifstream in(path, std::ios::binary);
  std::string kept, line;
  lines = 0;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: a torn last line
    try {
      const nlohmann::json j = parse_json(line);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
          j["step"].get<int64_t>() > start_step)
        break;
    } catch (const JsonError&) {
      break;
    }
    kept += line;
    kept += '\n';
    ++lines;
  }
  return kept;
}

void write_all(std::FILE* f, const std::string& s, const std::string& path) {
  if (std::fwrite(s.data(), 1, s.size(), f) != s.size() || std::fflush(f) != 0)
    fail("metrics file {}: write failed: {}", path, std::strerror(errno));
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, int64_t start_step) : path_(path) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (fs::is_regular_file(path, ec)) {  // not a device or a pipe (nothing to cut back there)
    // Rewritten atomically, so a crash here loses nothing.
    write_file(path, kept_prefix(path, start_step, kept_));
  }
  f_ = std::fopen(path.c_str(), "ab");
  if (!f_) fail("cannot open metrics file {}: {}", path, std::strerror(errno));
}

MetricsLog::MetricsLog(MetricsLog&& o) noexcept
    : path_(std::move(o.path_)), f_(std::exchange(o.f_, nullptr)), kept_(o.kept_) {}

MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    path_ = std::move(o.path_);
    f_ = std::exchange(o.f_, nullptr);
    kept_ = o.kept_;
  }
  return *this;
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::append(const nlohmann::json& j) {
  ZAYA_ASSERT(f_, "metrics file not open");
  write_all(f_, j.dump() + "\n", path_);
}

}  // namespace zaya
