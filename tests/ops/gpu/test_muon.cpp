// Muon's Newton–Schulz on the GPU beyond tests/ops/gpu/test_optim_update.cpp: the symmetric building blocks of
// ops/gpu/syrk.h against a double reference (syrk_upper's block rows, F32 and BF16 operands, P
// given as is or transposed, beta 0 on a NaN C and beta 1, several block heights; sym_fill's
// mirror, affine and BF16 outputs, exactly symmetric), BF16 Newton–Schulz against the CPU's F32
// one (tolerance below), and the batched [E,rows,cols] form against E separate calls (bit for bit)
// and the CPU.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"

#if defined(ZAYA_HAS_GPU_BACKEND)
#include "ops/gpu/syrk.h"
#endif

using namespace zaya;
using namespace zaya::test;

namespace {

std::string shape(int64_t e, int64_t r, int64_t c) {
  return (e ? std::to_string(e) + "x" : "") + std::to_string(r) + "x" + std::to_string(c);
}

// ‖gpu − cpu‖_F / ‖cpu‖_F.
double relative_error(const DevicePair& p) {
  const std::vector<double> a = p.gpu_values(), b = p.cpu_values();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

#if defined(ZAYA_HAS_GPU_BACKEND)

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// syrk_upper then sym_fill on P [n,k] (stored [k,n] when transposed) against double sums.
void check_syrk(int64_t n, int64_t k, bool transposed, DType dt, float beta, int64_t block,
                uint64_t seed) {
  const std::string what = "syrk n " + std::to_string(n) + " k " + std::to_string(k) +
                           (transposed ? " T" : "") + " " + std::string(dtype_name(dt)) + " beta " +
                           std::to_string(beta) + " block " + std::to_string(block);
  DevicePair x = transposed ? random_pair(dt, {k, n}, seed) : random_pair(dt, {n, k}, seed);
  const std::vector<double> xv = x.cpu_values();
  auto p = [&](int64_t i, int64_t q) {
    return transposed ? xv[size_t(q * n + i)] : xv[size_t(i * k + q)];
  };
  DevicePair c(DType::F32, {n, n});
  float* hc = c.cpu.ptr<float>();
  for (int64_t i = 0; i < n; ++i)  // a symmetric C0 (beta 1) or NaN (beta 0: must not be read)
    for (int64_t j = 0; j < n; ++j)
      hc[i * n + j] = beta == 0 ? kNaN : float(std::min(i, j) - 2 * std::max(i, j)) / 8;
  c.upload();
  const float alpha = 0.75f;
  gpu::syrk_upper(n, k, alpha, {x.gpu.data, dt, transposed ? n : k, transposed}, beta,
                  c.gpu.ptr<float>(), n, block);
  std::vector<double> ref(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q) s += p(i, q) * p(j, q);
      ref[size_t(i * n + j)] = alpha * s + (beta != 0 ? beta * hc[i * n + j] : 0.0);
    }
  // Block rows: C[i, j] for j ≥ the start of i's block row is computed; the rest left alone.
  const std::vector<double> got = c.gpu_values();
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = size_t(i * n + j);
      if (j >= i / block * block) {
        num += (got[at] - ref[at]) * (got[at] - ref[at]), den += ref[at] * ref[at];
      } else if (!(got[at] == double(hc[at]) || (std::isnan(got[at]) && beta == 0))) {
        ADD_FAILURE() << what << ": wrote below the block diagonal at " << i << "," << j;
        return;
      }
    }
  EXPECT_LE(num / std::max(den, 1e-300), kGpuF32Nmse) << what;

  // sym_fill from the upper triangle: the mirror in place, the affine copy and the BF16 copy.
  DevicePair affine(DType::F32, {n, n}), rounded(DType::BF16, {n, n});
  gpu::sym_fill(
      c.gpu.ptr<float>(), n,
      {c.gpu.ptr<float>(), affine.gpu.ptr<float>(), -4.5f, 3.25f, rounded.gpu.ptr<uint16_t>()});
  const std::vector<double> full = c.gpu_values(), aff = affine.gpu_values(),
                            r16 = rounded.gpu_values();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = size_t(i * n + j), up = size_t(std::min(i, j) * n + std::max(i, j));
      const double v = got[up];  // the upper triangle as syrk_upper left it
      const double want_aff = double(-4.5f * float(v) + (i == j ? 3.25f : 0.0f));
      if (full[at] != v || aff[at] != want_aff ||
          r16[at] != double(bf16_to_f32(f32_to_bf16(float(v))))) {
        ADD_FAILURE() << what << ": sym_fill at " << i << "," << j << ": full " << full[at]
                      << " affine " << aff[at] << " bf16 " << r16[at] << " from " << v;
        return;
      }
    }
}

}  // namespace

TEST(GpuMuon, SyrkUpperBlockRowsAndSymFill) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 700;
  for (int64_t n : {1, 7, 33, 130})
    for (int64_t k : {1, 33, 257})
      for (bool transposed : {false, true})
        for (float beta : {0.0f, 1.0f})
          for (int64_t block : {int64_t(32), int64_t(50), gpu::syrk_block(n)})
            check_syrk(n, k, transposed, DType::F32, beta, block, ++seed);
  check_syrk(77, 40, false, DType::BF16, 0.0f, 32, ++seed);
  check_syrk(77, 40, true, DType::BF16, 1.0f, 24, ++seed);
}

TEST(GpuMuon, SyrkBlockRule) {
  ZAYA_REQUIRE_GPU();
  EXPECT_EQ(gpu::syrk_block(1), 1);
  EXPECT_EQ(gpu::syrk_block(256), 256);   // one call
  EXPECT_EQ(gpu::syrk_block(300), 256);   // two block rows
  EXPECT_EQ(gpu::syrk_block(2048), 256);  // eight
  EXPECT_EQ(gpu::syrk_block(4096), 512);  // eight
  EXPECT_EQ(gpu::syrk_block(5000), 640);  // ⌈5000/8⌉ = 625 → a multiple of 128
}

