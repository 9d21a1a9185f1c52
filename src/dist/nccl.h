// The NCCL process group's entry points (the group itself: dist/nccl.cpp; callers use
// dist::make_group("nccl"), dist/group.h).
//
// - make_nccl_group: built from dist/nccl.cpp in the GPU builds (CUDA: NCCL; HIP: RCCL); the
//   CPU build links dist/no_nccl.cpp, whose version throws a zaya::Error saying why there is no
//   NCCL group.
// - open_nccl_library: NCCL is loaded at run time (dlopen), so the GPU binary starts on hosts
//   without it: ZAYA_NCCL_LIB=path when set (only that path is tried), else libnccl.so.2, then
//   libnccl.so (HIP: librccl.so.1, then librccl.so; the loader's search path: LD_LIBRARY_PATH,
//   the run path, ldconfig's cache). A library that loads nowhere is a zaya::Error naming every
//   candidate and the loader's reason. Host-only (dist/nccl_library.cpp, every build).
#pragma once
#include <memory>

#include "dist/group.h"
#include "dist/shared_library.h"

namespace zaya::dist {

std::unique_ptr<Group> make_nccl_group(double timeout_s);
SharedLibrary open_nccl_library();

}  // namespace zaya::dist
