// gelu_forward / gelu_backward and silu_mul on the GPU against the CPU backend (label gpu; skips
// without a device): odd sizes (the float4 path with a tail), a misaligned view (scalar path), the
// tails of GELU, the expert width 2048 for silu_mul.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

// x with GELU's tails and 0 at the front (where there is room).
DevicePair gelu_inputs(int64_t n, uint64_t seed) {
  DevicePair x = random_pair(DType::F32, {n}, seed, 3.0);
  const float special[] = {0.f, -1e-3f, 1e-3f, -6.f, 6.f, -12.f, 12.f, -40.f, 40.f};
  for (int64_t i = 0; i < n && i < 9; ++i) static_cast<float*>(x.cpu.data)[i] = special[i];
  x.upload();
  return x;
}

void gelu_case(const Tensor& y_c, const Tensor& y_g, const Tensor& x_c, const Tensor& x_g,
               const Tensor& dy_c, const Tensor& dy_g, const Tensor& dx_c, const Tensor& dx_g) {
  ops::gelu_forward(y_c, x_c);
  ops::gelu_forward(y_g, x_g);
  ops::gelu_backward(dx_c, dy_c, x_c);
  ops::gelu_backward(dx_g, dy_g, x_g);
}

TEST(GpuActivation, Gelu) {
  ZAYA_REQUIRE_GPU();
  std::vector<int64_t> sizes = odd_sizes();
  sizes.push_back(2048 * 33 + 3);
  uint64_t seed = 1;
  for (int64_t n : sizes) {
    SCOPED_TRACE("n " + std::to_string(n));
    DevicePair x = gelu_inputs(n, seed += 10), dy = random_pair(DType::F32, {n}, seed + 1);
    DevicePair y = random_pair(DType::F32, {n}, seed + 2), dx = random_pair(DType::F32, {n}, 3);
    gelu_case(y.cpu, y.gpu, x.cpu, x.gpu, dy.cpu, dy.gpu, dx.cpu, dx.gpu);
    expect_nmse(y, kGpuF32Nmse, "y");
    expect_nmse(dx, kGpuF32Nmse, "dx");
  }
}

TEST(GpuActivation, GeluMisaligned) {
  ZAYA_REQUIRE_GPU();
  const int64_t n = 1027;
  DevicePair x = gelu_inputs(n + 1, 5), dy = random_pair(DType::F32, {n + 1}, 6);
  DevicePair y(DType::F32, {n + 1}), dx(DType::F32, {n + 1});
  auto at1 = [&](const DevicePair& p, bool gpu) {
    Tensor t(static_cast<float*>(gpu ? p.gpu.data : p.cpu.data) + 1, {n});
    if (gpu) t.device = Device::Gpu;
    return t;
  };
  gelu_case(at1(y, false), at1(y, true), at1(x, false), at1(x, true), at1(dy, false), at1(dy, true),
            at1(dx, false), at1(dx, true));
  expect_nmse(y, kGpuF32Nmse, "y");
  expect_nmse(dx, kGpuF32Nmse, "dx");
}

TEST(GpuActivation, SiluMul) {
  ZAYA_REQUIRE_GPU();
  struct Case {
    int64_t M, H;
  };
  const std::vector<Case> cases = {{1, 1}, {7, 7}, {31, 33}, {33, 31}, {257, 257}, {5, 2048}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE("M " + std::to_string(c.M) + " H " + std::to_string(c.H));
    DevicePair gu = random_pair(DType::F32, {c.M, 2 * c.H}, seed += 10, 3.0);
    DevicePair act = random_pair(DType::F32, {c.M, c.H}, seed + 1);
    ops::silu_mul(act.cpu, gu.cpu);
    ops::silu_mul(act.gpu, gu.gpu);
    expect_nmse(act, kGpuF32Nmse, "act");
  }
}

}  // namespace
}  // namespace zaya::test