#endif

// BF16 operands against the F32 CPU result. BF16 keeps 8 significant bits: rounding to it is a
// relative error of at most u = 2^-8 (RMS u/√3). Each step rounds its three operands (X, A, B)
// once, ≈ u RMS together; later steps carry the earlier errors on, and the quintic's slope (a
// = 3.4445 for small singular values) amplifies those in the directions it is still pulling up, so
// the error grows faster than linearly: a host emulation of exactly this rounding (F32 products of
// BF16-rounded operands, 5 steps) gave 3.2u–7.7u on 7x33 … 300x260 (the smaller the short side,
// the larger). The tolerance, relative Frobenius error ≤ 2 · steps · u (5 steps: 10u = 0.039),
// leaves ≥ 1.3x over the worst seen; and the error must be above F32's (BF16 really used).
constexpr double kBf16NsTolPerStep = 2.0 / 256;

TEST(GpuMuon, NewtonSchulzBf16WithinBf16Tolerance) {
  ZAYA_REQUIRE_GPU();
  struct Case {
    int64_t r, c;
    bool symmetric;
  };
  uint64_t seed = 800;
  for (const Case& k : {Case{7, 33, true}, Case{33, 7, false}, Case{64, 96, true},
                        Case{96, 64, true}, Case{96, 64, false}, Case{300, 260, true}}) {
    const int steps = 5;
    DevicePair g = random_pair(DType::F32, {k.r, k.c}, ++seed);
    DevicePair out(DType::F32, {k.r, k.c});
    ops::newton_schulz(out.cpu, g.cpu, steps, k.symmetric);
    ops::newton_schulz(out.gpu, g.gpu, steps, k.symmetric, /*bf16=*/true);
    const double err = relative_error(out), tol = steps * kBf16NsTolPerStep;
    EXPECT_LE(err, tol) << "bf16 newton_schulz " << shape(0, k.r, k.c)
                        << (k.symmetric ? " sym" : " gemm");
    // And not F32 in disguise: BF16 operands must move the result off the F32 one.
    EXPECT_GT(err, 1e-5) << "bf16 newton_schulz " << shape(0, k.r, k.c);
  }
}

// [E,rows,cols] in one call: the same bits as E calls on the slices, and the CPU's result.
TEST(GpuMuon, NewtonSchulzBatchedAsSeparateCalls) {
  ZAYA_REQUIRE_GPU();
  struct Case {
    int64_t e, r, c;
    int steps;
    bool symmetric, bf16;
  };
  uint64_t seed = 900;
  for (const Case& k : {Case{3, 40, 70, 5, true, false}, Case{3, 70, 40, 5, true, false},
                        Case{2, 33, 31, 5, false, false}, Case{2, 40, 70, 5, true, true},
                        Case{4, 9, 5, 0, true, false}, Case{2, 260, 270, 2, true, false}}) {
    const std::string what = "batched newton_schulz " + shape(k.e, k.r, k.c) + " steps " +
                             std::to_string(k.steps) + (k.bf16 ? " bf16" : "");
    DevicePair g = random_pair(DType::F32, {k.e, k.r, k.c}, ++seed);
    DevicePair out(DType::F32, {k.e, k.r, k.c}), each(DType::F32, {k.e, k.r, k.c});
    ops::newton_schulz(out.cpu, g.cpu, k.steps, k.symmetric);
    ops::newton_schulz(out.gpu, g.gpu, k.steps, k.symmetric, k.bf16);
    const int64_t n = k.r * k.c;
    for (int64_t e = 0; e < k.e; ++e) {
      auto slice = [&](const Tensor& t) {
        return Tensor(t.ptr<float>() + e * n, {k.r, k.c}).on(Device::Gpu);
      };
      ops::newton_schulz(slice(each.gpu), slice(g.gpu), k.steps, k.symmetric, k.bf16);
    }
    const std::vector<double> a = out.gpu_values(), b = each.gpu_values();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        ADD_FAILURE() << what << ": element " << i << " batched " << a[i] << " separate " << b[i];
        break;
      }
    if (k.bf16)
      EXPECT_LE(relative_error(out), k.steps * kBf16NsTolPerStep) << what;
    else
      expect_nmse(out, kGpuF32Nmse, what.c_str());
  }
}

// A short side of 600: syrk_block gives three block rows (256, 256, 88), so the symmetric
// products' triangle, its ragged last block row and sym_fill's mirror all run (the direct tests
// above need a GPU build; the emulator runs this one).
TEST(GpuMuon, NewtonSchulzThreeBlockRows) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const bool tall : {false, true}) {
    const int64_t r = tall ? 640 : 600, c = tall ? 600 : 640;
    DevicePair g = random_pair(DType::F32, {r, c}, ++seed);
    DevicePair out(DType::F32, {r, c}), out16(DType::F32, {r, c});
    ops::newton_schulz(out.cpu, g.cpu, 5, true);
    out16.cpu = out.cpu;
    ops::newton_schulz(out.gpu, g.gpu, 5, true);
    expect_nmse(out, kGpuF32Nmse, tall ? "newton_schulz 640x600 sym" : "newton_schulz 600x640 sym");
    if (tall) continue;
    ops::newton_schulz(out16.gpu, g.gpu, 5, true, /*bf16=*/true);
    EXPECT_LE(relative_error(out16), 5 * kBf16NsTolPerStep) << "bf16 newton_schulz 600x640";
  }
}
