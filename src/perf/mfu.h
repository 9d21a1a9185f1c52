// The MFU denominator of a training run, measured once at its start: the CPU's sgemm rate
// (perf/sgemm.h), or the GPU's GEMM rate for the run's GEMM operands (perf/gpu_gemm_rate.h).
#pragma once
#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace zaya {

struct MatmulRate {
  double flops_per_s = 0;
  std::string source;  // what was measured, for the log: "sgemm (Haswell kernels)", "GPU bf16 …"
};

// `gemm_dtype` (F32 or BF16) matters on a GPU only. The GPU probe grows from 128³ until one
// product takes ≥ 1 ms or n reaches 4096, so it stays short on a slow device.
MatmulRate measure_matmul_rate(Device device, DType gemm_dtype);

}  // namespace zaya
