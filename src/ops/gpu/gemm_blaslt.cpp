// gemm_blaslt of gemm.h: cuBLASLt on NVIDIA (host code). cuBLASLt is column-major, zaya is
// row-major: a row-major [R,C] matrix is the column-major [C,R] one, so row-major C = op(A)·op(B)
// is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B goes in as the library's first operand, A as its second,
// each with its own transpose flag, and m = N, n = M. Strict FP32 arithmetic (CUBLAS_COMPUTE_32F:
// no TF32) unless g.bf16_inputs (CUBLAS_COMPUTE_32F_FAST_16BF: F32 data down-converted to bf16
// for the tensor cores, f32 accumulation), A/B F32 or BF16 (one dtype for both), C F32. One
// handle, a 32 MiB workspace and, per
// shape key (sizes, strides, transposes, dtype, pointer alignments), the descriptors and the
// heuristic's algorithm, all made on first use and kept for the process (counted and timed:
// gpu::gemm_plan_stats). Also gemm_blaslt.h (the
// tuning table's side: heuristic lists, cublasLtMatmulAlgoCheck, runs with a given algorithm).
// Compiled only where cuBLASLt is (the CUDA
// build); every other build links no_blaslt.cpp, which declines every call.
#include "ops/gpu/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/assert.h"
#include "core/device.h"
#include "ops/gpu/gemm_blaslt.h"
#include "ops/gpu/runtime.h"

namespace zaya::gpu {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

void check(cublasStatus_t status, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cuBLASLt: {} failed: {} ({})", expr, cublasLtGetStatusName(status),
         cublasLtGetStatusString(status));
}
#define ZAYA_LT_CHECK(expr) check((expr), #expr)

struct Library {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  Library() {
    ZAYA_LT_CHECK(cublasLtCreate(&handle));
    workspace = cached_alloc(kWorkspaceBytes);
  }
};

Library& library() {
  static Library lib;
  return lib;
}

// gemm_plan_stats (core/device.h): the plans made so far and their host time, updated under the
// plan caches' locks.
std::mutex stats_mu;
GemmPlanStats stats;

// make() timed into the statistics.
template <class F>
auto timed_plan(F make) {
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = make();
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  std::lock_guard<std::mutex> lock(stats_mu);
  ++stats.plans;
  stats.seconds += dt.count();
  return plan;
}

// The largest power of two ≤ 256 that divides the address (the heuristic's alignment hint).
int64_t alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  int64_t a = 256;
  while (a > 1 && u % uintptr_t(a) != 0) a /= 2;
  return a;
}

// The operation and the three layouts of g (its shape, strides, transposes, dtypes; not its
// pointers).
struct Layouts {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  void destroy() {
    cublasLtMatrixLayoutDestroy(out);
    cublasLtMatrixLayoutDestroy(second);
    cublasLtMatrixLayoutDestroy(first);
    cublasLtMatmulDescDestroy(desc);
  }
};

struct Plan {
  Layouts l;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
};

using Key = std::array<int64_t, 13>;

cudaDataType_t lt_type(DType t) {
  return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

Layouts make_layouts(const Gemm& g) {
  Layouts p;
  // The library's operands: first = op(B)ᵀ [N,K] column-major, second = op(A)ᵀ [K,M].
  const cublasOperation_t op_first = g.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  // F32 operands rounded to bf16 (Gemm::bf16_inputs): the library's bf16 tensor-core mode for
  // f32 data; BF16 operands are bf16 already (plain f32 compute).
  const cublasComputeType_t compute =
      g.bf16_inputs && g.a.dtype == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
  ZAYA_LT_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
  ZAYA_LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                               sizeof(op_first)));
  ZAYA_LT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                               sizeof(op_second)));
  // Stored column-major shapes: B is [N,K] as is (rows N) or [K,N] when transposed (rows K).
  const uint64_t first_rows = uint64_t(g.b.transposed ? g.K : g.N);
  const uint64_t first_cols = uint64_t(g.b.transposed ? g.N : g.K);
  const uint64_t second_rows = uint64_t(g.a.transposed ? g.M : g.K);
  const uint64_t second_cols = uint64_t(g.a.transposed ? g.K : g.M);
  ZAYA_LT_CHECK(
      cublasLtMatrixLayoutCreate(&p.first, lt_type(g.b.dtype), first_rows, first_cols, g.b.ld));
  ZAYA_LT_CHECK(
      cublasLtMatrixLayoutCreate(&p.second, lt_type(g.a.dtype), second_rows, second_cols, g.a.ld));
  ZAYA_LT_CHECK(
      cublasLtMatrixLayoutCreate(&p.out, CUDA_R_32F, uint64_t(g.N), uint64_t(g.M), g.ldc));
  return p;
}

