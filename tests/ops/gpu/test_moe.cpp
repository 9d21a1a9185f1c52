// moe_forward / moe_backward: the GPU against the CPU backend (label gpu). Every output to NMSE
// 1e-7 on odd widths (the scalar paths) and widths of 4k (the float4 paths), E = 2 and 8, empty
// experts (their gradients must stay exactly as prefilled), all tokens skipped, the += of dx,
// dw1 and dw2 over prefilled values, and the ZAYA1-base expert shape 2048 → 4096 → 2048.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

struct MoeCase {
  int64_t N, D, F, E;
  std::vector<int32_t> choice;  // [N] in [0, E]
  uint64_t seed;
};

// Classes for N tokens drawn from `allowed` (a fixed pseudo-random pattern).
std::vector<int32_t> choices(int64_t N, const std::vector<int32_t>& allowed, uint64_t seed) {
  CounterRng rng{seed, 3};
  std::vector<int32_t> c(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    c[size_t(n)] = allowed[size_t(rng.bits(uint64_t(n)) % allowed.size())];
  return c;
}

void check_moe(const MoeCase& c) {
  const int64_t N = c.N, D = c.D, F = c.F, E = c.E, H = F / 2;
  SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D) + " F " + std::to_string(F) +
               " E " + std::to_string(E));
  const uint64_t s = c.seed;
  const DevicePair x = random_pair(DType::F32, {N, D}, s);
  const DevicePair choice = i32_pair(c.choice);
  const DevicePair weight = random_pair(DType::F32, {N}, s + 1, 0.5);
  const DevicePair w1 = random_pair(DType::F32, {E, F, D}, s + 2, 1.0 / std::sqrt(double(D)));
  const DevicePair w2 = random_pair(DType::F32, {E, D, H}, s + 3, 1.0 / std::sqrt(double(H)));
  // Outputs prefilled with noise: every element must be written (skip rows of gu/act zeroed).
  DevicePair out = random_pair(DType::F32, {N, D}, s + 4),
             f = random_pair(DType::F32, {N, D}, s + 5);
  DevicePair gu = random_pair(DType::F32, {N, F}, s + 6),
             act = random_pair(DType::F32, {N, H}, s + 7);
  // The grouping the forward saves for the backward: the same on both sides, exactly.
  DevicePair order = i32_pair(std::vector<int32_t>(size_t(N), -1));
  std::vector<int32_t> offsets_cpu(size_t(E + 2), -1), offsets_gpu(size_t(E + 2), -1);
  const Tensor off_cpu(offsets_cpu.data(), {E + 2}), off_gpu(offsets_gpu.data(), {E + 2});
  ops::moe_forward(out.cpu, f.cpu, gu.cpu, act.cpu, x.cpu, choice.cpu, weight.cpu, w1.cpu, w2.cpu,
                   order.cpu, off_cpu);
  ops::moe_forward(out.gpu, f.gpu, gu.gpu, act.gpu, x.gpu, choice.gpu, weight.gpu, w1.gpu, w2.gpu,
                   order.gpu, off_gpu);
  EXPECT_EQ(offsets_gpu, offsets_cpu);
  EXPECT_EQ(order.gpu_values(), order.cpu_values());
  expect_nmse(out, kGpuF32Nmse, "out");
  expect_nmse(f, kGpuF32Nmse, "f");
  expect_nmse(gu, kGpuF32Nmse, "gu");
  expect_nmse(act, kGpuF32Nmse, "act");

  // Backward from the CPU's saved f, gu, act on both sides.
  f.upload();
  gu.upload();
  act.upload();
  const DevicePair dout = random_pair(DType::F32, {N, D}, s + 8);
  DevicePair dx = random_pair(DType::F32, {N, D}, s + 9);  // += onto these
  DevicePair dw1 = random_pair(DType::F32, {E, F, D}, s + 10, 0.1);
  DevicePair dw2 = random_pair(DType::F32, {E, D, H}, s + 11, 0.1);
  DevicePair dweight = random_pair(DType::F32, {N}, s + 12);  // overwritten
  const std::vector<double> dw1_before = dw1.cpu_values(), dw2_before = dw2.cpu_values();
  ops::moe_backward(dx.cpu, dw1.cpu, dw2.cpu, dweight.cpu, dout.cpu, x.cpu, choice.cpu, weight.cpu,
                    w1.cpu, w2.cpu, f.cpu, gu.cpu, act.cpu, order.cpu, off_cpu);
  ops::moe_backward(dx.gpu, dw1.gpu, dw2.gpu, dweight.gpu, dout.gpu, x.gpu, choice.gpu, weight.gpu,
                    w1.gpu, w2.gpu, f.gpu, gu.gpu, act.gpu, order.gpu, off_gpu);
  expect_nmse(dx, kGpuF32Nmse, "dx");
  expect_nmse(dw1, kGpuF32Nmse, "dw1");
  expect_nmse(dw2, kGpuF32Nmse, "dw2");
  expect_nmse(dweight, kGpuF32Nmse, "dweight");

  // Experts without tokens: their gradient slices are exactly the prefill.
  std::vector<int64_t> count(size_t(E + 1), 0);
  for (int32_t k : c.choice) ++count[size_t(k)];
  const std::vector<double> g1 = dw1.gpu_values(), g2 = dw2.gpu_values();
  for (int64_t e = 0; e < E; ++e) {
    if (count[size_t(e)]) continue;
    for (int64_t i = e * F * D; i < (e + 1) * F * D; ++i)
      ASSERT_EQ(g1[size_t(i)], dw1_before[size_t(i)]) << "dw1 of empty expert " << e;
    for (int64_t i = e * D * H; i < (e + 1) * D * H; ++i)
      ASSERT_EQ(g2[size_t(i)], dw2_before[size_t(i)]) << "dw2 of empty expert " << e;
  }
}

