// GPU vs CPU: cca_conv_forward / cca_conv_backward (z, the saved y, du +=, dw0/db0/dw1/db1 +=)
// for odd T and group widths on both sides of the 64-channel tile, and the ZAYA1-base attention
// shape (8 query + 2 kv heads of 128: C = 1280, d = 128); the backward's parameter sums are
// bitwise repeatable. cca_conv_step_forward: chunks of 1, 2 and 17 on the GPU equal the GPU's
// full conv and the CPU's step (z and the carried state), with F32 and BF16 conv weights.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct ConvParams {
  DevicePair w0, b0, w1, b1;
  ConvParams(int64_t C, int64_t d, uint64_t seed)
      : w0(random_pair(DType::F32, {C, 1, 2}, seed + 1, 0.7)),
        b0(random_pair(DType::F32, {C}, seed + 2, 0.5)),
        w1(random_pair(DType::F32, {C, d, 2}, seed + 3, 1.0 / std::sqrt(2.0 * double(d)))),
        b1(random_pair(DType::F32, {C}, seed + 4, 0.5)) {}
};

// NMSE of a against the reference b (both host vectors).
double nmse(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return den > 0 ? num / den : num;
}

void check_conv(int64_t B, int64_t T, int64_t groups, int64_t d, uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(B) + " T " + std::to_string(T) + " groups " +
               std::to_string(groups) + " d " + std::to_string(d));
  const int64_t C = groups * d;
  DevicePair u = random_pair(DType::F32, {B, T, C}, seed);
  ConvParams p(C, d, seed);
  DevicePair z(DType::F32, {B, T, C}), y(DType::F32, {B, T + 1, C});
  ops::cca_conv_forward(z.cpu, y.cpu, u.cpu, p.w0.cpu, p.b0.cpu, p.w1.cpu, p.b1.cpu);
  ops::cca_conv_forward(z.gpu, y.gpu, u.gpu, p.w0.gpu, p.b0.gpu, p.w1.gpu, p.b1.gpu);
  expect_nmse(z, kGpuF32Nmse, "z");
  expect_nmse(y, kGpuF32Nmse, "y");

  // Backward from the CPU's y on both sides; every output prefilled (all accumulate).
  y.upload();
  DevicePair dz = random_pair(DType::F32, {B, T, C}, seed + 10);
  DevicePair du = random_pair(DType::F32, {B, T, C}, seed + 11);
  DevicePair dw0 = random_pair(DType::F32, {C, 1, 2}, seed + 12);
  DevicePair db0 = random_pair(DType::F32, {C}, seed + 13);
  DevicePair dw1 = random_pair(DType::F32, {C, d, 2}, seed + 14);
  DevicePair db1 = random_pair(DType::F32, {C}, seed + 15);
  ops::cca_conv_backward(du.cpu, dw0.cpu, db0.cpu, dw1.cpu, db1.cpu, dz.cpu, u.cpu, y.cpu, p.w0.cpu,
                         p.w1.cpu);
  ops::cca_conv_backward(du.gpu, dw0.gpu, db0.gpu, dw1.gpu, db1.gpu, dz.gpu, u.gpu, y.gpu, p.w0.gpu,
                         p.w1.gpu);
  expect_nmse(du, kGpuF32Nmse, "du");
  expect_nmse(dw0, kGpuF32Nmse, "dw0");
  expect_nmse(db0, kGpuF32Nmse, "db0");
  expect_nmse(dw1, kGpuF32Nmse, "dw1");
  expect_nmse(db1, kGpuF32Nmse, "db1");
}

TEST(GpuCcaConv, OddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 100;
  for (int64_t T : odd_sizes()) {
    check_conv(2, T, 3, 7, seed += 20);   // a group far below one channel tile
    check_conv(1, T, 2, 65, seed += 20);  // two channel tiles, the second of one channel
  }
  check_conv(3, 5, 4, 1, seed += 20);  // d = 1: channels do not mix
}

TEST(GpuCcaConv, Zaya1Shape) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 900;
  for (int64_t T : {int64_t(1), int64_t(33), int64_t(257)}) check_conv(1, T, 10, 128, seed += 20);
  check_conv(2, 70, 10, 128, seed += 20);
}

