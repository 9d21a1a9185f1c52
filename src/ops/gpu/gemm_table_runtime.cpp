// The GEMM table's runtime side (gemm_table_runtime.h): the validators of this device, loading
// (validators and cublasLtMatmulAlgoCheck), gemm()'s hook, and the recording of the keys used.
// Host code. One process-wide table behind a mutex; gemm() pays one relaxed atomic load while
// neither a table nor a recording is active.
#include "ops/gpu/gemm_table_runtime.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "core/assert.h"
#include "io/file.h"
#include "ops/gpu/gemm_blaslt.h"
#include "ops/gpu/runtime.h"

namespace zaya::gpu {

using gemm_table::GemmDtype;
using gemm_table::GemmKey;
using gemm_table::Solution;
using gemm_table::SolutionKind;

namespace {

struct State {
  std::atomic<bool> active{false};  // a table or a recording
  std::mutex mu;
  std::map<GemmKey, Solution> table;
  // Keys the table lacks, each with the line that stands in for it (gemm_table::nearest_key),
  // or none: one search per key.
  std::map<GemmKey, std::optional<Solution>> stand_ins;
  GemmTableStats stats;
  std::string record_path;
  std::vector<GemmKey> used;  // first-use order
  std::set<GemmKey> seen;
  void update_active() { active.store(!table.empty() || !record_path.empty()); }
  // A new table (empty: none), its stand-ins and statistics from scratch. Under mu.
  void set_table(std::map<GemmKey, Solution> t) {
    table = std::move(t);
    stand_ins.clear();
    stats = {};
    update_active();
  }
  // The stand-in for a key the table lacks. Under mu.
  std::optional<Solution> stand_in(const GemmKey& key) {
    auto it = stand_ins.find(key);
    if (it == stand_ins.end()) {
      std::vector<GemmKey> keys;
      for (const auto& [k, solution] : table) keys.push_back(k);
      const std::optional<GemmKey> near = gemm_table::nearest_key(keys, key);
      it = stand_ins.emplace(key, near ? std::optional(table.at(*near)) : std::nullopt).first;
    }
    return it->second;
  }
};

State& state() {
  static State s;
  return s;
}

// g's key; false where g has none (mixed or other dtypes, an empty product). F32 operands with
// bf16_inputs are floatAsBFloat16; BF16 ones are BFloat16 with or without it (already bf16).
bool key_of(const Gemm& g, GemmKey& key) {
  if (g.a.dtype != g.b.dtype || (g.a.dtype != DType::F32 && g.a.dtype != DType::BF16)) return false;
  if (g.M <= 0 || g.N <= 0 || g.K <= 0) return false;
  const GemmDtype dt = g.a.dtype == DType::BF16 ? GemmDtype::BF16
                       : g.bf16_inputs          ? GemmDtype::F32AsBF16
                                                : GemmDtype::F32;
  key = gemm_table::key_of_row_major(dt, g.M, g.N, g.K, g.a.transposed, g.a.ld, g.b.transposed,
                                     g.b.ld, g.ldc);
  return true;
}

// The validator values may not hold the format's separators.
std::string clean(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\n' || c == '\r') c = ' ';
  return s.empty() ? "none" : s;
}

void write_at_exit() {
  try {
    write_gemm_recording();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya: error: %s\n", e.what());
  }
}

}  // namespace

std::vector<gemm_table::Validator> gemm_table_validators() {
  (void)stream();  // the device chosen
  int device = 0;
  ZAYA_GPU_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  ZAYA_GPU_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string name = prop.name;
#if defined(ZAYA_GPU_HIP)
  const std::string arch = prop.gcnArchName;
#else
  const std::string arch = fmt::format("{}.{}", prop.major, prop.minor);
#endif
  int version = 0;
  ZAYA_GPU_CHECK(cudaRuntimeGetVersion(&version));
  const std::string runtime = fmt::format("{} {}", ZAYA_GPU_VENDOR, version);
  return {{"ZAYA_GEMM_TABLE_VERSION", std::to_string(gemm_table::kVersion)},
          {"CUBLASLT_VERSION", blaslt_version()},
          {"GPU_NAME", clean(name)},
          {"GPU_ARCH", clean(arch)},
          {"GPU_RUNTIME", clean(runtime)}};
}

int64_t load_gemm_table(const std::string& path) {
  const gemm_table::Table t = gemm_table::load_table(path);
  gemm_table::check_validators(t, gemm_table_validators(), path);
  std::map<GemmKey, Solution> table;
  for (const gemm_table::Entry& e : t.entries) {
    if (e.solution.kind == SolutionKind::BlasLt) {
      const std::string why = blaslt_check(gemm_of_key(e.key), e.solution.algo);
      if (!why.empty())
        fail(
            "{}:{}: {},{}: its cuBLASLt algorithm cannot run here ({}); retune (zaya tune gemm) "
            "or drop the line",
            path, e.line, gemm_table::op_name(e.key), gemm_table::params(e.key), why);
    }
    table[e.key] = e.solution;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.set_table(std::move(table));
  return int64_t(t.entries.size());
}

void clear_gemm_table() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.set_table({});
}

GemmTableStats gemm_table_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.stats;
}

bool gemm_table_loaded() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return !s.table.empty();
}

void set_gemm_recording(const std::string& path) {
  State& s = state();
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(write_at_exit); });
  std::lock_guard<std::mutex> lock(s.mu);
  s.record_path = path;
  s.used.clear();
  s.seen.clear();
  s.update_active();
}

int64_t write_gemm_recording() {
  State& s = state();
  std::string path, text;
  int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.record_path.empty()) return 0;
    path = s.record_path;
    text = gemm_table::format_untuned(s.used);
    n = int64_t(s.used.size());
  }
  write_file(path, text);
  return n;
}

bool gemm_table_run(const Gemm& g) {
  State& s = state();
  if (!s.active.load(std::memory_order_relaxed)) return false;
  GemmKey key;
  if (!key_of(g, key)) return false;
  Solution sol;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.record_path.empty() && s.seen.insert(key).second) s.used.push_back(key);
    if (s.table.empty()) return false;
    ++s.stats.calls;
    const auto it = s.table.find(key);
    if (it != s.table.end()) {
      sol = it->second;
      ++s.stats.exact;
    } else {
      const std::optional<Solution> in = s.stand_in(key);
      if (!in) return false;
      sol = *in;
      ++s.stats.nearest;
    }
  }
  switch (sol.kind) {
    case SolutionKind::Default:
      return false;
    case SolutionKind::Tiled:
      gemm_tiled(g);
      return true;
    case SolutionKind::BlasLt:
      return gemm_blaslt_algo(g, sol.algo);
  }
  return false;
}

}  // namespace zaya::gpu
