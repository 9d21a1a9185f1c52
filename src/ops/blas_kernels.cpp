#include "ops/blas_kernels.h"

#include <cblas.h>

namespace zaya::ops {

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace zaya::ops
