// quant/dot.h: every SIMD ISA against the scalar reference, bit for bit — the activation
// quantization (values, scales, 32-sums) and the dot products of every block type on random
// blocks (random bytes: every value, scale and min pattern, including GGML's extremes such as
// Q8_0's −128 and Q6_K's scale −128), odd numbers of blocks, every tile shape R × C, and
// activations at the quantizer's edges (all ±max, zeros, one huge value). The AVX-512 VNNI kernels
// run only on a CPU with AVX-512 VNNI; elsewhere those cases skip ("the CPU lacks …") and the AVX2
// ones still run. The reference itself is checked against the dequantized values in
// tests/ops/cpu/test_linear_quant.cpp.
#include "quant/dot.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "test_skips.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::quant;

namespace {

const DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q5_0,  DType::Q4_K,
                        DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

// Random blocks: random bytes with finite f16 scales (random sign and magnitude), so the values
// and the integer parts take every pattern while the float results stay finite.
std::vector<uint8_t> random_rows(DType t, int64_t rows, int64_t I, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t bytes = dtype_block_bytes(t);
  std::vector<uint8_t> out(size_t(rows) * dtype_bytes(t, I));
  for (auto& b : out) b = uint8_t(rng());
  std::uniform_real_distribution<float> mag(1e-4f, 1e-1f);
  auto scale = [&](uint8_t* p) {
    const uint16_t h = f32_to_f16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
    std::memcpy(p, &h, 2);
  };
  for (size_t o = 0; o < out.size(); o += bytes) {
    uint8_t* blk = out.data() + o;
    if (t == DType::Q6_K) {
      scale(blk + 208);
    } else {
      scale(blk);
      if (t == DType::Q4_K || t == DType::Q5_K) scale(blk + 2);
    }
  }
  return out;
}

// Activation rows: normal values, and blocks at the quantizer's edges.
std::vector<float> activations(int64_t C, int64_t I, uint64_t seed) {
  std::vector<float> x = test::randn<float>(size_t(C * I), seed);
  for (int64_t c = 0; c < C; ++c) {
    float* row = x.data() + c * I;
    switch (c % 4) {
      case 1:  // every value ±max: q = ±127 everywhere
        for (int64_t j = 0; j < I; ++j) row[j] = (j % 3 ? 2.5f : -2.5f);
        break;
      case 2:  // a zero block and a block dominated by one value
        for (int64_t j = 0; j < std::min<int64_t>(I, 32); ++j) row[j] = 0.0f;
        row[I - 1] = 1e6f;
        break;
      case 3:  // a block of tiny values (127 / max|x| overflows: zeros) and one just above
        for (int64_t j = 0; j < std::min<int64_t>(I, 32); ++j) row[j] = 1e-38f * float(j % 5);
        if (I > 256)
          for (int64_t j = 256; j < 288; ++j) row[j] = 2e-30f * float(j % 3) - 1e-30f;
        break;
      default:
        break;
    }
  }
  return x;
}

struct Acts {
  size_t stride;
  std::vector<uint8_t> bytes;
};
Acts quantize_rows(const DotKernels& k, DType t, const std::vector<float>& x, int64_t C,
                   int64_t I) {
  Acts a{act_row_bytes(t, I), {}};
  a.bytes.assign(a.stride * size_t(C), 0);
  for (int64_t c = 0; c < C; ++c) k.quantize(x.data() + c * I, a.bytes.data() + c * a.stride, I);
  return a;
}

// ISA `isa` against the scalar reference on one type, every tile shape.
void check_isa(Isa isa) {
  for (DType t : kTypes)
    for (int64_t nb : {1, 3, 7, 9}) {
      const int64_t I = nb * dtype_block_elems(t), C = kMaxCols, R = kMaxRows;
      const std::string what = std::string(dtype_name(t)) + " I" + std::to_string(I);
      const auto w = random_rows(t, R, I, uint64_t(nb * 31 + int(t)));
      const size_t ws = dtype_bytes(t, I);
      const auto x = activations(C, I, uint64_t(nb * 7 + int(t)));
      const DotKernels& ref = dot_kernels(t, Isa::Scalar);
      const DotKernels& simd = dot_kernels(t, isa);
      const Acts aref = quantize_rows(ref, t, x, C, I), asimd = quantize_rows(simd, t, x, C, I);
      ASSERT_EQ(aref.bytes, asimd.bytes) << what << ": quantized activations";
      for (int r = 1; r <= R; ++r)
        for (int c = 1; c <= C; ++c) {
          std::vector<float> want(size_t(C * R), -1.0f), got(size_t(C * R), -1.0f);
          ref.dot(w.data(), ws, r, aref.bytes.data(), aref.stride, c, I, want.data(), R);
          simd.dot(w.data(), ws, r, aref.bytes.data(), aref.stride, c, I, got.data(), R);
          for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(std::isfinite(want[i])) << what;
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
              << what << " R" << r << " C" << c << ": first " << want[0] << " vs " << got[0];
        }
    }
}

}  // namespace

