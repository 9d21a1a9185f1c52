// The MPI group of a build without MPI (ZAYA_MPI=OFF, e.g. the GPU bundle): asking for it is a
// clear error; `auto` outside a launcher still picks the single-process group.
#include "core/assert.h"
#include "dist/group_impl.h"

namespace zaya::dist {

std::unique_ptr<Group> make_mpi_group(double timeout_s) {
  fail(
      "this build has no MPI (configured with -DZAYA_MPI=OFF): run one process, or rebuild "
      "with MPI for data parallelism");
}

}  // namespace zaya::dist
