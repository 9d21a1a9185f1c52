// The optimizer ops on the GPU against the CPU ones: newton_schulz (symmetric and plain Gram
// products, wide, tall and square, out aliasing g, zero steps) and the elementwise updates
// adamw_update, muon_momentum, muon_apply and balance_update (F64 counts on the device, the
// no-op of zero counts).
#include <cstdlib>
#include <string>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

std::string shape(int64_t r, int64_t c) {
  return std::to_string(r) + "x" + std::to_string(c);
}

// With the default GEMM engine (cuBLASLt on NVIDIA) and with the tiled kernel.
void check_newton_schulz(int64_t rows, int64_t cols, int steps, bool symmetric, bool alias,
                         uint64_t seed) {
  for (const char* engine : {"auto", "tiled"}) {
    setenv("ZAYA_GPU_GEMM", engine, 1);
    DevicePair g = random_pair(DType::F32, {rows, cols}, seed);
    DevicePair out(DType::F32, {rows, cols});
    ops::newton_schulz(alias ? g.cpu : out.cpu, g.cpu, steps, symmetric);
    ops::newton_schulz(alias ? g.gpu : out.gpu, g.gpu, steps, symmetric);
    const std::string what = "newton_schulz " + shape(rows, cols) + (symmetric ? " sym" : " gemm") +
                             (alias ? " aliased" : "") + " steps " + std::to_string(steps) +
                             " engine " + engine;
    expect_nmse(alias ? g : out, kGpuF32Nmse, what.c_str());
  }
  unsetenv("ZAYA_GPU_GEMM");
}

// Non-negative values (squares of normals): second moments.
DevicePair squares_pair(int64_t n, uint64_t seed, double scale) {
  DevicePair v = random_pair(DType::F32, {n}, seed, scale);
  float* h = v.cpu.ptr<float>();
  for (int64_t i = 0; i < n; ++i) h[i] *= h[i];
  v.upload();
  return v;
}

// The parameter and both moments of an Adam-like step, GPU vs CPU.
void expect_state(const DevicePair& w, const DevicePair& m, const DevicePair& v,
                  const std::string& what) {
  expect_nmse(w, kGpuF32Nmse, (what + " w").c_str());
  expect_nmse(m, kGpuF32Nmse, (what + " m").c_str());
  expect_nmse(v, kGpuF32Nmse, (what + " v").c_str());
}

}  // namespace

TEST(GpuOptim, NewtonSchulzWideTallSquare) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (bool symmetric : {true, false}) {
    for (int64_t n : odd_sizes()) {
      check_newton_schulz(7, n, 5, symmetric, false, ++seed);  // wide (or tall for n < 7)
      check_newton_schulz(n, 33, 5, symmetric, false, ++seed);
      check_newton_schulz(n, n, 5, symmetric, false, ++seed);
    }
    check_newton_schulz(257, 31, 5, symmetric, false, ++seed);  // tall: transposed
    check_newton_schulz(300, 1000, 5, symmetric, false, ++seed);
    check_newton_schulz(1000, 300, 5, symmetric, true, ++seed);  // out aliases g
    check_newton_schulz(33, 31, 0, symmetric, false, ++seed);    // only the normalisation
    check_newton_schulz(31, 33, 1, symmetric, true, ++seed);
  }
}

TEST(GpuOptim, NewtonSchulzModelShape) {
  ZAYA_REQUIRE_GPU();
  // ZAYA1-base-like widths (2048), the short side kept small so the CPU oracle stays fast.
  check_newton_schulz(512, 2048, 5, true, false, 100);
  check_newton_schulz(2048, 512, 5, false, false, 101);
  check_newton_schulz(256, 4096, 5, true, true, 102);
}

TEST(GpuOptim, AdamW) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 200;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(257), int64_t(100003)})
    for (int64_t step : {1, 10}) {
      DevicePair w = random_pair(DType::F32, {n}, ++seed);
      DevicePair g = random_pair(DType::F32, {n}, ++seed);
      DevicePair m = random_pair(DType::F32, {n}, ++seed, 0.1);
      DevicePair v = squares_pair(n, ++seed, 1.0);
      ops::AdamWParams p;
      p.lr = 3e-3, p.weight_decay = 0.1, p.step = step;
      ops::adamw_update(w.cpu, g.cpu, m.cpu, v.cpu, p);
      ops::adamw_update(w.gpu, g.gpu, m.gpu, v.gpu, p);
      expect_state(w, m, v, "adamw");
    }
}

TEST(GpuOptim, MuonMomentumAndApply) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 300;
  for (int64_t n : {int64_t(1), int64_t(33), int64_t(100003)})
    for (bool nesterov : {false, true}) {
      DevicePair buf = random_pair(DType::F32, {n}, ++seed);
      DevicePair scratch = random_pair(DType::F32, {n}, ++seed);
      DevicePair g = random_pair(DType::F32, {n}, ++seed);
      ops::muon_momentum(buf.cpu, scratch.cpu, g.cpu, 0.95, nesterov);
      ops::muon_momentum(buf.gpu, scratch.gpu, g.gpu, 0.95, nesterov);
      expect_nmse(buf, kGpuF32Nmse, "muon_momentum buf");
      expect_nmse(scratch, kGpuF32Nmse, "muon_momentum scratch");

      DevicePair w = random_pair(DType::F32, {n}, ++seed);
      ops::muon_apply(w.cpu, scratch.cpu, 0.02, 1 - 0.02 * 0.1, 0.2 * 45.25);
      ops::muon_apply(w.gpu, scratch.gpu, 0.02, 1 - 0.02 * 0.1, 0.2 * 45.25);
      expect_nmse(w, kGpuF32Nmse, "muon_apply w");
    }
}

TEST(GpuOptim, BalanceUpdate) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 400;
  for (int64_t n : {int64_t(1), int64_t(16), int64_t(257), int64_t(1000)})
    for (int64_t step : {1, 7})
      for (bool empty : {false, true}) {
        DevicePair bias = random_pair(DType::F32, {n}, ++seed, 0.01);
        DevicePair m = random_pair(DType::F32, {n}, ++seed, 0.01);
        DevicePair v = squares_pair(n, ++seed, 0.01);
        DevicePair counts(DType::F64, {n + 1});  // the real experts and the skip class
        double* hc = counts.cpu.ptr<double>();
        for (int64_t k = 0; k <= n; ++k) hc[k] = empty ? 0.0 : double((k * 37 + step) % 101);
        counts.upload();
        ops::BalanceParams p;
        p.lr = 1e-3, p.weight_decay = 0.01, p.step = step;
        ops::balance_update(bias.cpu, m.cpu, v.cpu, counts.cpu, p);
        ops::balance_update(bias.gpu, m.gpu, v.gpu, counts.gpu, p);
        expect_state(bias, m, v, "balance_update");
      }
}
