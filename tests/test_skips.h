// When a test may skip. A skip is allowed only when the machine lacks something the test cannot
// run without; the reasons are the table below, each with why it is allowed. Everything else a
// test needs (fixtures, downloads of scripts/setup.sh, a server that starts) must be there: a test
// that cannot run for any other reason has found a broken setup, which is a failure.
//
// The main of every test executable (tests/gtest_main.cpp) prints each skip's reason and, with
// ZAYA_STRICT_SKIPS=1 (on in CI: `make ci`), fails a test whose skip message does not begin with an
// allowed reason. Every ctest run ends with the count of skips by reason
// (tests/skip_summary.cmake).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace zaya::test {

enum class SkipReason { NoGpu, GpuPresent, NoMpirun, NoNccl, NoCpuFeature, NotRoot, NoNamespaces };

struct AllowedSkip {
  SkipReason reason;
  std::string_view prefix;  // a skip message that begins with this has this reason
  std::string_view name;    // its name in the summary
};

inline constexpr AllowedSkip kAllowedSkips[] = {
    // GPU against CPU tests need a device; the CPU machines have none. They run on GPU hosts
    // (scripts/gpu_check.sh) and under the GPU emulator (scripts/gpu_emu/run.sh).
    {SkipReason::NoGpu, "no GPU", "no GPU"},
    // The tests of the no-GPU error paths (a GPU op, train.device = gpu or --device gpu without a
    // device or a GPU backend) need a machine or a build without one; on a GPU host the GPU tests
    // run those paths for real.
    {SkipReason::GpuPresent, "a GPU is present", "a GPU is present"},
    // The mpi tests launch jobs with mpirun, which a machine without MPI does not have (CMake
    // says so at configure time: "mpirun not found").
    {SkipReason::NoMpirun, "mpirun not found", "no MPI launcher"},
    // The NCCL tests need NCCL: its header (only the CUDA build has nccl.h) or its library (a GPU
    // host without libnccl.so).
    {SkipReason::NoNccl, "no NCCL", "no NCCL"},
    // Kernels for an instruction set the build compiles but this CPU does not run (the AVX-512
    // VNNI kernels of quant/dot.h on a CPU without AVX-512): only that ISA's cases skip; the
    // same tests run the other ISAs.
    {SkipReason::NoCpuFeature, "the CPU lacks", "CPU feature missing"},
    // The multi-host tests make their hosts as network and UTS namespaces with a bridge and veth
    // links between them (scripts/multihost.sh), which takes root; a container may also deny
    // namespaces to root. (Slurm missing is not a reason: scripts/setup.sh installs it.)
    {SkipReason::NotRoot, "not root", "not root"},
    {SkipReason::NoNamespaces, "no network namespaces", "no network namespaces"},
};

inline const AllowedSkip& allowed_skip(SkipReason r) {
  for (const AllowedSkip& a : kAllowedSkips)
    if (a.reason == r) return a;
  std::abort();
}

// The allowed reason of a skip message, or nullptr when it has none.
inline const AllowedSkip* allowed_skip_of(std::string_view message) {
  for (const AllowedSkip& a : kAllowedSkips)
    if (message.substr(0, a.prefix.size()) == a.prefix) return &a;
  return nullptr;
}

// ZAYA_STRICT_SKIPS=1: a skip for a reason not in kAllowedSkips is a failure.
inline bool strict_skips() {
  const char* v = std::getenv("ZAYA_STRICT_SKIPS");
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace zaya::test

// Skips the test for an allowed reason: ZAYA_SKIP(NoGpu) << gpu::describe(); gives the message
// "no GPU: <what describe says>".
#define ZAYA_SKIP(reason) \
  GTEST_SKIP() << ::zaya::test::allowed_skip(::zaya::test::SkipReason::reason).prefix << ": "