// Up to `count` heuristic results for the layouts and the operands' alignments (bytes).
std::vector<cublasLtMatmulHeuristicResult_t> heuristic(const Layouts& l, uint32_t align_first,
                                                       uint32_t align_second, uint32_t align_out,
                                                       int count) {
  cublasLtMatmulPreference_t pref = nullptr;
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = kWorkspaceBytes;
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace, sizeof(workspace)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof(align_first)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof(align_second)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out, sizeof(align_out)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out, sizeof(align_out)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(size_t(count > 0 ? count : 0));
  int found = 0;
  const cublasStatus_t st =
      count > 0 ? cublasLtMatmulAlgoGetHeuristic(library().handle, l.desc, l.first, l.second, l.out,
                                                 l.out, pref, count, results.data(), &found)
                : CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulPreferenceDestroy(pref);
  // A failed query (NOT_SUPPORTED: no algorithm for this combination; INVALID_VALUE: layouts it
  // rejects) gives none.
  if (st != CUBLAS_STATUS_SUCCESS) found = 0;
  results.resize(size_t(found));
  std::erase_if(results, [](const auto& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  return results;
}

Plan make_plan(const Gemm& g, const Key& key) {
  Plan p;
  p.l = make_layouts(g);
  const auto results = heuristic(p.l, uint32_t(key[10]), uint32_t(key[11]), uint32_t(key[12]), 1);
  // None: gemm() then runs the tiled kernel, or names the refusal.
  if (!results.empty()) {
    p.algo = results[0].algo;
    p.usable = true;
  }
  return p;
}

// Whether the library can take g at all (dtypes, sizes, strides).
bool lt_applies(const Gemm& g) {
  if (g.a.dtype != g.b.dtype || (g.a.dtype != DType::F32 && g.a.dtype != DType::BF16)) return false;
  if (g.M <= 0 || g.N <= 0 || g.K <= 0) return false;
  // The layouts' leading dimensions must cover their column-major rows.
  return g.b.ld >= (g.b.transposed ? g.K : g.N) && g.a.ld >= (g.a.transposed ? g.M : g.K) &&
         g.ldc >= g.N;
}

Key key_of(const Gemm& g) {
  return Key{g.M,
             g.N,
             g.K,
             g.a.ld,
             g.b.ld,
             g.ldc,
             int64_t(g.a.transposed),
             int64_t(g.b.transposed),
             int64_t(g.a.dtype),
             int64_t(g.bf16_inputs),
             alignment(g.b.data),
             alignment(g.a.data),
             alignment(g.c)};
}

void run(const Gemm& g, const Layouts& l, const cublasLtMatmulAlgo_t& algo) {
  Library& lib = library();
  ZAYA_LT_CHECK(cublasLtMatmul(lib.handle, l.desc, &g.alpha, g.b.data, l.first, g.a.data, l.second,
                               &g.beta, g.c, l.out, g.c, l.out, &algo, lib.workspace,
                               kWorkspaceBytes, stream()));
}

// A given algorithm for one shape: the library's check, and the alignments it needs (bytes of
// the library's first, second and output operands).
struct AlgoPlan {
  Layouts l;
  cublasLtMatmulAlgo_t algo{};
  std::string refused;  // empty: usable
  uint32_t align[3] = {256, 256, 256};
};

AlgoPlan make_algo_plan(const Gemm& g, const BlasLtAlgo& words) {
  static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(BlasLtAlgo));
  AlgoPlan p;
  p.l = make_layouts(g);
  std::memcpy(&p.algo, words.data(), sizeof(p.algo));
  cublasLtMatmulHeuristicResult_t r{};
  const cublasStatus_t st = cublasLtMatmulAlgoCheck(library().handle, p.l.desc, p.l.first,
                                                    p.l.second, p.l.out, p.l.out, &p.algo, &r);
  if (st != CUBLAS_STATUS_SUCCESS) {
    p.refused = std::string("cublasLtMatmulAlgoCheck: ") + cublasLtGetStatusName(st);
  } else if (r.workspaceSize > kWorkspaceBytes) {
    p.refused = "it needs " + std::to_string(r.workspaceSize) + " bytes of workspace, more than " +
                std::to_string(kWorkspaceBytes);
  }
  // The output is both C and D (the same pointer and layout): it needs the larger of the two.
  const cublasLtMatmulAlgoCapAttributes_t caps[4] = {
      CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES};
  uint32_t found[4] = {256, 256, 256, 256};
  for (int i = 0; i < 4; ++i) {
    uint32_t v = 0;
    size_t written = 0;
    // Unknown (an older library): the largest alignment the heuristic is ever told of.
    if (cublasLtMatmulAlgoCapGetAttribute(&p.algo, caps[i], &v, sizeof(v), &written) ==
            CUBLAS_STATUS_SUCCESS &&
        written == sizeof(v) && v > 0)
      found[i] = v;
  }
  p.align[0] = found[0], p.align[1] = found[1], p.align[2] = std::max(found[2], found[3]);
  return p;
}

// The alignment (bytes) a pointer and its rows give: the smaller of the pointer's and the row
// stride's (ld · element size) largest power-of-two divisors, at most 256.
int64_t operand_alignment(const void* p, int64_t ld, DType t) {
  const int64_t row = ld * (t == DType::BF16 ? 2 : 4);
  int64_t a = alignment(p);
  while (a > 1 && row % a != 0) a /= 2;
  return a;
}

}  // namespace

