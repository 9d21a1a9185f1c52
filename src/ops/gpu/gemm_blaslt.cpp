// gemm_blaslt of gemm.h: cuBLASLt on NVIDIA (host code). cuBLASLt is column-major, zaya is
// row-major: a row-major [R,C] matrix is the column-major [C,R] one, so row-major C = op(A)·op(B)
// is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B goes in as the library's first operand, A as its second,
// each with its own transpose flag, and m = N, n = M. Strict FP32 arithmetic (CUBLAS_COMPUTE_32F:
// no TF32) unless g.bf16_inputs (CUBLAS_COMPUTE_32F_FAST_16BF: F32 data down-converted to bf16
// for the tensor cores, f32 accumulation), A/B F32 or BF16 (one dtype for both), C F32. One handle, a 32 MiB workspace and, per
// shape key (sizes, strides, transposes, dtype, pointer alignments), the descriptors and the
// heuristic's algorithm, all made on first use and kept for the process. The HIP build has no
// cuBLASLt here (hipBLASLt is not in Debian's ROCm): gemm_blaslt declines every call.
#include "ops/gpu/gemm.h"

#if defined(ZAYA_GPU_CUDA)

#include <cublasLt.h>

#include <array>
#include <map>
#include <mutex>

#include "core/assert.h"
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

// The largest power of two ≤ 256 that divides the address (the heuristic's alignment hint).
int64_t alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  int64_t a = 256;
  while (a > 1 && u % uintptr_t(a) != 0) a /= 2;
  return a;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
};

using Key = std::array<int64_t, 13>;

cudaDataType_t lt_type(DType t) {
  return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

Plan make_plan(const Gemm& g, const Key& key) {
  Library& lib = library();
  Plan p;
  // The library's operands: first = op(B)ᵀ [N,K] column-major, second = op(A)ᵀ [K,M].
  const cublasOperation_t op_first = g.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  // F32 operands rounded to bf16 (Gemm::bf16_inputs): the library's bf16 tensor-core mode for
  // f32 data; BF16 operands are bf16 already (plain f32 compute).
  const cublasComputeType_t compute = g.bf16_inputs && g.a.dtype == DType::F32
                                          ? CUBLAS_COMPUTE_32F_FAST_16BF
                                          : CUBLAS_COMPUTE_32F;
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

  cublasLtMatmulPreference_t pref = nullptr;
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = kWorkspaceBytes;
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace, sizeof(workspace)));
  const uint32_t align_first = uint32_t(key[10]), align_second = uint32_t(key[11]),
                 align_out = uint32_t(key[12]);
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof(align_first)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof(align_second)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out, sizeof(align_out)));
  ZAYA_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out, sizeof(align_out)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lib.handle, p.desc, p.first, p.second,
                                                           p.out, p.out, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // A failed query (NOT_SUPPORTED: no algorithm for this combination; INVALID_VALUE: layouts it
  // rejects) declines the call: gemm() then runs the tiled kernel, or names the refusal.
  if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    p.algo = result.algo;
    p.usable = true;
  }
  return p;
}

}  // namespace

bool gemm_blaslt(const Gemm& g) {
  if (g.a.dtype != g.b.dtype || (g.a.dtype != DType::F32 && g.a.dtype != DType::BF16)) return false;
  if (g.M <= 0 || g.N <= 0 || g.K <= 0) return false;
  // The layouts' leading dimensions must cover their column-major rows.
  if (g.b.ld < (g.b.transposed ? g.K : g.N) || g.a.ld < (g.a.transposed ? g.M : g.K) || g.ldc < g.N)
    return false;
  const Key key{g.M,
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
  static std::mutex mu;
  static std::map<Key, Plan> plans;
  const Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make_plan(g, key)).first;
    plan = &it->second;
  }
  if (!plan->usable) return false;
  Library& lib = library();
  ZAYA_LT_CHECK(cublasLtMatmul(lib.handle, plan->desc, &g.alpha, g.b.data, plan->first, g.a.data,
                               plan->second, &g.beta, g.c, plan->out, g.c, plan->out, &plan->algo,
                               lib.workspace, kWorkspaceBytes, stream()));
  return true;
}

}  // namespace zaya::gpu

#else  // HIP: no cuBLASLt

namespace zaya::gpu {

bool gemm_blaslt(const Gemm&) {
  return false;
}

}  // namespace zaya::gpu

#endif
