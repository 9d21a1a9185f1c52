// open_nccl_library (dist/nccl.h): which files the NCCL group tries to load, in every build (the
// CPU test suite checks the error of a library that is not there).
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/nccl.h"

namespace zaya::dist {

SharedLibrary open_nccl_library() {
  const char* env = std::getenv("ZAYA_NCCL_LIB");
  if (env && *env)
    return SharedLibrary::open_first({env}, "the NCCL library (ZAYA_NCCL_LIB)",
                                     "Point ZAYA_NCCL_LIB at libnccl.so.2, or unset it to search "
                                     "the loader's path");
  return SharedLibrary::open_first(
      {"libnccl.so.2", "libnccl.so"}, "the NCCL library",
      "Install NCCL 2.14 or later (CUDA 13 ships /usr/local/cuda/lib/libnccl.so.2) and put its "
      "directory on LD_LIBRARY_PATH, or set ZAYA_NCCL_LIB=/path/to/libnccl.so.2");
}

}  // namespace zaya::dist
