// open_nccl_library (dist/nccl.h): which files the NCCL group tries to load, in every build (the
// CPU test suite checks the error of a library that is not there). The HIP build loads RCCL,
// NCCL's port to AMD GPUs (same entry points).
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/nccl.h"

namespace zaya::dist {

SharedLibrary open_nccl_library() {
#if defined(ZAYA_GPU_HIP)
  const char* const library = "librccl.so.1";
  const std::vector<std::string> candidates = {"librccl.so.1", "librccl.so"};
  const char* const install =
      "Install RCCL (ROCm ships /opt/rocm/lib/librccl.so.1) and put its directory on "
      "LD_LIBRARY_PATH, or set ZAYA_NCCL_LIB=/path/to/librccl.so.1";
#else
  const char* const library = "libnccl.so.2";
  const std::vector<std::string> candidates = {"libnccl.so.2", "libnccl.so"};
  const char* const install =
      "Install NCCL 2.14 or later (CUDA 13 ships /usr/local/cuda/lib/libnccl.so.2) and put its "
      "directory on LD_LIBRARY_PATH, or set ZAYA_NCCL_LIB=/path/to/libnccl.so.2";
#endif
  const char* env = std::getenv("ZAYA_NCCL_LIB");
  if (env && *env)
    return SharedLibrary::open_first({env}, "the NCCL library (ZAYA_NCCL_LIB)",
                                     "Point ZAYA_NCCL_LIB at " + std::string(library) +
                                         ", or unset it to search the loader's "
                                         "path");
  return SharedLibrary::open_first(candidates, "the NCCL library", install);
}

}  // namespace zaya::dist
