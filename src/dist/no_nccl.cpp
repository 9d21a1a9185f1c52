// The NCCL group of a build without it (no GPU backend: the CPU/CI build; HIP: Debian ships no
// RCCL header, so the HIP build has no device collectives yet): asking for it is a clear error.
#include "core/assert.h"
#include "dist/nccl.h"

namespace zaya::dist {

std::unique_ptr<Group> make_nccl_group(double) {
#if defined(ZAYA_GPU_HIP)
  fail(
      "the NCCL group is not built for HIP (no RCCL in this build): train on one AMD GPU, or use "
      "the CUDA build for several GPUs");
#else
  fail(
      "this build has no GPU backend, so no NCCL group: build with the CUDA backend (cmake "
      "--preset cuda) for collectives on GPU buffers, or use the mpi group on host buffers");
#endif
}

}  // namespace zaya::dist
