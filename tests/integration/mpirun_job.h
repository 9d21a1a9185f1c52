// Launching a whole job under mpirun from a test (label mpi): ZAYA_MPIRUN / ZAYA_MPIRUN_FLAGS
// come from tests/CMakeLists.txt; SKIP_WITHOUT_MPIRUN() skips where mpirun was not found.
#pragma once
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli_util.h"
#include "test_skips.h"
#include "test_util.h"

// Skips (an allowed reason: tests/test_skips.h) where CMake found no mpirun.
#define SKIP_WITHOUT_MPIRUN() \
  if (std::string(ZAYA_MPIRUN).empty()) ZAYA_SKIP(NoMpirun) << "none at configure time"

namespace zaya::test {

struct Job {
  CliResult r;
  double seconds = 0;
};

// Runs `mpirun -np N PROGRAM ARGS` and captures its exit, output and wall time.
inline Job mpirun(int ranks, const std::string& program, const std::string& args) {
  const ScratchDir scratch;
  const std::filesystem::path dir = scratch.path;
  const std::string cmd = std::string(ZAYA_MPIRUN) + " " + ZAYA_MPIRUN_FLAGS + " -np " +
                          std::to_string(ranks) + " " + program + " " + args + " </dev/null >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string();
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Job j;
  j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  j.r.crashed = WIFSIGNALED(status);
  j.r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  j.r.out = slurp((dir / "out").string());
  j.r.err = slurp((dir / "err").string());
  return j;
}

}  // namespace zaya::test
