// GPU vs CPU: rope_tables are bitwise the CPU's (several T, pos0, θ and r); rope_forward and
// rope_backward in place on odd T, partial and full rotations, the ZAYA1-base heads (10 heads of
// 128 with the 8 query + 2 kv layout), and backward undoing forward.
#include <string>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Tables {
  DevicePair cos, sin;
  Tables(int64_t T, int64_t r, int64_t pos0, double theta)
      : cos(DType::F32, {T, r / 2}), sin(DType::F32, {T, r / 2}) {
    ops::rope_tables(cos.cpu, sin.cpu, pos0, theta, r);
    ops::rope_tables(cos.gpu, sin.gpu, pos0, theta, r);
  }
};

TEST(GpuRope, TablesBitwiseEqual) {
  ZAYA_REQUIRE_GPU();
  for (int64_t T : odd_sizes())
    for (int64_t r : {2, 64, 128})
      for (int64_t pos0 : {0, 1, 4093})
        for (double theta : {1e4, 1e6}) {
          SCOPED_TRACE("T " + std::to_string(T) + " r " + std::to_string(r) + " pos0 " +
                       std::to_string(pos0) + " theta " + std::to_string(theta));
          Tables t(T, r, pos0, theta);
          expect_equal(t.cos, "cos");
          expect_equal(t.sin, "sin");
        }
}

void check_rope(int64_t B, int64_t T, int64_t H, int64_t d, int64_t r, uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(B) + " T " + std::to_string(T) + " H " + std::to_string(H) +
               " d " + std::to_string(d) + " r " + std::to_string(r));
  Tables t(T, r, 0, 1e4);
  t.cos.upload();  // identical anyway; the CPU's values on both sides
  t.sin.upload();
  DevicePair x = random_pair(DType::F32, {B, T, H, d}, seed);
  const std::vector<double> original = x.cpu_values();
  ops::rope_forward(x.cpu, t.cos.cpu, t.sin.cpu);
  ops::rope_forward(x.gpu, t.cos.gpu, t.sin.gpu);
  expect_nmse(x, kGpuF32Nmse, "forward");
  DevicePair dx = random_pair(DType::F32, {B, T, H, d}, seed + 1);
  ops::rope_backward(dx.cpu, t.cos.cpu, t.sin.cpu);
  ops::rope_backward(dx.gpu, t.cos.gpu, t.sin.gpu);
  expect_nmse(dx, kGpuF32Nmse, "backward");
  // Backward (rotation by −angle) undoes forward on the GPU.
  ops::rope_backward(x.gpu, t.cos.gpu, t.sin.gpu);
  const std::vector<double> back = x.gpu_values();
  double num = 0, den = 0;
  for (size_t i = 0; i < back.size(); ++i)
    num += (back[i] - original[i]) * (back[i] - original[i]), den += original[i] * original[i];
  EXPECT_LE(num, 1e-10 * den) << "backward ∘ forward";
}

TEST(GpuRope, OddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 40;
  for (int64_t T : odd_sizes()) {
    check_rope(2, T, 3, 7, 4, seed += 10);  // partial, odd head size
    check_rope(1, T, 2, 8, 8, seed += 10);  // full rotation
  }
}

TEST(GpuRope, Zaya1Shape) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 800;
  for (int64_t T : odd_sizes()) {
    check_rope(1, T, 8, 128, 64, seed += 10);  // query heads, partial rotary
    check_rope(2, T, 2, 128, 64, seed += 10);  // kv heads
  }
  check_rope(1, 33, 10, 128, 128, seed += 10);
}

}  // namespace
