// train.precision = bf16 on the GPU (ops/precision.h): under a BF16 MatmulPrecisionScope the GPU's
// linear (forward, dx, dw: every transpose layout of the GEMM, the tiled kernel's tile and
// few-rows paths) equals the CPU's fp32 linear on inputs rounded to bf16 first (F32 NMSE), and
// differs from the unrounded fp32 result by a bf16-sized amount (the rounding happened); the
// scope restores fp32; the MoE router's GEMMs stay fp32 (model/moe.cpp).
#include <cmath>
#include <vector>

#include "gpu_test_util.h"
#include "ops/precision.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// A copy of p with every host value rounded to bf16 (still F32), uploaded.
DevicePair rounded_copy(const DevicePair& p, std::initializer_list<int64_t> dims) {
  DevicePair r(DType::F32, dims);
  const float* src = p.cpu.ptr<float>();
  float* dst = r.cpu.ptr<float>();
  for (int64_t i = 0; i < p.cpu.numel(); ++i) dst[i] = bf16_to_f32(f32_to_bf16(src[i]));
  r.upload();
  return r;
}

// Σ(a − b)² / Σ b².
double nmse(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return num / std::max(den, 1e-300);
}

}  // namespace

TEST(GpuPrecision, Bf16LinearEqualsTheCpuOnRoundedInputs) {
  ZAYA_REQUIRE_GPU();
  for (int64_t N : {int64_t(3), int64_t(70)}) {  // few rows: the small-M kernel; else tiles
    const int64_t I = 96, O = 40;
    SCOPED_TRACE("N " + std::to_string(N));
    DevicePair x = random_pair(DType::F32, {N, I}, 1), w = random_pair(DType::F32, {O, I}, 2);
    DevicePair dy = random_pair(DType::F32, {N, O}, 3);
    DevicePair xr = rounded_copy(x, {N, I}), wr = rounded_copy(w, {O, I});
    DevicePair dyr = rounded_copy(dy, {N, O});
    DevicePair y(DType::F32, {N, O}), dx(DType::F32, {N, I}), dw(DType::F32, {O, I});
    DevicePair y32(DType::F32, {N, O});
    {
      const ops::MatmulPrecisionScope bf16(Device::Gpu, ops::MatmulPrecision::BF16);
      EXPECT_EQ(ops::matmul_precision(Device::Gpu), ops::MatmulPrecision::BF16);
      ops::linear_forward(y.gpu, x.gpu, w.gpu, {});
      ops::linear_backward(dx.gpu, dw.gpu, {}, dy.gpu, x.gpu, w.gpu);
    }
    EXPECT_EQ(ops::matmul_precision(Device::Gpu), ops::MatmulPrecision::F32);  // restored
    ops::linear_forward(y32.gpu, x.gpu, w.gpu, {});                            // fp32 again
    // The oracle: the CPU's fp32 linear on the rounded inputs.
    ops::linear_forward(y.cpu, xr.cpu, wr.cpu, {});
    ops::linear_backward(dx.cpu, dw.cpu, {}, dyr.cpu, xr.cpu, wr.cpu);
    ops::linear_forward(y32.cpu, x.cpu, w.cpu, {});
    expect_nmse(y, kGpuF32Nmse, "y");
    expect_nmse(dx, kGpuF32Nmse, "dx");
    expect_nmse(dw, kGpuF32Nmse, "dw");
    expect_nmse(y32, kGpuF32Nmse, "fp32 y after the scope");
    // bf16 rounding (relative 2^-9 per input) moves y by ~1e-5 NMSE: far above fp32's noise.
    const double moved = nmse(y.gpu_values(), y32.cpu_values());
    EXPECT_GT(moved, 1e-7) << "bf16 y equals the fp32 y: the inputs were not rounded";
    EXPECT_LT(moved, 1e-3) << "bf16 y is further from fp32 than rounding explains";
  }
}
