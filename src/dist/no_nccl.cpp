// The NCCL group of a build without a GPU backend (the CPU/CI build): asking for it is a clear
// error.
#include "core/assert.h"
#include "dist/nccl.h"

namespace zaya::dist {

std::unique_ptr<Group> make_nccl_group(double) {
  fail(
      "this build has no GPU backend, so no NCCL group: build with the CUDA backend (cmake "
      "--preset cuda) for collectives on GPU buffers, or use the mpi group on host buffers");
}

}  // namespace zaya::dist
