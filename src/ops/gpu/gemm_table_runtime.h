// The GEMM tuning table on the GPU (the format: io/gemm_table.h; docs/gpu.md). A loaded table makes
// gemm() (gemm.h) run, for each GEMM whose key it lists, that solution: our tiled kernel, a given
// cuBLASLt algorithm, or the default; every other GEMM runs as without a table. Recording writes
// the keys of the GEMMs a run used (the untuned file). Tuning times the candidates of each key.
// Host code without vendor headers (train/ and cli/ include it); a build without a GPU links
// no_gpu.cpp, where each entry point fails with one clear zaya::Error.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/gemm_table.h"
#include "ops/gpu/gemm.h"

namespace zaya::gpu {

// The running library's and device's validators (the five of io/gemm_table.h).
std::vector<gemm_table::Validator> gemm_table_validators();

// Reads `path`, checks its validators against this device and library and each cuBLASLt
// algorithm with cublasLtMatmulAlgoCheck (a zaya::Error naming the line otherwise), and makes
// gemm() follow it from now on (replacing any table loaded before). Returns the entry count.
int64_t load_gemm_table(const std::string& path);
void clear_gemm_table();
bool gemm_table_loaded();

// From now on, every GEMM gemm() runs (engine Auto, ZAYA_GPU_GEMM unset or auto) is noted; the
// distinct keys, in first-use order, are written to `path` as an untuned file by
// write_gemm_recording() and at process exit. Mixed-dtype and K = 0 GEMMs have no key. An empty
// path stops recording (nothing written).
void set_gemm_recording(const std::string& path);
// Writes the recording now (nothing when none was set); returns the keys written.
int64_t write_gemm_recording();

// The GEMM of a key, pointers null (alpha 1, beta 0).
Gemm gemm_of_key(const gemm_table::GemmKey& key);

// gemm()'s hook: notes g when recording; runs g with the table's solution for its key — or,
// where the table lacks it, for the key that stands in for it (gemm_table::nearest_key: an
// expert's GEMM whose row count routing moved off the tuned one, within a factor of 2) — and
// returns true, or returns false (the caller runs its default) where there is none, it says
// Default, or its cuBLASLt algorithm cannot take g (cublasLtMatmulAlgoCheck on g's own layouts,
// its pointers' alignment).
bool gemm_table_run(const Gemm& g);

// How gemm_table_run served the GEMMs that have a key since the table was loaded: `exact` found
// their own line, `nearest` a stand-in (gemm_table::nearest_key), the rest ran the default.
// All zero without a table.
struct GemmTableStats {
  int64_t calls = 0, exact = 0, nearest = 0;
};
GemmTableStats gemm_table_stats();

struct GemmTuneOptions {
  int candidates = 8;  // cuBLASLt heuristic results to time (besides the default and tiled)
  int reps = 20;       // timed calls per candidate (after one warm-up call)
};
struct GemmTuneResult {
  gemm_table::GemmKey key;
  gemm_table::Solution best;  // Default when nothing beat the default by 1%
  double default_ms = 0, best_ms = 0;
  int timed = 0;     // candidates timed, the default included
  int rejected = 0;  // candidates whose result differed from the default's
};
// Times, for each key, the default, our tiled kernel and the cuBLASLt heuristic's candidates, on
// rotating sets of buffers (so a call does not find the previous call's operands in L2), checks
// each candidate's result against the default's (relative L2 error ≤ 1e-5 for float, 1e-3 for
// BFloat16, 1e-2 for floatAsBFloat16) and keeps the fastest valid one. `done` is called after each
// key. No table may be loaded (the default must be the default).
std::vector<GemmTuneResult> tune_gemms(const std::vector<gemm_table::GemmKey>& keys,
                                       const GemmTuneOptions& options,
                                       const std::function<void(const GemmTuneResult&)>& done);

}  // namespace zaya::gpu
