// The GPU's own GEMM rate, the MFU denominator of `zaya bench step --device gpu`: a square n³
// product C = A·Bᵀ through ops/gpu/gemm.h's gemm() (both operands BF16 or both F32, f32
// accumulation and output), with the engine gemm() picks for it (cuBLASLt, or our tiled kernel
// where cuBLASLt is absent or declines: the HIP build, ZAYA_GPU_GEMM=tiled).
//
// GpuGemmProbe keeps its device matrices (random values, never zeros), so passes can be
// interleaved with the training steps they are the yardstick for, as SgemmProbe is on the CPU.
// A pass: gpu::synchronize(), k products, gpu::synchronize() on the host clock, k chosen by the
// first (untimed) pass so that a pass lasts about `pass_seconds`.
// Without a GPU backend, or without a device, the constructor raises zaya::Error saying why.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace zaya {

class GpuGemmProbe {
 public:
  GpuGemmProbe(int64_t n, DType dtype, double pass_seconds = 0.02);
  ~GpuGemmProbe();
  GpuGemmProbe(const GpuGemmProbe&) = delete;
  GpuGemmProbe& operator=(const GpuGemmProbe&) = delete;
  double pass();                      // FLOP/s of the pass's products (2·n³ FLOPs each)
  const std::string& engine() const;  // "cuBLASLt" or "tiled"
  int64_t n() const;
  DType dtype() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaya
