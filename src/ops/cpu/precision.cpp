// The CPU's matmul precision (ops/precision.h): F32 only.
#include "core/assert.h"
#include "ops/backend.h"

namespace zaya::ops::cpu {

void set_matmul_precision(MatmulPrecision p) {
  if (p != MatmulPrecision::F32)
    fail("matmul precision {}: the CPU backend computes its matrix products in fp32 only",
         matmul_precision_name(p));
}

MatmulPrecision matmul_precision() {
  return MatmulPrecision::F32;
}

}  // namespace zaya::ops::cpu
