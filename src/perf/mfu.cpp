// The MFU denominator (mfu.h).
#include "perf/mfu.h"

#include <fmt/format.h>

#include "ops/blas_kernels.h"
#include "perf/gpu_gemm_rate.h"
#include "perf/sgemm.h"

namespace zaya {

MatmulRate measure_matmul_rate(Device device, DType gemm_dtype) {
  MatmulRate r;
  if (device == Device::Cpu) {
    r.source = fmt::format("sgemm ({} kernels)", ops::blas_core_name());
    r.flops_per_s = measure_sgemm_rate();
    return r;
  }
  for (int64_t n = 128; n <= 4096; n *= 2) {
    GpuGemmProbe probe(n, gemm_dtype);
    r.flops_per_s = probe.pass();
    r.source = fmt::format("GPU {} GEMM ({}³, {})", gemm_dtype == DType::BF16 ? "bf16" : "f32", n,
                           probe.engine());
    if (2.0 * double(n) * double(n) * double(n) / r.flops_per_s >= 1e-3) break;
  }
  return r;
}

}  // namespace zaya
