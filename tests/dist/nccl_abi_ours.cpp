// The facts of zaya's own NCCL declarations (dist/nccl_abi.h) for tests/dist/test_nccl_abi.cpp,
// which holds the real nccl.h's (CUDA build only: the header needs a GPU vendor).
#if defined(ZAYA_GPU_CUDA)
#include "dist/nccl_abi.h"
// (the facts header reads the declarations above)
#include "dist/nccl_abi_facts.h"

namespace zaya::test {

NcclFacts nccl_abi_facts() {
  return facts_of_the_nccl_in_scope();
}

}  // namespace zaya::test
#endif
