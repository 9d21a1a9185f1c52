// gemm()'s entry points (ops/gpu/gemm.h) in a build without a GPU backend (ZAYA_GPU=OFF), in the
// way of ops/gpu/no_gpu.cpp, so that GpuGemmProbe links everywhere: each fails with one clear
// zaya::Error (never reached by the probe, which checks gpu::available() first). Their own file,
// so that a link that has the real gemm.cpp (the GPU emulator's, which reuses this build's
// library) never pulls them out of the archive. Empty in a GPU build.
#ifndef ZAYA_HAS_GPU_BACKEND
#include "core/assert.h"
#include "core/device.h"
#include "ops/gpu/gemm.h"

namespace zaya::gpu {

void gemm(const Gemm& g, GemmEngine engine) {
  fail("gemm: {}", describe());
}

GemmEngine gemm_engine_for(const Gemm& g) {
  fail("gemm: {}", describe());
}

bool gemm_blaslt(const Gemm& g) {
  return false;
}

}  // namespace zaya::gpu
#endif
