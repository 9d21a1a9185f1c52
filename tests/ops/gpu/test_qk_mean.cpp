// GPU vs CPU: qk_mean_forward (Q, K) and qk_mean_backward (dz, du; both overwrite, so outputs are
// prefilled) for odd T, several GQA ratios and the ZAYA1-base shape (8 query + 2 kv heads of 128).
#include <string>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

void check_qk(int64_t B, int64_t T, int64_t Hq, int64_t Hk, int64_t d, uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(B) + " T " + std::to_string(T) + " Hq " + std::to_string(Hq) +
               " Hk " + std::to_string(Hk) + " d " + std::to_string(d));
  const int64_t C = (Hq + Hk) * d;
  DevicePair z = random_pair(DType::F32, {B, T, C}, seed);
  DevicePair u = random_pair(DType::F32, {B, T, C}, seed + 1);
  DevicePair Q = random_pair(DType::F32, {B, T, Hq, d}, seed + 2);
  DevicePair K = random_pair(DType::F32, {B, T, Hk, d}, seed + 3);
  ops::qk_mean_forward(Q.cpu, K.cpu, z.cpu, u.cpu);
  ops::qk_mean_forward(Q.gpu, K.gpu, z.gpu, u.gpu);
  expect_nmse(Q, kGpuF32Nmse, "Q");
  expect_nmse(K, kGpuF32Nmse, "K");

  DevicePair dQ = random_pair(DType::F32, {B, T, Hq, d}, seed + 4);
  DevicePair dK = random_pair(DType::F32, {B, T, Hk, d}, seed + 5);
  DevicePair dz = random_pair(DType::F32, {B, T, C}, seed + 6);
  DevicePair du = random_pair(DType::F32, {B, T, C}, seed + 7);
  ops::qk_mean_backward(dz.cpu, du.cpu, dQ.cpu, dK.cpu);
  ops::qk_mean_backward(dz.gpu, du.gpu, dQ.gpu, dK.gpu);
  expect_equal(dz, "dz");  // a copy of dQ and dK
  expect_nmse(du, kGpuF32Nmse, "du");
}

TEST(GpuQkMean, OddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 10;
  for (int64_t T : odd_sizes()) {
    check_qk(2, T, 4, 2, 7, seed += 10);
    check_qk(1, T, 3, 3, 5, seed += 10);  // G = 1
    check_qk(1, T, 6, 1, 33, seed += 10);
  }
}

TEST(GpuQkMean, Zaya1Shape) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 500;
  for (int64_t T : odd_sizes()) check_qk(1, T, 8, 2, 128, seed += 10);
  check_qk(3, 64, 8, 2, 128, seed += 10);
}

}  // namespace