TEST(GpuMoe, OddSizesTwoExperts) {
  ZAYA_REQUIRE_GPU();
  for (int64_t N : odd_sizes()) {
    check_moe({N, 33, 14, 2, choices(N, {0, 1, 2}, uint64_t(N)), uint64_t(10 * N)});  // scalar
    check_moe({N, 32, 64, 2, choices(N, {0, 1, 2}, uint64_t(N + 1)), uint64_t(10 * N + 1)});
  }
}

TEST(GpuMoe, EightExpertsSomeEmpty) {
  ZAYA_REQUIRE_GPU();
  for (int64_t N : {7, 33, 257, 1000}) {
    // Experts 1, 2, 4, 5, 6, 7 get no tokens; 8 is the skip class.
    check_moe({N, 64, 96, 8, choices(N, {0, 3, 8}, uint64_t(N + 5)), uint64_t(N + 50)});
    // Every class, odd widths.
    check_moe(
        {N, 31, 18, 8, choices(N, {0, 1, 2, 3, 4, 5, 6, 7, 8}, uint64_t(N + 6)), uint64_t(N + 60)});
  }
}

TEST(GpuMoe, AllSkip) {
  ZAYA_REQUIRE_GPU();
  for (int64_t N : {1, 33, 257})
    for (int64_t E : {2, 8})
      check_moe({N, 32, 16, E, std::vector<int32_t>(size_t(N), int32_t(E)), 7});
}

TEST(GpuMoe, NoSkipOneExpert) {
  ZAYA_REQUIRE_GPU();
  check_moe({300, 48, 40, 8, std::vector<int32_t>(300, 5), 11});  // one expert takes all
}

TEST(GpuMoe, Zaya1BaseShape) {
  ZAYA_REQUIRE_GPU();
  // D 2048, F 4096 (hidden 2048); few tokens over 4 experts (one left empty) and the skip class.
  check_moe({33, 2048, 4096, 4, choices(33, {0, 1, 3, 4}, 99), 123});
}

}  // namespace
}  // namespace zaya::test
