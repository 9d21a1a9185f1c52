// The precision of a device's matrix products (train.precision, docs/training.md):
// - F32: GEMM operands as stored (the CPU's only mode; the GPU's default).
// - BF16: on the GPU, every F32 operand of a GEMM (linear, the MoE experts, the LM head, whatever
//   calls ops/gpu/gemm.h) is rounded to bf16 as it enters the product; accumulation and outputs
//   stay F32, and so does everything that is not a GEMM operand: master weights, gradients,
//   optimizer state, norms, softmax, attention (our kernel), router selection and the loss.
//   The model keeps the router's GEMMs in F32 with a scope (model/moe.cpp), as the seed system
//   did. Activations are stored in F32 (not bf16): the GEMMs read them and round them on load.
// One setting per device, process-wide (the trainer sets it for the run); MatmulPrecisionScope
// sets it for a region and puts the previous value back. Setting BF16 on the CPU is a zaya::Error.
#pragma once
#include <string_view>

#include "core/device.h"

namespace zaya::ops {

enum class MatmulPrecision { F32, BF16 };

}  // namespace zaya::ops

template <>
struct zaya::EnumWords<zaya::ops::MatmulPrecision> {
  static constexpr std::pair<ops::MatmulPrecision, std::string_view> words[] = {
      {ops::MatmulPrecision::F32, "fp32"}, {ops::MatmulPrecision::BF16, "bf16"}};
};

namespace zaya::ops {

const char* matmul_precision_name(MatmulPrecision p);  // "fp32" | "bf16" (train.precision's words)
MatmulPrecision parse_matmul_precision(std::string_view word);  // zaya::Error for another word

void set_matmul_precision(Device d, MatmulPrecision p);
MatmulPrecision matmul_precision(Device d);

class MatmulPrecisionScope {
 public:
  MatmulPrecisionScope(Device d, MatmulPrecision p);
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  Device device_;
  MatmulPrecision previous_;
};

}  // namespace zaya::ops
