// The optimizer ops on the GPU against the CPU ones: newton_schulz (symmetric and plain Gram
// products, wide, tall and square, out aliasing g, zero steps) and the elementwise updates
// adamw_update (with and without a clipping scale), muon_momentum (on clipped gradients too),
// muon_apply and balance_update (F64 counts on the device, the no-op of zero counts).
//
// The elementwise updates are compared element by element, as updates: Δw = w_new − w_old on the
// GPU against the CPU's within a few ulps of w (both compute one double expression and round it
// once; an FMA contracted differently moves the result by an ulp). A global NMSE of the new
// weights would hide a dropped term of the update (weight decay moves w by lr·wd·|w|, ~1e-4 of
// |w| here: an NMSE of ~1e-8); the ulp bound is 1000 times smaller than that term.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

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
    const ScopedEnv e("ZAYA_GPU_GEMM", engine);
    DevicePair g = random_pair(DType::F32, {rows, cols}, seed);
    DevicePair out(DType::F32, {rows, cols});
    ops::newton_schulz(alias ? g.cpu : out.cpu, g.cpu, steps, symmetric);
    ops::newton_schulz(alias ? g.gpu : out.gpu, g.gpu, steps, symmetric);
    const std::string what = "newton_schulz " + shape(rows, cols) + (symmetric ? " sym" : " gemm") +
                             (alias ? " aliased" : "") + " steps " + std::to_string(steps) +
                             " engine " + engine;
    expect_nmse(alias ? g : out, kGpuF32Nmse, what.c_str());
  }
}

// Non-negative values (squares of normals): second moments.
DevicePair squares_pair(int64_t n, uint64_t seed, double scale) {
  DevicePair v = random_pair(DType::F32, {n}, seed, scale);
  float* h = v.cpu.ptr<float>();
  for (int64_t i = 0; i < n; ++i) h[i] *= h[i];
  v.upload();
  return v;
}

// The spacing of floats at |x| (the smallest normal's for 0 and subnormals).
double ulp(double x) {
  const float a = std::max(float(std::fabs(x)), FLT_MIN);
  return double(std::nextafter(a, INFINITY)) - double(a);
}

// An elementwise update of `p` (whose values before the op were `before`), GPU vs CPU, element by
// element: |Δgpu − Δcpu| ≤ ulps · ulp(max(|before|, |after|, |terms|)), with Δ = after − before and
// `terms` (empty: none) the size of the other inputs the op added in (the rounding of an expression
// is on the scale of its terms, not of its result). Names the worst element with both updates.
void expect_update(const std::vector<double>& before, const DevicePair& p, double ulps,
                   const std::string& what, const std::vector<double>& terms = {}) {
  const std::vector<double> gpu = p.gpu_values(), cpu = p.cpu_values();
  ASSERT_EQ(gpu.size(), before.size()) << what;
  double worst = -1;  // the largest |Δgpu − Δcpu| / tolerance
  size_t at = 0, bad = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    double size = std::max({std::fabs(before[i]), std::fabs(cpu[i])});
    if (!terms.empty()) size = std::max(size, std::fabs(terms[i]));
    const double tol = ulps * ulp(size);
    const double diff = std::fabs((gpu[i] - before[i]) - (cpu[i] - before[i]));
    if (!(diff <= tol)) ++bad;
    const double r = std::isnan(diff) ? INFINITY : diff / tol;
    if (r > worst) worst = r, at = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << gpu.size()
                     << " elements updated differently; worst element " << at << ": Δ gpu "
                     << gpu[at] - before[at] << " cpu " << cpu[at] - before[at] << " (from "
                     << before[at] << "), off by " << worst << " times the tolerance of " << ulps
                     << " ulps";
}

// Element by element: |gpu − cpu| ≤ ulps · ulp(max(|cpu|, |terms|)) (an output that overwrites
// what was there, e.g. Muon's Nesterov look-ahead).
void expect_ulps(const DevicePair& p, double ulps, const std::string& what,
                 const std::vector<double>& terms) {
  expect_update(std::vector<double>(size_t(p.cpu.numel()), 0.0), p, ulps, what, terms);
}

// |x| (and |y| elementwise added: the size of a sum's terms).
std::vector<double> magnitudes(const std::vector<double>& x, const std::vector<double>& y = {}) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = std::fabs(x[i]) + (y.empty() ? 0 : std::fabs(y[i]));
  return out;
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

