// gemm_blaslt.h where the build has no cuBLASLt (HIP; the emulator of scripts/gpu_emu, which
// compiles this file without ZAYA_GPU_CUDA): no algorithms, no library version, no plans
// (gpu::gemm_plan_stats of core/device.h). The CUDA build
// compiles it to nothing (gemm_blaslt.cpp has the real ones).
#include "core/device.h"
#include "ops/gpu/gemm_blaslt.h"

#if !defined(ZAYA_GPU_CUDA)

namespace zaya::gpu {

std::string blaslt_version() {
  return "none";
}

std::vector<BlasLtAlgo> blaslt_heuristic(const Gemm&, int) {
  return {};
}

std::string blaslt_check(const Gemm&, const BlasLtAlgo&) {
  return "this build has no cuBLASLt";
}

bool gemm_blaslt_algo(const Gemm&, const BlasLtAlgo&) {
  return false;
}

GemmPlanStats gemm_plan_stats() noexcept {
  return {};
}

}  // namespace zaya::gpu

#endif
