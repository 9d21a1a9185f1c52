// GPU vs CPU: value_shift_forward / value_shift_backward (both overwrite: outputs prefilled) for
// odd T, widths on the float4 path (half a multiple of 4) and off it, 3-d and 4-d shapes, an
// unaligned view, and the ZAYA1-base value width (2 kv heads of 128). A bit move: exact.
#include <string>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

void check_shift(const Tensor& p_cpu, const Tensor& p_gpu, const Tensor& v_cpu, const Tensor& v_gpu,
                 const DevicePair& v_pair) {
  ops::value_shift_forward(v_cpu, p_cpu);
  ops::value_shift_forward(v_gpu, p_gpu);
  expect_equal(v_pair, "v");
}

void check_widths(int64_t B, int64_t T, int64_t H, int64_t d, uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(B) + " T " + std::to_string(T) + " H " + std::to_string(H) +
               " d " + std::to_string(d));
  // 4-d [B,T,H,d].
  DevicePair p = random_pair(DType::F32, {B, T, H, d}, seed);
  DevicePair v = random_pair(DType::F32, {B, T, H, d}, seed + 1);
  check_shift(p.cpu, p.gpu, v.cpu, v.gpu, v);
  DevicePair dv = random_pair(DType::F32, {B, T, H * d}, seed + 2);  // 3-d
  DevicePair dp = random_pair(DType::F32, {B, T, H * d}, seed + 3);
  ops::value_shift_backward(dp.cpu, dv.cpu);
  ops::value_shift_backward(dp.gpu, dv.gpu);
  expect_equal(dp, "dp");
}

TEST(GpuValueShift, OddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 20;
  for (int64_t T : odd_sizes()) {
    check_widths(2, T, 1, 2, seed += 10);    // half 1
    check_widths(1, T, 3, 2, seed += 10);    // half 3, a head straddling the halves
    check_widths(2, T, 2, 4, seed += 10);    // half 4: float4
    check_widths(1, T, 2, 128, seed += 10);  // ZAYA1-base: W = 256
  }
}

// A view one float into its buffer: the float4 path is not aligned, the scalar path runs.
TEST(GpuValueShift, UnalignedView) {
  ZAYA_REQUIRE_GPU();
  const int64_t B = 2, T = 9, W = 16;
  DevicePair p = random_pair(DType::F32, {B * T * W + 1}, 3);
  DevicePair v = random_pair(DType::F32, {B * T * W + 1}, 4);
  auto at1 = [&](const Tensor& t) {
    Tensor s = t.rows(1, 1 + B * T * W).view({B, T, W});
    return s;
  };
  check_shift(at1(p.cpu), at1(p.gpu), at1(v.cpu), at1(v.gpu), v);
}

}  // namespace
