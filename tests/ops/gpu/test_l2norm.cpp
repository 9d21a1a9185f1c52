// GPU vs CPU: l2norm_scale_forward (y, norm) and l2norm_scale_backward (dx overwrite, dtemp +=)
// with temp defined and undefined, dtemp undefined, floor 0 and floor > 0 with rows under the
// floor (the linear branch), dx aliasing dy, odd T and head sizes, the ZAYA1-base shapes (8 query
// heads, 2 kv heads of 128).
#include <string>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Scales every third head row of x by 1e-5: unit-normal rows of d ≤ 128 fall under a floor of 1e-3.
void shrink_rows(DevicePair& x, int64_t d) {
  float* p = x.cpu.ptr<float>();
  const int64_t rows = x.cpu.numel() / d;
  for (int64_t r = 0; r < rows; r += 3)
    for (int64_t i = 0; i < d; ++i) p[r * d + i] *= 1e-5f;
  x.upload();
}

void check_norm(int64_t B, int64_t T, int64_t H, int64_t d, bool with_temp, float floor,
                uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(B) + " T " + std::to_string(T) + " H " + std::to_string(H) +
               " d " + std::to_string(d) + (with_temp ? " temp" : " no temp") + " floor " +
               std::to_string(floor));
  DevicePair x = random_pair(DType::F32, {B, T, H, d}, seed);
  if (floor > 0) shrink_rows(x, d);
  DevicePair temp = random_pair(DType::F32, {H}, seed + 1, 0.5);
  const Tensor temp_cpu = with_temp ? temp.cpu : Tensor{},
               temp_gpu = with_temp ? temp.gpu : Tensor{};
  DevicePair y = random_pair(DType::F32, {B, T, H, d}, seed + 2);
  DevicePair norm = random_pair(DType::F32, {B, T, H}, seed + 3);
  ops::l2norm_scale_forward(y.cpu, norm.cpu, x.cpu, temp_cpu, floor);
  ops::l2norm_scale_forward(y.gpu, norm.gpu, x.gpu, temp_gpu, floor);
  expect_nmse(y, kGpuF32Nmse, "y");
  expect_nmse(norm, kGpuF32Nmse, "norm");
  norm.upload();  // the backward reads the CPU's norms on both sides

  DevicePair dy = random_pair(DType::F32, {B, T, H, d}, seed + 4);
  DevicePair dx = random_pair(DType::F32, {B, T, H, d}, seed + 5);
  DevicePair dtemp = random_pair(DType::F32, {H}, seed + 6);
  const Tensor dtemp_cpu = with_temp ? dtemp.cpu : Tensor{};
  const Tensor dtemp_gpu = with_temp ? dtemp.gpu : Tensor{};
  ops::l2norm_scale_backward(dx.cpu, dtemp_cpu, dy.cpu, x.cpu, norm.cpu, temp_cpu, floor);
  ops::l2norm_scale_backward(dx.gpu, dtemp_gpu, dy.gpu, x.gpu, norm.gpu, temp_gpu, floor);
  expect_nmse(dx, kGpuF32Nmse, "dx");
  if (with_temp) expect_nmse(dtemp, kGpuF32Nmse, "dtemp");

  // dx aliasing dy, dtemp undefined: the GPU's in-place result equals the CPU's separate one.
  ops::l2norm_scale_backward(dy.gpu, Tensor{}, dy.gpu, x.gpu, norm.gpu, temp_gpu, floor);
  const std::vector<double> in_place = dy.gpu_values(), separate = dx.cpu_values();
  double num = 0, den = 0;
  for (size_t i = 0; i < separate.size(); ++i)
    num += (in_place[i] - separate[i]) * (in_place[i] - separate[i]),
        den += separate[i] * separate[i];
  EXPECT_LE(num, kGpuF32Nmse * den) << "dx aliasing dy";
}

TEST(GpuL2Norm, OddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 30;
  for (int64_t T : odd_sizes())
    for (bool with_temp : {false, true})
      for (float floor : {0.0f, 1e-3f}) {
        check_norm(2, T, 2, 7, with_temp, floor, seed += 10);
        check_norm(1, T, 3, 33, with_temp, floor, seed += 10);
      }
}

TEST(GpuL2Norm, Zaya1Shape) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 700;
  for (int64_t H : {8, 2})
    for (bool with_temp : {false, true})
      for (float floor : {0.0f, 1.1920929e-07f})
        check_norm(2, 257, H, 128, with_temp, floor, seed += 10);
  check_norm(1, 33, 2, 128, true, 1e-3f, seed += 10);  // rows under the floor at the real width
}

}  // namespace