// Weight decay on, at the first step (bias corrections largest) and a later one, without and with
// a clipping scale (folded into the gradient's read: float(g·float(scale))).
TEST(GpuOptim, AdamW) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 200;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(257), int64_t(100003)})
    for (int64_t step : {1, 10})
      for (double clip : {1.0, 0.37, 1e-3}) {
        const std::string what = "adamw n " + std::to_string(n) + " step " + std::to_string(step) +
                                 " clip " + std::to_string(clip);
        DevicePair w = random_pair(DType::F32, {n}, ++seed);
        DevicePair g = random_pair(DType::F32, {n}, ++seed);
        DevicePair m = random_pair(DType::F32, {n}, ++seed, 0.1);
        DevicePair v = squares_pair(n, ++seed, 1.0);
        const std::vector<double> w0 = w.cpu_values(), m0 = m.cpu_values(), v0 = v.cpu_values();
        std::vector<double> g_read = g.cpu_values(),
                            g2(static_cast<size_t>(n));  // as the update reads it
        for (size_t i = 0; i < g_read.size(); ++i) {
          g_read[i] = double(float(g_read[i]) * float(clip));
          g2[i] = g_read[i] * g_read[i];
        }
        ops::AdamWParams p;
        p.lr = 3e-3, p.weight_decay = 0.1, p.step = step, p.grad_scale = clip;
        ops::adamw_update(w.cpu, g.cpu, m.cpu, v.cpu, p);
        ops::adamw_update(w.gpu, g.gpu, m.gpu, v.gpu, p);
        expect_update(w0, w, 2, what + " w");
        expect_update(m0, m, 2, what + " m", g_read);
        expect_update(v0, v, 2, what + " v", g2);
      }
}

// Muon's clipping scales the gradients first (ops::scale, as the optimizer does), then the
// momentum; the weight step with decay and the RMS-matching scale.
TEST(GpuOptim, MuonMomentumAndApply) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 300;
  for (int64_t n : {int64_t(1), int64_t(33), int64_t(100003)})
    for (bool nesterov : {false, true})
      for (double clip : {1.0, 0.37}) {
        const std::string what = "muon n " + std::to_string(n) + (nesterov ? " nesterov" : "") +
                                 " clip " + std::to_string(clip);
        DevicePair buf = random_pair(DType::F32, {n}, ++seed);
        DevicePair scratch = random_pair(DType::F32, {n}, ++seed);
        DevicePair g = random_pair(DType::F32, {n}, ++seed);
        if (clip != 1.0) {
          ops::scale(g.cpu, clip);
          ops::scale(g.gpu, clip);
          expect_equal(g, (what + " clipped g").c_str());
        }
        const std::vector<double> b0 = buf.cpu_values(), gv = g.cpu_values();
        ops::muon_momentum(buf.cpu, scratch.cpu, g.cpu, 0.95, nesterov);
        ops::muon_momentum(buf.gpu, scratch.gpu, g.gpu, 0.95, nesterov);
        // f32 arithmetic: μ·buf + g (one FMA or two roundings), and g + μ·buf on that.
        expect_update(b0, buf, 2, what + " buf", gv);
        expect_ulps(scratch, 4, what + " scratch", magnitudes(gv, b0));

        scratch.upload();  // the same u on both sides (its rounding above is not the step's)
        DevicePair w = random_pair(DType::F32, {n}, ++seed);
        const std::vector<double> w0 = w.cpu_values();
        ops::muon_apply(w.cpu, scratch.cpu, 0.02, 1 - 0.02 * 0.1, 0.2 * 45.25);
        ops::muon_apply(w.gpu, scratch.gpu, 0.02, 1 - 0.02 * 0.1, 0.2 * 45.25);
        expect_update(w0, w, 2, what + " w");
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
        const std::vector<double> b0 = bias.cpu_values(), m0 = m.cpu_values(), v0 = v.cpu_values();
        ops::BalanceParams p;
        p.lr = 1e-3, p.weight_decay = 0.01, p.step = step;
        ops::balance_update(bias.cpu, m.cpu, v.cpu, counts.cpu, p);
        ops::balance_update(bias.gpu, m.gpu, v.gpu, counts.gpu, p);
        // The gradient: the error e = counts/N − 1/n of each expert (N = Σ counts).
        double total = 0;
        for (int64_t k = 0; k <= n; ++k) total += hc[k];
        std::vector<double> e(static_cast<size_t>(n)), e2(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) {
          e[size_t(k)] = total == 0 ? 0 : hc[k] / total - 1.0 / double(n);
          e2[size_t(k)] = e[size_t(k)] * e[size_t(k)];
        }
        const std::string what = "balance_update n " + std::to_string(n) + " step " +
                                 std::to_string(step) + (empty ? " empty" : "");
        expect_update(b0, bias, 2, what + " bias");
        expect_update(m0, m, 2, what + " m", e);
        expect_update(v0, v, 2, what + " v", e2);
      }
}
