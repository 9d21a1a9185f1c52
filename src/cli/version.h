// What `zaya --version` says about the binary: its version, the commit it was built from, and the
// configuration it was built with. The values live in a source generated at build time
// (scripts/build_info.cmake, compiled into the `zaya` binary only).
#pragma once
#include <string>

namespace zaya::cli {

struct BuildInfo {
  const char* version;     // the project's version (CMakeLists.txt's project())
  const char* commit;      // the short git commit, "-dirty" with uncommitted changes; "unknown"
  const char* build_type;  // CMAKE_BUILD_TYPE: Release, Debug, RelWithDebInfo
  const char* backends;    // "cpu", "cpu, cuda", "cpu, hip", "cpu, emu"
  bool mpi;                // the MPI process group (ZAYA_MPI)
  bool server;             // the HTTP server of `zaya serve` (ZAYA_SERVE)
};
extern const BuildInfo kBuildInfo;

// "zaya 0.1.0 (1a2b3c4d5e-dirty, Release, backends: cpu, cuda, mpi yes, server yes)"
std::string version_line(const BuildInfo& b);

}  // namespace zaya::cli
