// router_select_forward / router_select_backward: the GPU against the CPU backend (label gpu).
// Probabilities and weights to NMSE 1e-7 (the softmax is in double on both sides, so they agree
// to the last bit in practice), choices exactly, including ties and biases that decide.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

// Both sides' forward and backward on the same logits and biases; compares every output.
void check_router(const DevicePair& logits, const DevicePair& biases, int64_t N, int64_t K,
                  uint64_t seed) {
  DevicePair probs(DType::F32, {N, K}), choice(DType::I32, {N}), weight(DType::F32, {N});
  ops::router_select_forward(probs.cpu, choice.cpu, weight.cpu, logits.cpu, biases.cpu);
  ops::router_select_forward(probs.gpu, choice.gpu, weight.gpu, logits.gpu, biases.gpu);
  expect_nmse(probs, kGpuF32Nmse, "probs");
  expect_equal(choice, "choice");
  expect_nmse(weight, kGpuF32Nmse, "weight");

  // Backward from the CPU's probabilities and choices on both sides (so a choice that flips on a
  // near-tie cannot mask the backward's own agreement).
  probs.upload();
  choice.upload();
  const DevicePair dweight = random_pair(DType::F32, {N}, seed + 1);
  DevicePair dlogits = random_pair(DType::F32, {N, K}, seed + 2);  // overwritten
  ops::router_select_backward(dlogits.cpu, dweight.cpu, probs.cpu, choice.cpu);
  ops::router_select_backward(dlogits.gpu, dweight.gpu, probs.gpu, choice.gpu);
  expect_nmse(dlogits, kGpuF32Nmse, "dlogits");
}

TEST(GpuRouter, RandomOddSizes) {
  ZAYA_REQUIRE_GPU();
  for (int64_t K : {2, 3, 17, 33})
    for (int64_t N : odd_sizes()) {
      SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K));
      const uint64_t seed = uint64_t(100 * N + K);
      const DevicePair logits = random_pair(DType::F32, {N, K}, seed, 2.0);
      const DevicePair biases = random_pair(DType::F32, {K}, seed + 7, 0.05);
      check_router(logits, biases, N, K, seed);
    }
}

TEST(GpuRouter, ManyTokens) {
  ZAYA_REQUIRE_GPU();
  const int64_t N = 70000, K = 17;  // many rows, a production-like router width
  const DevicePair logits = random_pair(DType::F32, {N, K}, 5, 1.5);
  const DevicePair biases = random_pair(DType::F32, {K}, 6, 0.02);
  check_router(logits, biases, N, K, 9);
}

// Equal logits: the probabilities tie, zero biases → class 0; biases then decide, and a tie of
// biased scores goes to the lowest index; a bias can overrule a larger probability.
TEST(GpuRouter, TiesAndBiasesDeciding) {
  ZAYA_REQUIRE_GPU();
  const int64_t N = 5, K = 6;
  DevicePair logits(DType::F32, {N, K});
  float* l = static_cast<float*>(logits.cpu.data);
  for (int64_t i = 0; i < N * K; ++i) l[i] = 0.25f;  // rows 0–3: all classes tie
  l[4 * K + 1] = 1.0f;                               // row 4: class 1 most probable
  logits.upload();
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("biases variant " + std::to_string(variant));
    DevicePair biases(DType::F32, {K});
    float* b = static_cast<float*>(biases.cpu.data);
    if (variant == 1) b[3] = 0.01f;         // class 3 wins the ties
    if (variant == 2) b[2] = b[4] = 0.01f;  // 2 and 4 tie → 2
    if (variant == 3) b[5] = 1.0f;          // class 5 beats row 4's larger probability
    biases.upload();
    DevicePair probs(DType::F32, {N, K}), choice(DType::I32, {N}), weight(DType::F32, {N});
    ops::router_select_forward(probs.gpu, choice.gpu, weight.gpu, logits.gpu, biases.gpu);
    ops::router_select_forward(probs.cpu, choice.cpu, weight.cpu, logits.cpu, biases.cpu);
    expect_equal(choice, "choice");
    expect_equal(probs, "probs");
    const std::vector<double> c = choice.gpu_values();
    const int expect_tie[] = {0, 3, 2, 5}, expect_row4[] = {1, 1, 1, 5};
    for (int64_t n = 0; n < 4; ++n) EXPECT_EQ(c[size_t(n)], expect_tie[variant]) << "row " << n;
    EXPECT_EQ(c[4], expect_row4[variant]) << "row 4";
  }
}

}  // namespace
}  // namespace zaya::test
