// lm_head_xent_forward / _backward / _forward_backward (the fused tied LM head + cross-entropy; the
// last one training's one pass) on the GPU against the CPU backend (label gpu; skips without a
// device) and the one pass against the GPU's own two ops, bit for bit: odd sizes, ignored rows, all
// rows ignored, dw accumulating onto a prefill, and the ZAYA1 vocabulary 262,272 with more rows
// than one 1 GiB logits block holds (so the GPU's row blocking runs more than one block).
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

std::vector<int32_t> make_targets(int64_t N, int64_t V, bool all_ignored) {
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    t[size_t(n)] = all_ignored || n % 4 == 1 ? -1 : int32_t((n * 7919) % V);
  return t;
}

void run_case(int64_t N, int64_t D, int64_t V, uint64_t seed, bool all_ignored = false) {
  SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D) + " V " + std::to_string(V));
  DevicePair x = random_pair(DType::F32, {N, D}, seed, 1.0);
  DevicePair w = random_pair(DType::F32, {V, D}, seed + 1, 0.3);
  DevicePair target = i32_pair(make_targets(N, V, all_ignored));
  DevicePair loss(DType::F32, {N}), lse(DType::F32, {N});
  ops::lm_head_xent_forward(loss.cpu, lse.cpu, x.cpu, w.cpu, target.cpu);
  ops::lm_head_xent_forward(loss.gpu, lse.gpu, x.gpu, w.gpu, target.gpu);
  if (all_ignored)  // all zero: no scale for an NMSE
    EXPECT_EQ(loss.gpu_values(), loss.cpu_values());
  else
    expect_nmse(loss, kGpuF32Nmse, "loss");
  expect_nmse(lse, kGpuF32Nmse, "lse");
  // The backward from the same lse on both sides (the CPU's); dx overwritten, dw accumulated.
  lse.upload();
  const double scale = 1.0 / double(N);
  DevicePair dx = random_pair(DType::F32, {N, D}, seed + 2);
  DevicePair dw = random_pair(DType::F32, {V, D}, seed + 3, 1e-3);
  ops::lm_head_xent_backward(dx.cpu, dw.cpu, x.cpu, w.cpu, lse.cpu, target.cpu, scale);
  ops::lm_head_xent_backward(dx.gpu, dw.gpu, x.gpu, w.gpu, lse.gpu, target.gpu, scale);
  if (all_ignored)
    EXPECT_EQ(dx.gpu_values(), dx.cpu_values());
  else if (V == 1)  // p = 1 at the target: dx is 0 up to the rounding of the recomputed logits
    expect_close(dx.gpu_values(), dx.cpu_values(), 1e-6, 0, "dx (V = 1)");
  else
    expect_nmse(dx, kGpuF32Nmse, "dx");
  expect_nmse(dw, kGpuF32Nmse, "dw");

  // Training's one pass: the GPU's own forward + backward bit for bit (the same kernels on the
  // same blocks, the logits computed once), and the CPU's one pass within the f32 bound.
  DevicePair loss1(DType::F32, {N}), lse1(DType::F32, {N}), loss2(DType::F32, {N}),
      lse2(DType::F32, {N});
  DevicePair dx1 = random_pair(DType::F32, {N, D}, seed + 2);
  DevicePair dw1 = random_pair(DType::F32, {V, D}, seed + 3, 1e-3);
  DevicePair dx2 = random_pair(DType::F32, {N, D}, seed + 2);
  DevicePair dw2 = random_pair(DType::F32, {V, D}, seed + 3, 1e-3);
  ops::lm_head_xent_forward_backward(loss1.gpu, lse1.gpu, dx1.gpu, dw1.gpu, x.gpu, w.gpu,
                                     target.gpu, scale);
  ops::lm_head_xent_forward(loss2.gpu, lse2.gpu, x.gpu, w.gpu, target.gpu);
  ops::lm_head_xent_backward(dx2.gpu, dw2.gpu, x.gpu, w.gpu, lse2.gpu, target.gpu, scale);
  EXPECT_EQ(loss1.gpu_values(), loss2.gpu_values());
  EXPECT_EQ(lse1.gpu_values(), lse2.gpu_values());
  EXPECT_EQ(dx1.gpu_values(), dx2.gpu_values());
  EXPECT_EQ(dw1.gpu_values(), dw2.gpu_values());
  ops::lm_head_xent_forward_backward(loss1.cpu, lse1.cpu, dx1.cpu, dw1.cpu, x.cpu, w.cpu,
                                     target.cpu, scale);
  expect_nmse(lse1, kGpuF32Nmse, "one pass: lse");
  expect_nmse(dw1, kGpuF32Nmse, "one pass: dw");
  if (!all_ignored && V > 1) {
    expect_nmse(loss1, kGpuF32Nmse, "one pass: loss");
    expect_nmse(dx1, kGpuF32Nmse, "one pass: dx");
  }
}

TEST(GpuLmHeadXent, MatchesCpu) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int64_t V : {1, 7, 1000, 1025, 4099})
    for (int64_t N : {1, 33, 257}) run_case(N, 31, V, seed += 10);
}

TEST(GpuLmHeadXent, AllRowsIgnored) {
  ZAYA_REQUIRE_GPU();
  run_case(33, 16, 1025, 91, true);
}

TEST(GpuLmHeadXent, ZayaVocabularyInSeveralRowBlocks) {
  ZAYA_REQUIRE_GPU();
  run_case(1100, 16, 262272, 101);  // 2^28 / 262272 = 1023 rows per block: two blocks
}

}  // namespace
}  // namespace zaya::test