TEST(QuantDot, Avx2MatchesScalarBits) {
  if (!isa_supported(Isa::Avx2)) ZAYA_SKIP(NoCpuFeature) << "AVX2, FMA or F16C";
  check_isa(Isa::Avx2);
}

// Compiled into every x86-64 build; runs only where the CPU has AVX-512 VNNI (AVX512F/VL/BW).
TEST(QuantDot, Avx512VnniMatchesScalarBits) {
  if (!isa_supported(Isa::Avx512Vnni)) ZAYA_SKIP(NoCpuFeature) << "AVX-512 VNNI";
  check_isa(Isa::Avx512Vnni);
}

// The activation scales enter as dot.h says, once per block: doubling every block's d doubles the
// dot exactly (a power of two scales every f32 product and sum exactly).
TEST(QuantDot, ScaleOfActivationsScalesTheDotExactly) {
  for (DType t : kTypes) {
    const int64_t I = 3 * dtype_block_elems(t);
    const auto w = random_rows(t, 1, I, 5);
    const auto x = test::randn<float>(size_t(I), 6);
    const DotKernels& k = dot_kernels(t);
    std::vector<uint8_t> a(act_row_bytes(t, I));
    k.quantize(x.data(), a.data(), I);
    float one, two;
    k.dot(w.data(), 0, 1, a.data(), 0, 1, I, &one, 1);
    float* d = const_cast<float*>(act_row(t, a.data(), I).d);
    for (int64_t b = 0; b < I / act_block(t); ++b) d[b] *= 2.0f;  // exact: a power of two
    k.dot(w.data(), 0, 1, a.data(), 0, 1, I, &two, 1);
    EXPECT_EQ(2.0f * one, two) << dtype_name(t);
  }
}

// A NaN or infinite activation makes its block's scale NaN: the outputs are NaN, not finite
// garbage, on every ISA.
TEST(QuantDot, NonFiniteActivationsGiveNaN) {
  for (DType t : kTypes)
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni}) {
      if (!isa_supported(isa)) continue;
      const int64_t I = 2 * dtype_block_elems(t);
      const auto w = random_rows(t, 1, I, 9);
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
        auto x = test::randn<float>(size_t(I), 10);
        x[size_t(I) - 3] = bad;
        const DotKernels& k = dot_kernels(t, isa);
        std::vector<uint8_t> a(act_row_bytes(t, I));
        k.quantize(x.data(), a.data(), I);
        float y = 0;
        k.dot(w.data(), 0, 1, a.data(), 0, 1, I, &y, 1);
        EXPECT_TRUE(std::isnan(y)) << dtype_name(t) << " " << isa_name(isa) << " " << bad;
      }
    }
}

// The quantizer as dot.h defines it: d = max|x| / 127, q = round(x · 127 / max|x|) to nearest even
// (the scalar reference; the SIMD quantizers are compared with it above).
TEST(QuantDot, ActivationQuantizerFollowsTheDefinition) {
  const int64_t I = 256;
  for (DType t : {DType::Q8_0, DType::Q4_K}) {
    auto x = test::randn<float>(size_t(I), 12);
    const DotKernels& k = dot_kernels(t, Isa::Scalar);
    std::vector<uint8_t> a(act_row_bytes(t, I));
    k.quantize(x.data(), a.data(), I);
    const ActRow row = act_row(t, a.data(), I);
    const int64_t B = act_block(t);
    for (int64_t b = 0; b < I / B; ++b) {
      float amax = 0;
      for (int64_t j = 0; j < B; ++j) amax = std::max(amax, std::fabs(x[size_t(b * B + j)]));
      EXPECT_EQ(row.d[b], amax / 127.0f);
      for (int64_t j = 0; j < B; ++j) {
        const double exact = double(x[size_t(b * B + j)]) * 127.0 / amax;
        EXPECT_LE(std::fabs(row.q[b * B + j] - exact), 0.5 + 1e-4) << b << " " << j;
      }
    }
    if (t == DType::Q4_K)
      for (int64_t g = 0; g < I / 32; ++g) {
        int s = 0;
        for (int j = 0; j < 32; ++j) s += row.q[g * 32 + j];
        EXPECT_EQ(row.sum32[g], s);
      }
  }
}
