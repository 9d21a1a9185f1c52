// gemm() of gemm.h: the choice between cuBLASLt and the tiled kernel (ZAYA_GPU_GEMM), and the
// fallback where the library declines a call, and the tuning table's hook (gemm_table_runtime.h:
// Auto calls with ZAYA_GPU_GEMM unset or auto follow a loaded table). Host code.
#include "ops/gpu/gemm.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "core/assert.h"
#include "ops/backend.h"
#include "ops/gpu/gemm_table_runtime.h"
#include "ops/profile.h"

namespace zaya::gpu {

namespace {

constexpr bool kHaveBlasLt =
#if defined(ZAYA_GPU_CUDA)
    true;
#else
    false;
#endif

// The engine ZAYA_GPU_GEMM asks for (Auto when unset, empty or "auto").
GemmEngine env_engine() {
  const char* env = std::getenv("ZAYA_GPU_GEMM");
  if (!env) return GemmEngine::Auto;
  const std::string_view v(env);
  if (v.empty() || v == "auto") return GemmEngine::Auto;
  if (v == "tiled") return GemmEngine::Tiled;
  if (v == "blaslt") return GemmEngine::BlasLt;
  fail("ZAYA_GPU_GEMM={}: expected auto, tiled or blaslt", v);
}

bool blaslt_applies(const Gemm& g) {
  return kHaveBlasLt && g.a.dtype == g.b.dtype;
}

[[noreturn]] void blaslt_refused(const Gemm& g, const char* why) {
  fail(
      "GPU GEMM: cuBLASLt was asked for (ZAYA_GPU_GEMM=blaslt or the caller) but {} "
      "(M {} N {} K {}, A {} B {}); unset ZAYA_GPU_GEMM or set it to tiled",
      why, g.M, g.N, g.K, dtype_name(g.a.dtype), dtype_name(g.b.dtype));
}

}  // namespace

GemmEngine gemm_engine_for(const Gemm& g) {
  switch (env_engine()) {
    case GemmEngine::Tiled:
      return GemmEngine::Tiled;
    case GemmEngine::BlasLt:
      if (!kHaveBlasLt) blaslt_refused(g, "this build has no cuBLASLt (HIP)");
      if (g.a.dtype != g.b.dtype) blaslt_refused(g, "A and B have different dtypes");
      return GemmEngine::BlasLt;
    case GemmEngine::Auto:
      break;
  }
  return blaslt_applies(g) ? GemmEngine::BlasLt : GemmEngine::Tiled;
}

namespace {
std::atomic<bool> bf16_inputs_on{false};
}  // namespace

void set_gemm_bf16_inputs(bool on) {
  bf16_inputs_on.store(on, std::memory_order_relaxed);
}

bool gemm_bf16_inputs() {
  return bf16_inputs_on.load(std::memory_order_relaxed);
}

void gemm(const Gemm& call, GemmEngine engine) {
  Gemm g = call;
  if (gemm_bf16_inputs()) g.bf16_inputs = true;
  ZAYA_ASSERT(g.M >= 0 && g.N >= 0 && g.K >= 0, "gemm: M {} N {} K {}", g.M, g.N, g.K);
  if (g.M == 0 || g.N == 0) return;
  ZAYA_PROFILE_REGION("gemm");  // zaya bench step: the GEMMs inside MoE and LM head ops
  if (engine == GemmEngine::Auto && env_engine() == GemmEngine::Auto && gemm_table_run(g)) return;
  const bool forced = engine == GemmEngine::BlasLt || env_engine() == GemmEngine::BlasLt;
  if (engine == GemmEngine::Auto) engine = gemm_engine_for(g);
  // K = 0 is C = beta · C: the tiled kernel's epilogue alone (the library wants k ≥ 1).
  if (engine == GemmEngine::BlasLt && g.K > 0) {
    if (!kHaveBlasLt) blaslt_refused(g, "this build has no cuBLASLt (HIP)");
    if (gemm_blaslt(g)) return;
    if (forced) blaslt_refused(g, "it has no algorithm for this call");
  }
  gemm_tiled(g);
}

}  // namespace zaya::gpu

namespace zaya::ops::gpu {

// ops/precision.h on the GPU: BF16 is gemm()'s process-wide bf16_inputs.
void set_matmul_precision(MatmulPrecision p) {
  zaya::gpu::set_gemm_bf16_inputs(p == MatmulPrecision::BF16);
}

MatmulPrecision matmul_precision() {
  return zaya::gpu::gemm_bf16_inputs() ? MatmulPrecision::BF16 : MatmulPrecision::F32;
}

}  // namespace zaya::ops::gpu
