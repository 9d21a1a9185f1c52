// The GPU backend of a build without one (the mlx pattern): every ops::gpu op and every GPU
// memory entry point of core/device.h fails with one clear zaya::Error naming what was asked for
// and how to get a GPU build. Linked instead of ops/gpu/*.cu when ZAYA_GPU is OFF (CMakeLists.txt).
#include "core/assert.h"
#include "core/device.h"
#include "ops/backend.h"

namespace zaya {

namespace {

[[noreturn]] void no_gpu(const char* what) {
  fail("{}: this build has no GPU backend: configure with -DZAYA_GPU=CUDA or HIP (see README)",
       what);
}

}  // namespace

namespace gpu {

void* alloc(size_t bytes) {
  no_gpu("allocating GPU memory");
}

// Nothing to release: alloc never returns memory here.
void free(void* p) noexcept {
  ZAYA_ASSERT(p == nullptr, "gpu::free of memory this build cannot have allocated");
}

void fill_zero(void* p, size_t bytes) {
  no_gpu("clearing GPU memory");
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  no_gpu("copying GPU memory");
}

void synchronize() {
  no_gpu("waiting for the GPU");
}

bool available() noexcept {
  return false;
}

std::string describe() {
  return "this build has no GPU backend (configure with -DZAYA_GPU=CUDA or HIP)";
}

std::string memory_report() {
  return "GPU memory: none (this build has no GPU backend)";
}

}  // namespace gpu

namespace ops::gpu {

#define ZAYA_BACKEND_OP(ret, name, params) \
  ret name params {                        \
    no_gpu(#name);                         \
  }
#include "ops/backend_ops.inc"
#undef ZAYA_BACKEND_OP

}  // namespace ops::gpu

}  // namespace zaya
