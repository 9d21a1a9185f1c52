// ops/precision.h: the words, the dispatch to the backends' setting, the scope.
#include "ops/precision.h"

#include "core/assert.h"
#include "ops/backend.h"

namespace zaya::ops {

const char* matmul_precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::BF16 ? "bf16" : "fp32";
}

MatmulPrecision parse_matmul_precision(std::string_view word) {
  if (word == "fp32") return MatmulPrecision::F32;
  if (word == "bf16") return MatmulPrecision::BF16;
  fail("matmul precision '{}': expected fp32 or bf16", word);
}

void set_matmul_precision(Device d, MatmulPrecision p) {
  switch (d) {
    case Device::Cpu:
      return cpu::set_matmul_precision(p);
    case Device::Gpu:
      return gpu::set_matmul_precision(p);
  }
  assert_fail(__FILE__, __LINE__, "set_matmul_precision", "unknown device");
}

MatmulPrecision matmul_precision(Device d) {
  switch (d) {
    case Device::Cpu:
      return cpu::matmul_precision();
    case Device::Gpu:
      return gpu::matmul_precision();
  }
  assert_fail(__FILE__, __LINE__, "matmul_precision", "unknown device");
}

MatmulPrecisionScope::MatmulPrecisionScope(Device d, MatmulPrecision p)
    : device_(d), previous_(matmul_precision(d)) {
  set_matmul_precision(d, p);
}

MatmulPrecisionScope::~MatmulPrecisionScope() {
  set_matmul_precision(device_, previous_);
}

}  // namespace zaya::ops
