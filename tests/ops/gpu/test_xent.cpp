// xent_forward / xent_backward on the GPU against the CPU backend (label gpu; skips without a
// device): odd vocabularies (scalar path), the ZAYA1 vocabulary 262,272 (float4 path), ignored rows
// (target −1), a confident row (p → 1 at the target), dlogits aliasing logits, a target past the
// vocabulary (NaN loss).
#include <cmath>

#include "gpu_test_util.h"

namespace zaya::test {
namespace {

std::vector<int32_t> make_targets(int64_t N, int64_t V) {
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) t[size_t(n)] = n % 4 == 1 ? -1 : int32_t((n * 7919) % V);
  return t;
}

struct Case {
  int64_t N, V;
};
const std::vector<Case> kCases = {{1, 1},     {7, 7},    {31, 33},    {33, 31},
                                  {257, 257}, {5, 2048}, {3, 262272}, {2, 262271}};

// boost is added to each counted row's target logit (a confident prediction).
void run_case(int64_t N, int64_t V, bool alias, uint64_t seed, double boost = 0) {
  SCOPED_TRACE("N " + std::to_string(N) + " V " + std::to_string(V) + (alias ? " aliased" : ""));
  DevicePair logits = random_pair(DType::F32, {N, V}, seed, 3.0);
  const std::vector<int32_t> t = make_targets(N, V);
  DevicePair target = i32_pair(t);
  if (boost != 0) {
    float* l = static_cast<float*>(logits.cpu.data);
    for (int64_t n = 0; n < N; ++n)
      if (t[size_t(n)] >= 0) l[n * V + t[size_t(n)]] += float(boost);
    logits.upload();
  }
  DevicePair loss(DType::F32, {N}), lse(DType::F32, {N});
  ops::xent_forward(loss.cpu, lse.cpu, logits.cpu, target.cpu);
  ops::xent_forward(loss.gpu, lse.gpu, logits.gpu, target.gpu);
  if (boost == 0) {
    expect_nmse(loss, kGpuF32Nmse, "loss");
  } else {
    // A confident row's loss = lse − ℓ_t cancels to ~1e-11 on both sides: the ulp of lse (~7e-15
    // in double at 50) and Σ of tiny terms onto 1 (the CPU too) leave it ~1e-3 relative at best.
    expect_close(loss.gpu_values(), loss.cpu_values(), 1e-9, 1e-6, "loss");
  }
  expect_nmse(lse, kGpuF32Nmse, "lse");
  // The backward from the same lse on both sides (the CPU's).
  lse.upload();
  const double scale = 1.0 / double(N);
  if (alias) {
    ops::xent_backward(logits.cpu, logits.cpu, lse.cpu, target.cpu, scale);
    ops::xent_backward(logits.gpu, logits.gpu, lse.gpu, target.gpu, scale);
    expect_nmse(logits, kGpuF32Nmse, "dlogits = logits");
  } else {
    DevicePair dlogits = random_pair(DType::F32, {N, V}, seed + 1);
    ops::xent_backward(dlogits.cpu, logits.cpu, lse.cpu, target.cpu, scale);
    ops::xent_backward(dlogits.gpu, logits.gpu, lse.gpu, target.gpu, scale);
    expect_nmse(dlogits, kGpuF32Nmse, "dlogits");
  }
}

TEST(GpuXent, MatchesCpu) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const Case& c : kCases)
    for (bool alias : {false, true}) run_case(c.N, c.V, alias, seed += 10);
}

// Rows dominated by their target (p → 1), where p − 1 at the target needs care.
TEST(GpuXent, ConfidentRows) {
  ZAYA_REQUIRE_GPU();
  for (double boost : {15.0, 40.0}) {
    run_case(33, 257, false, 77, boost);
    run_case(3, 262272, false, 78, boost + 10);
  }
}

// A target past the vocabulary (the CPU op asserts; bad data the loader let through) reads
// nothing on the GPU: that row's loss is NaN, the others are as usual.
TEST(GpuXent, TargetPastTheVocabularyIsANanLoss) {
  ZAYA_REQUIRE_GPU();
  const int64_t N = 3, V = 33;
  DevicePair logits = random_pair(DType::F32, {N, V}, 5, 3.0);
  DevicePair target = i32_pair({2, int32_t(V), -1});
  DevicePair loss(DType::F32, {N}), lse(DType::F32, {N});
  ops::xent_forward(loss.gpu, lse.gpu, logits.gpu, target.gpu);
  const std::vector<double> got = loss.gpu_values();
  EXPECT_TRUE(std::isfinite(got[0]) && got[0] > 0) << got[0];
  EXPECT_TRUE(std::isnan(got[1])) << got[1];
  EXPECT_EQ(got[2], 0.0);
}

}  // namespace
}  // namespace zaya::test
