// rmsnorm_forward / rmsnorm_backward on the GPU against the CPU backend (label gpu; skips without
// a device): odd widths (scalar path), the model width 2048 (float4 path), a misaligned view of it
// (scalar path again), more rows than the column-sum grid, += of dx and dw, undefined dx or dw.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

struct Shape {
  int64_t N, D;
};
const std::vector<Shape> kShapes = {{1, 1},    {7, 7},     {31, 33},  {33, 31},  {257, 257},
                                    {3, 2048}, {33, 2048}, {600, 64}, {5, 4100}, {3, 1029}};

// The tensor of p's storage shifted by one element (a misaligned view), on both sides.
struct Views {
  Tensor cpu, gpu;
};
Views shifted(const DevicePair& p, std::initializer_list<int64_t> dims) {
  Views v{Tensor(static_cast<float*>(p.cpu.data) + 1, dims),
          Tensor(static_cast<float*>(p.gpu.data) + 1, dims)};
  v.gpu.device = Device::Gpu;
  return v;
}

// dx against the CPU's. With D = 1 the backward cancels almost completely (dx = ρĝ(1 − n²) with
// n² = x²/(x² + eps) ≈ 1): what is left is ~1e-5 of the terms, and whether a*b + c is fused decides
// its last bits on either side, so there it is held to an absolute 1e-6 of the O(1) terms instead.
void expect_dx(const DevicePair& dx, int64_t D, const char* what) {
  if (D == 1)
    expect_close(dx.gpu_values(), dx.cpu_values(), 1e-6, 0.0, what);
  else
    expect_nmse(dx, kGpuF32Nmse, what);
}

void run_case(int64_t N, int64_t D, uint64_t seed) {
  SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D));
  DevicePair x = random_pair(DType::F32, {N, D}, seed, 1.5);
  DevicePair w = random_pair(DType::F32, {D}, seed + 1);
  DevicePair y(DType::F32, {N, D}), rstd(DType::F32, {N});
  ops::rmsnorm_forward(y.cpu, rstd.cpu, x.cpu, w.cpu, 1e-5f);
  ops::rmsnorm_forward(y.gpu, rstd.gpu, x.gpu, w.gpu, 1e-5f);
  expect_nmse(y, kGpuF32Nmse, "y");
  expect_nmse(rstd, kGpuF32Nmse, "rstd");

  DevicePair dy = random_pair(DType::F32, {N, D}, seed + 2);
  for (bool accumulate : {false, true}) {
    DevicePair dx = random_pair(DType::F32, {N, D}, seed + 3);
    DevicePair dw = random_pair(DType::F32, {D}, seed + 4);
    ops::rmsnorm_backward(dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, accumulate);
    ops::rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, accumulate);
    expect_dx(dx, D, accumulate ? "dx +=" : "dx");
    expect_nmse(dw, kGpuF32Nmse, "dw");
  }
  // Each output alone.
  DevicePair dx = random_pair(DType::F32, {N, D}, seed + 5);
  ops::rmsnorm_backward(dx.cpu, Tensor{}, dy.cpu, x.cpu, w.cpu, rstd.cpu, false);
  ops::rmsnorm_backward(dx.gpu, Tensor{}, dy.gpu, x.gpu, w.gpu, rstd.gpu, false);
  expect_dx(dx, D, "dx alone");
  DevicePair dw = random_pair(DType::F32, {D}, seed + 6);
  ops::rmsnorm_backward(Tensor{}, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, false);
  ops::rmsnorm_backward(Tensor{}, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, false);
  expect_nmse(dw, kGpuF32Nmse, "dw alone");
}

TEST(GpuRmsnorm, MatchesCpu) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 100;
  for (const Shape& s : kShapes) run_case(s.N, s.D, seed += 10);
}

TEST(GpuRmsnorm, MisalignedRowsTakeTheScalarPath) {
  ZAYA_REQUIRE_GPU();
  const int64_t N = 9, D = 2048;
  DevicePair xs = random_pair(DType::F32, {N * D + 1}, 1), ws = random_pair(DType::F32, {D + 1}, 2);
  DevicePair ys(DType::F32, {N * D + 1}), rstd(DType::F32, {N});
  const Views x = shifted(xs, {N, D}), w = shifted(ws, {D}), y = shifted(ys, {N, D});
  ops::rmsnorm_forward(y.cpu, rstd.cpu, x.cpu, w.cpu, 1e-6f);
  ops::rmsnorm_forward(y.gpu, rstd.gpu, x.gpu, w.gpu, 1e-6f);
  expect_nmse(ys, kGpuF32Nmse, "y");
  expect_nmse(rstd, kGpuF32Nmse, "rstd");
  DevicePair dys = random_pair(DType::F32, {N * D + 1}, 3);
  DevicePair dxs = random_pair(DType::F32, {N * D + 1}, 4), dw = random_pair(DType::F32, {D}, 5);
  const Views dy = shifted(dys, {N, D}), dx = shifted(dxs, {N, D});
  ops::rmsnorm_backward(dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, true);
  ops::rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, true);
  expect_nmse(dxs, kGpuF32Nmse, "dx");
  expect_nmse(dw, kGpuF32Nmse, "dw");
}

TEST(GpuRmsnorm, SameBitsOnRepeat) {
  ZAYA_REQUIRE_GPU();
  const int64_t N = 1000, D = 2048;
  DevicePair x = random_pair(DType::F32, {N, D}, 7), w = random_pair(DType::F32, {D}, 8);
  DevicePair dy = random_pair(DType::F32, {N, D}, 9), rstd(DType::F32, {N}), y(DType::F32, {N, D});
  ops::rmsnorm_forward(y.gpu, rstd.gpu, x.gpu, w.gpu, 1e-5f);
  DevicePair dw1(DType::F32, {D}), dw2(DType::F32, {D});
  ops::rmsnorm_backward(Tensor{}, dw1.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, false);
  ops::rmsnorm_backward(Tensor{}, dw2.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, false);
  EXPECT_EQ(dw1.gpu_values(), dw2.gpu_values());
}

}  // namespace
}  // namespace zaya::test