// Chunked parameter sums: the same call twice gives the same bits (no atomics).
TEST(GpuCcaConv, BackwardIsDeterministic) {
  ZAYA_REQUIRE_GPU();
  const int64_t B = 2, T = 1500, d = 64, C = 2 * d;  // > 1024 tokens: several dw1 chunks
  DevicePair u = random_pair(DType::F32, {B, T, C}, 5);
  ConvParams p(C, d, 6);
  DevicePair z(DType::F32, {B, T, C}), y(DType::F32, {B, T + 1, C});
  ops::cca_conv_forward(z.gpu, y.gpu, u.gpu, p.w0.gpu, p.b0.gpu, p.w1.gpu, p.b1.gpu);
  DevicePair dz = random_pair(DType::F32, {B, T, C}, 7);
  std::vector<std::vector<double>> runs[2];
  for (auto& run : runs) {
    DevicePair du(DType::F32, {B, T, C}), dw0(DType::F32, {C, 1, 2}), db0(DType::F32, {C});
    DevicePair dw1(DType::F32, {C, d, 2}), db1(DType::F32, {C});
    ops::cca_conv_backward(du.gpu, dw0.gpu, db0.gpu, dw1.gpu, db1.gpu, dz.gpu, u.gpu, y.gpu,
                           p.w0.gpu, p.w1.gpu);
    run = {du.gpu_values(), dw0.gpu_values(), db0.gpu_values(), dw1.gpu_values(), db1.gpu_values()};
  }
  for (size_t k = 0; k < runs[0].size(); ++k) EXPECT_EQ(runs[0][k], runs[1][k]) << "output " << k;
}

// A BF16 copy of an F32 pair's values (rounded), and the F32 pair of exactly those values.
DevicePair to_bf16(const DevicePair& f32) {
  DevicePair out(DType::BF16, {f32.cpu.numel()});
  for (int64_t i = 0; i < f32.cpu.numel(); ++i)
    out.cpu.ptr<uint16_t>()[i] = f32_to_bf16(f32.cpu.ptr<float>()[i]);
  out.upload();
  return out;
}
void widen_in_place(DevicePair& f32, const DevicePair& bf16) {
  for (int64_t i = 0; i < f32.cpu.numel(); ++i)
    f32.cpu.ptr<float>()[i] = bf16_to_f32(bf16.cpu.ptr<uint16_t>()[i]);
  f32.upload();
}

void check_step(int64_t T, int64_t groups, int64_t d, int64_t chunk, bool bf16, uint64_t seed) {
  SCOPED_TRACE("T " + std::to_string(T) + " groups " + std::to_string(groups) + " d " +
               std::to_string(d) + " chunk " + std::to_string(chunk) + (bf16 ? " bf16" : " f32"));
  const int64_t C = groups * d;
  DevicePair u = random_pair(DType::F32, {T, C}, seed);
  ConvParams p(C, d, seed);
  DevicePair w0h = to_bf16(p.w0), w1h = to_bf16(p.w1);
  Tensor w0_cpu = p.w0.cpu, w0_gpu = p.w0.gpu, w1_cpu = p.w1.cpu, w1_gpu = p.w1.gpu;
  if (bf16) {
    widen_in_place(p.w0, w0h);  // the full conv sees the bf16 values in f32
    widen_in_place(p.w1, w1h);
    w0_cpu = w0h.cpu.view({C, 1, 2}), w0_gpu = w0h.gpu.view({C, 1, 2});
    w1_cpu = w1h.cpu.view({C, d, 2}), w1_gpu = w1h.gpu.view({C, d, 2});
  }
  // The GPU's full conv of the whole sequence.
  DevicePair z_full(DType::F32, {1, T, C}), y_full(DType::F32, {1, T + 1, C});
  ops::cca_conv_forward(z_full.gpu, y_full.gpu, u.gpu.view({1, T, C}), p.w0.gpu, p.b0.gpu, p.w1.gpu,
                        p.b1.gpu);
  // Chunked steps from a zero state on both sides.
  DevicePair z(DType::F32, {T, C}), state(DType::F32, {2, C});
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t t1 = std::min(t0 + chunk, T);
    ops::cca_conv_step_forward(z.cpu.rows(t0, t1), state.cpu, u.cpu.rows(t0, t1), w0_cpu, p.b0.cpu,
                               w1_cpu, p.b1.cpu);
    ops::cca_conv_step_forward(z.gpu.rows(t0, t1), state.gpu, u.gpu.rows(t0, t1), w0_gpu, p.b0.gpu,
                               w1_gpu, p.b1.gpu);
  }
  expect_nmse(z, kGpuF32Nmse, "step z vs the CPU's step");
  expect_equal(state, "state");
  EXPECT_LE(nmse(z.gpu_values(), z_full.gpu_values()), kGpuF32Nmse) << "step z vs the full conv";
}

TEST(GpuCcaConvStep, ChunksEqualFullConv) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 300;
  for (bool bf16 : {false, true})
    for (int64_t chunk : {1, 2, 17}) {
      check_step(40, 3, 7, chunk, bf16, seed += 10);
      check_step(35, 2, 65, chunk, bf16, seed += 10);
      check_step(37, 10, 128, chunk, bf16, seed += 10);  // ZAYA1-base: C = 1280
    }
  check_step(257, 10, 128, 257, false, seed += 10);  // one long prefill chunk (tiled path)
  check_step(1, 3, 7, 1, true, seed += 10);
}

}  // namespace
