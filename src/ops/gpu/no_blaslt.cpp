// gemm_blaslt of gemm.h and the rest of gemm_blaslt.h in a build without cuBLASLt (every build
// but CUDA; the HIP build has no hipBLASLt in Debian's ROCm): no algorithms, no library version,
// no plans (gpu::gemm_plan_stats of core/device.h), every check refused, every call declined, so
// gemm() takes the tiled kernel.
#include "core/device.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gemm_blaslt.h"

namespace zaya::gpu {

bool gemm_blaslt(const Gemm&) {
  return false;
}

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
