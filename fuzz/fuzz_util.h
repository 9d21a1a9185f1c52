// Shared by the fuzz targets: the input written to a per-process file (for the readers that take
// a path), and the one rule every target checks — a zaya::Error (a clear user error) is fine,
// anything else (another exception, a crash, a sanitizer report) is a finding.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/assert.h"

namespace zaya::fuzz {

// Writes data to $TMPDIR/zaya_fuzz_<pid>_<name> and returns the path (overwritten each call).
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("zaya_fuzz_" + std::to_string(getpid()) + "_" + name))
                               .string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// Runs f; a zaya::Error is an accepted outcome, any other exception escapes (libFuzzer reports it
// as a crash; the replay driver as a failure).
template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace zaya::fuzz
