// Running `zaya bench step` from tests with TMPDIR inside the test's scratch directory, so a test
// sees the temporary dataset come and go (dir/tmp is empty again after the run).
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli_util.h"
#include "test_util.h"

namespace zaya::test {

inline CliResult run_bench_step_in(const ScratchDir& dir, const std::string& args) {
  std::filesystem::create_directories(dir / "tmp");
  setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  CliResult r = run_zaya_in(dir.path, "bench step " + args);
  unsetenv("TMPDIR");
  return r;
}

}  // namespace zaya::test
