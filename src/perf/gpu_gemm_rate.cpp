// GpuGemmProbe (gpu_gemm_rate.h). In a build without a GPU backend gemm() is ops/gpu/no_gpu.cpp's
// stand-in, never reached: the constructor first fails with gpu::describe()'s reason.
#include "perf/gpu_gemm_rate.h"

#include <algorithm>

#include "core/arena.h"
#include "core/assert.h"
#include "core/device.h"
#include "core/timer.h"
#include "ops/gpu/gemm.h"
#include "ops/ops.h"

namespace zaya {

struct GpuGemmProbe::Impl {
  int64_t n = 0;
  DType dtype = DType::F32;
  std::string engine;
  Buffer a, b, c;
  int reps = 1;  // products per pass
  gpu::Gemm g;
  gpu::GemmEngine e = gpu::GemmEngine::Tiled;
};

namespace {

// n² values uniform on [−1, 1] in `dtype` (never zeros: a GEMM of zeros may run faster).
void random_matrix(Buffer& mem, int64_t n, DType dtype, uint64_t stream) {
  Tensor t(nullptr, dtype, {n, n});
  mem = Buffer(t.nbytes(), Device::Gpu);
  t.data = mem.data();
  t.device = Device::Gpu;
  ops::fill_uniform(t, 20261201, stream, 1.0);
}

}  // namespace

GpuGemmProbe::GpuGemmProbe(int64_t n, DType dtype, double pass_seconds)
    : impl_(std::make_unique<Impl>()) {
  if (!gpu::available()) fail("the GPU GEMM probe: {}", gpu::describe());
  if (dtype != DType::F32 && dtype != DType::BF16)
    fail("the GPU GEMM probe: dtype {} (use F32 or BF16)", dtype_name(dtype));
  if (n < 1) fail("the GPU GEMM probe: size {} (at least 1)", n);
  Impl& p = *impl_;
  p.n = n, p.dtype = dtype;
  random_matrix(p.a, n, dtype, 1);
  random_matrix(p.b, n, dtype, 2);
  p.c = Buffer(size_t(n * n) * 4, Device::Gpu);
  p.g.M = p.g.N = p.g.K = n;
  p.g.a = {p.a.data(), dtype, n, false};
  p.g.b = {p.b.data(), dtype, n, true};
  p.g.c = static_cast<float*>(p.c.data()), p.g.ldc = n;
  // The engine gemm() takes for these operands: cuBLASLt unless ZAYA_GPU_GEMM says otherwise or
  // the library declines them (then gemm() falls back to the tiled kernel, as here).
  p.e = gpu::gemm_engine_for(p.g);
  if (p.e == gpu::GemmEngine::BlasLt && !gpu::gemm_blaslt(p.g)) p.e = gpu::GemmEngine::Tiled;
  p.engine = p.e == gpu::GemmEngine::BlasLt ? "cuBLASLt" : "tiled";
  // Warm-up (handles, heuristics, module load), then one product sizes the passes.
  gpu::gemm(p.g, p.e);
  gpu::synchronize();
  Timer t;
  gpu::gemm(p.g, p.e);
  gpu::synchronize();
  p.reps = std::clamp(int(pass_seconds / std::max(t.seconds(), 1e-7)), 1, 1000);
}

double GpuGemmProbe::pass() {
  Impl& p = *impl_;
  gpu::synchronize();
  Timer t;
  for (int i = 0; i < p.reps; ++i) gpu::gemm(p.g, p.e);
  gpu::synchronize();
  return 2.0 * double(p.n) * double(p.n) * double(p.n) * p.reps / t.seconds();
}

GpuGemmProbe::~GpuGemmProbe() = default;

const std::string& GpuGemmProbe::engine() const {
  return impl_->engine;
}

int64_t GpuGemmProbe::n() const {
  return impl_->n;
}

DType GpuGemmProbe::dtype() const {
  return impl_->dtype;
}

}  // namespace zaya