std::string blaslt_version() {
  return std::to_string(cublasLtGetVersion());
}

std::vector<BlasLtAlgo> blaslt_heuristic(const Gemm& g, int count) {
  if (!lt_applies(g)) return {};
  const Key key = key_of(g);
  Layouts l = make_layouts(g);
  const auto results = heuristic(l, uint32_t(key[10]), uint32_t(key[11]), uint32_t(key[12]), count);
  l.destroy();
  std::vector<BlasLtAlgo> out(results.size());
  for (size_t i = 0; i < results.size(); ++i)
    std::memcpy(out[i].data(), &results[i].algo, sizeof(BlasLtAlgo));
  return out;
}

std::string blaslt_check(const Gemm& g, const BlasLtAlgo& algo) {
  if (!lt_applies(g)) return "cuBLASLt cannot take this GEMM (dtypes, sizes or strides)";
  AlgoPlan p = make_algo_plan(g, algo);
  p.l.destroy();
  return p.refused;
}

bool gemm_blaslt_algo(const Gemm& g, const BlasLtAlgo& algo) {
  if (!lt_applies(g)) return false;
  static std::mutex mu;
  static std::map<std::pair<Key, BlasLtAlgo>, AlgoPlan> plans;
  const AlgoPlan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    const std::pair<Key, BlasLtAlgo> k{key_of(g), algo};
    auto it = plans.find(k);
    if (it == plans.end())
      it = plans.emplace(k, timed_plan([&] { return make_algo_plan(g, algo); })).first;
    plan = &it->second;
  }
  if (!plan->refused.empty()) return false;
  if (operand_alignment(g.b.data, g.b.ld, g.b.dtype) < plan->align[0] ||
      operand_alignment(g.a.data, g.a.ld, g.a.dtype) < plan->align[1] ||
      operand_alignment(g.c, g.ldc, DType::F32) < plan->align[2])
    return false;
  run(g, plan->l, plan->algo);
  return true;
}

GemmPlanStats gemm_plan_stats() noexcept {
  std::lock_guard<std::mutex> lock(stats_mu);
  return stats;
}

bool gemm_blaslt(const Gemm& g) {
  if (!lt_applies(g)) return false;
  const Key key = key_of(g);
  static std::mutex mu;
  static std::map<Key, Plan> plans;
  const Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = plans.find(key);
    if (it == plans.end())
      it = plans.emplace(key, timed_plan([&] { return make_plan(g, key); })).first;
    plan = &it->second;
  }
  if (!plan->usable) return false;
  run(g, plan->l, plan->algo);
  return true;
}

}  // namespace zaya::gpu
