// The block formats (src/quant/formats.cpp):
//  - dequantizing hand-built blocks against the layout formulas of docs/quantization.md, written
//    here again per value index and evaluated in double;
//  - quantize → dequantize error per type and input kind, each against a stated bound;
//  - bit compatibility with GGML: tests/fixtures/quant/ggml_blocks.bin (made once by
//    scripts/reference/ggml_blocks/make.sh from GGML's own quantizers and dequantizers) must
//    dequantize here to GGML's floats bit for bit, and our quantizer's error on its input must be
//    at most 1.02 times GGML's;
//  - quantize_matrix: the bits of quantize_row, whatever the thread count; the errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "quant/blocks.h"
#include "quant/formats.h"
#include "test_util.h"

namespace zaya::quant {
namespace {

using test::error_of;
using test::expect_contains;

const DType kBlockTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q5_0,  DType::Q4_K,
                             DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                              DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

std::string name(DType t) {
  return std::string(dtype_name(t));
}

// ---- the layout formulas, per value, in double -------------------------------------------------

double h2d(uint16_t h) {
  return double(f16_to_f32(h));
}

// Value i (0 ≤ i < the block's size) of the block at p.
double ref_value(DType t, const uint8_t* p, int i) {
  auto u16 = [&](int off) { return uint16_t(p[off] | (p[off + 1] << 8)); };
  switch (t) {
    case DType::Q8_0:  // f16 d · i8 qs[32]
      return h2d(u16(0)) * double(int8_t(p[2 + i]));
    case DType::Q4_0: {  // f16 d · u8 qs[16]: value i is nibble i / 16 of byte i % 16
      const int q = (p[2 + i % 16] >> (4 * (i / 16))) & 15;
      return h2d(u16(0)) * double(q - 8);
    }
    case DType::Q5_0: {  // f16 d · u32 qh · u8 qs[16]: bit i of qh is the fifth bit of value i
      const uint32_t qh =
          uint32_t(p[2]) | uint32_t(p[3]) << 8 | uint32_t(p[4]) << 16 | uint32_t(p[5]) << 24;
      const int q = ((p[6 + i % 16] >> (4 * (i / 16))) & 15) | int((qh >> i) & 1) << 4;
      return h2d(u16(0)) * double(q - 16);
    }
    case DType::Q4_K:
    case DType::Q5_K: {  // f16 d · f16 dmin · u8 scales[12] · (Q5_K: u8 qh[32]) · u8 qs[128]
      const uint8_t* sc = p + 4;
      const int chunk = i / 64, upper = (i % 64) / 32, l = i % 32, sub = i / 32;
      const uint8_t* qs = p + (t == DType::Q4_K ? 16 : 48);
      int q = (qs[32 * chunk + l] >> (4 * upper)) & 15;
      if (t == DType::Q5_K) q += ((p[16 + l] >> sub) & 1) * 16;
      int s, m;
      if (sub < 4) {
        s = sc[sub] & 63;
        m = sc[sub + 4] & 63;
      } else {
        s = (sc[sub + 4] & 15) | (sc[sub - 4] >> 6) << 4;
        m = (sc[sub + 4] >> 4) | (sc[sub] >> 6) << 4;
      }
      return h2d(u16(0)) * s * q - h2d(u16(2)) * m;
    }
    case DType::Q6_K: {  // u8 ql[128] · u8 qh[64] · i8 scales[16] · f16 d
      const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
      const int lo = (p[64 * half + l + 32 * (quarter & 1)] >> (4 * (quarter >> 1))) & 15;
      const int hi = (p[128 + 32 * half + l] >> (2 * quarter)) & 3;
      const int s = int8_t(p[192 + 8 * half + 2 * quarter + l / 16]);
      return h2d(u16(208)) * s * ((lo | hi << 4) - 32);
    }
    case DType::IQ4_XS: {  // f16 d · u16 scales_h · u8 scales_l[4] · u8 qs[128]
      const int sub = i / 32, r = i % 32;
      const int ls = ((p[4 + sub / 2] >> (4 * (sub % 2))) & 15) | ((u16(2) >> (2 * sub)) & 3) << 4;
      const int q = (p[8 + 16 * sub + r % 16] >> (4 * (r / 16))) & 15;
      return h2d(u16(0)) * (ls - 32) * kIQ4NL[q];
    }
    default:
      return 0;
  }
}

// Offsets of a block's f16 scales (filled with finite values when building random blocks).
std::vector<int> half_offsets(DType t) {
  switch (t) {
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q6_K:
      return {208};
    default:
      return {0};
  }
}

TEST(Dequantize, RandomBlocksFollowTheLayout) {
  CounterRng rng{0x51, 0};
  uint64_t ctr = 0;
  for (DType t : kBlockTypes) {
    const int be = int(dtype_block_elems(t));
    const size_t bb = dtype_block_bytes(t);
    const int nblocks = 64;
    std::vector<uint8_t> bytes(bb * nblocks);
    for (auto& b : bytes) b = uint8_t(rng.uniform(ctr++) * 256);
    for (int b = 0; b < nblocks; ++b) {
      for (int off : half_offsets(t)) {
        // A finite scale over a wide range of magnitudes (including f16 subnormals), either sign.
        const double frac = 0.5 + rng.uniform(ctr++);
        const int exp2 = int(rng.uniform(ctr++) * 40) - 26;
        const double mag = std::ldexp(frac, exp2);
        const uint16_t h = f32_to_f16(float(rng.uniform(ctr++) < 0.5 ? -mag : mag));
        bytes[bb * b + off] = uint8_t(h);
        bytes[bb * b + off + 1] = uint8_t(h >> 8);
      }
    }
    std::vector<float> y(size_t(be) * nblocks);
    dequantize_row(t, bytes.data(), y.data(), int64_t(y.size()));
    // Every product of the layouts is exact in f32 (24 significant bits at most); only Q4_K's and
    // Q5_K's subtraction rounds, once: the value is the double result within half an ulp.
    const bool one_rounding = t == DType::Q4_K || t == DType::Q5_K;
    int bad = 0;
    for (int b = 0; b < nblocks; ++b) {
      for (int i = 0; i < be; ++i) {
        const double want = ref_value(t, bytes.data() + bb * b, i);
        const double got = y[size_t(b) * be + i];
        const bool ok =
            one_rounding ? std::fabs(got - want) <= std::ldexp(std::fabs(want), -24) : got == want;
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << name(t) << " block " << b << " value " << i << ": got " << got
                        << " want " << want;
      }
    }
  }
}

// Hand-written blocks whose values are known without the formulas.
TEST(Dequantize, HandBuiltBlocks) {
  {  // Q8_0: d = 0.5, qs = j − 16
    BlockQ8_0 b{};
    b.d = f32_to_f16(0.5f);
    for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(j - 16);
    float y[32];
    dequantize_row(DType::Q8_0, &b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * float(j - 16)) << j;
  }
  {  // Q4_0: byte j = (j low, 15 − j high), d = −2
    BlockQ4_0 b{};
    b.d = f32_to_f16(-2.0f);
    for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | (15 - j) << 4);
    float y[32];
    dequantize_row(DType::Q4_0, &b, y, 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], -2.0f * float(j - 8)) << j;
      EXPECT_EQ(y[j + 16], -2.0f * float(7 - j)) << j;
    }
  }
  {  // Q5_0: all nibbles 0, fifth bit set for odd values: −16 or 0 times d = 0.25
    BlockQ5_0 b{};
    b.d = f32_to_f16(0.25f);
    const uint32_t qh = 0xaaaaaaaau;
    std::memcpy(b.qh, &qh, 4);
    float y[32];
    dequantize_row(DType::Q5_0, &b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], j % 2 ? 0.0f : -4.0f) << j;
  }
  {  // Q4_K: sub-block s has scale s + 1 and min s (6-bit packing of scales[12]); all q = 3
    BlockQ4_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.5f);
    // Sub-blocks 0-3: low 6 bits of scales[s] and scales[s + 4]; 4-7: nibbles of scales[s + 4]
    // and the top two bits in scales[s − 4] / scales[s]. Scales 1..8 and mins 0..7 need no top
    // bits.
    for (int s = 0; s < 4; ++s) {
      b.scales[s] = uint8_t(s + 1);
      b.scales[s + 4] = uint8_t(s);
    }
    for (int s = 4; s < 8; ++s) b.scales[s + 4] = uint8_t((s + 1) | s << 4);
    std::memset(b.qs, 0x33, sizeof b.qs);
    float y[256];
    dequantize_row(DType::Q4_K, &b, y, 256);
    for (int i = 0; i < 256; ++i)
      EXPECT_EQ(y[i], float(3 * (i / 32 + 1)) - 0.5f * float(i / 32)) << i;
  }
  {  // Q6_K: d = 1, scale of sub-block s = s − 8, every value's 6 bits = 33 → q = 1
    BlockQ6_K b{};
    b.d = f32_to_f16(1.0f);
    std::memset(b.ql, 0x11, sizeof b.ql);  // low nibbles 1
    std::memset(b.qh, 0xaa, sizeof b.qh);  // high bits 2 → 1 | 2 << 4 = 33
    for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(s - 8);
    float y[256];
    dequantize_row(DType::Q6_K, &b, y, 256);
    for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], float(i / 16 - 8)) << i;
  }
  {  // IQ4_XS: sub-block s has ls = 32 + s (dl = s·d), q = 8 (table value 1) and 15 (113)
    BlockIQ4_XS b{};
    b.d = f32_to_f16(0.5f);
    for (int s = 0; s < 8; ++s) {
      const int ls = 32 + s;
      b.scales_l[s / 2] |= uint8_t((ls & 15) << (4 * (s % 2)));
      b.scales_h |= uint16_t((ls >> 4) << (2 * s));
    }
    std::memset(b.qs, 0xf8, sizeof b.qs);
    float y[256];
    dequantize_row(DType::IQ4_XS, &b, y, 256);
    for (int i = 0; i < 256; ++i)
      EXPECT_EQ(y[i], 0.5f * float(i / 32) * float(i % 32 < 16 ? 1 : 113)) << i;
  }
}

TEST(Dequantize, ElementTypes) {
  const uint16_t halves[] = {0x0000, 0x8000, 0x3c00, 0xc000, 0x0001, 0x7bff, 0x3555};
  for (uint16_t h : halves) {
    float y;
    dequantize_row(DType::F16, &h, &y, 1);
    EXPECT_EQ(y, f16_to_f32(h));
    dequantize_row(DType::BF16, &h, &y, 1);
    uint32_t u;
    std::memcpy(&u, &y, 4);
    EXPECT_EQ(u, uint32_t(h) << 16);
  }
}

// ---- quantize → dequantize ---------------------------------------------------------------------

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = double(x[i]) - double(y[i]);
    num += d * d;
    den += double(x[i]) * double(x[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<float> round_trip(DType t, const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(dtype_bytes(t, rows * cols));
  quantize_matrix(t, x.data(), q.data(), rows, cols);
  std::vector<float> y(x.size());
  dequantize_matrix(t, q.data(), y.data(), rows, cols);
  return y;
}

enum class Kind { Gaussian, Uniform, Outliers };

std::vector<float> make_input(Kind k, size_t n, uint64_t seed) {
  CounterRng rng{seed, 0};
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (k) {
      case Kind::Gaussian:
        x[i] = float(0.02 * rng.normal(i));
        break;
      case Kind::Uniform:
        x[i] = float(0.05 * (2 * rng.uniform(i) - 1) + 0.01);
        break;
      case Kind::Outliers:  // gaussian, 1 in 64 values 30 times larger
        x[i] = float(0.02 * rng.normal(i) * (i % 64 == 17 ? 30 : 1));
        break;
    }
  }
  return x;
}

// Bounds on the relative RMS error (‖x − y‖ / ‖x‖) of quantize → dequantize, per type and input
// kind. About 1.3 times what the quantizers give (the test prints the figures); a level step of b
// bits over a block's range gives roughly 2^-b of the values' RMS.
struct Bound {
  DType t;
  double gaussian, uniform, outliers;
};
const Bound kBounds[] = {
    {DType::F32, 0, 0, 0},
    {DType::F16, 3e-4, 3e-4, 3e-4},
    {DType::BF16, 2.5e-3, 2.5e-3, 2.5e-3},
    {DType::Q8_0, 7e-3, 5.5e-3, 1.6e-2},
    {DType::Q4_0, 0.11, 0.08, 0.16},
    {DType::Q5_0, 0.055, 0.04, 0.11},
    {DType::Q4_K, 0.09, 0.065, 0.11},
    {DType::Q5_K, 0.046, 0.033, 0.064},
    {DType::Q6_K, 0.023, 0.019, 0.041},
    {DType::IQ4_XS, 0.10, 0.085, 0.145},
};

// Three rows (odd) of three super-blocks each (24 blocks of 32).
constexpr int64_t kRows = 3, kCols = 768;

TEST(RoundTrip, ErrorWithinBounds) {
  const Kind kinds[] = {Kind::Gaussian, Kind::Uniform, Kind::Outliers};
  const char* kind_names[] = {"gaussian", "uniform", "outliers"};
  for (const Bound& b : kBounds) {
    for (int k = 0; k < 3; ++k) {
      const auto x = make_input(kinds[k], kRows * kCols, 100 + k);
      const auto y = round_trip(b.t, x, kRows, kCols);
      const double err = rel_rms(x, y);
      const double bound = k == 0 ? b.gaussian : k == 1 ? b.uniform : b.outliers;
      std::printf("  %-7s %-9s relative RMS error %.3e (bound %.1e)\n", name(b.t).c_str(),
                  kind_names[k], err, bound);
      EXPECT_LE(err, bound) << name(b.t) << " " << kind_names[k];
    }
  }
}

TEST(RoundTrip, AllZeroIsExact) {
  const std::vector<float> x(kRows * kCols, 0.0f);
  for (DType t : kWeightTypes) {
    const auto y = round_trip(t, x, kRows, kCols);
    for (float v : y) ASSERT_EQ(v, 0.0f) << name(t);
  }
}

// A constant row: every type holds it within its scale's f16 rounding (a K type's 6-bit scale
// multiplies the f16 one: 2^-11 · a little more).
TEST(RoundTrip, Constant) {
  for (float c : {0.37f, -1.25f}) {
    const std::vector<float> x(kRows * kCols, c);
    for (DType t : kWeightTypes) {
      const auto y = round_trip(t, x, kRows, kCols);
      const double err = rel_rms(x, y);
      const double bound = t == DType::BF16 ? 4e-3 : 1.5e-3;
      std::printf("  %-7s constant %5.2f relative RMS error %.3e (bound %.1e)\n", name(t).c_str(),
                  double(c), err, bound);
      EXPECT_LE(err, bound) << name(t) << " " << c;
    }
  }
}

// Values of 1e-30: below an f16 scale's resolution (and F16's), so the block types and F16 read
// back zeros (error 1, never more, nothing non-finite); BF16 and F32 hold them.
TEST(RoundTrip, Tiny) {
  auto x = make_input(Kind::Gaussian, kRows * kCols, 7);
  for (float& v : x) v *= 5e-29f;  // about 1e-30
  for (DType t : kWeightTypes) {
    const auto y = round_trip(t, x, kRows, kCols);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << name(t);
    const double err = rel_rms(x, y);
    const double bound = t == DType::F32 ? 0 : t == DType::BF16 ? 3e-3 : 1.0;
    std::printf("  %-7s tiny relative RMS error %.3e (bound %.1e)\n", name(t).c_str(), err, bound);
    EXPECT_LE(err, bound) << name(t);
  }
}

// Values of 1e30: F32 and BF16 hold them; the others cannot (an f16 scale or value overflows)
// and say so, naming the first such value's index.
TEST(RoundTrip, Huge) {
  auto x = make_input(Kind::Gaussian, kRows * kCols, 8);
  for (float& v : x) v *= 5e31f;  // about 1e30
  for (DType t : kWeightTypes) {
    if (t == DType::F32 || t == DType::BF16) {
      const auto y = round_trip(t, x, kRows, kCols);
      EXPECT_LE(rel_rms(x, y), t == DType::F32 ? 0 : 3e-3) << name(t);
      continue;
    }
    std::vector<uint8_t> q(dtype_bytes(t, kCols));
    const std::string msg = error_of([&] { quantize_row(t, x.data(), q.data(), kCols); });
    expect_contains(msg, "at index 0 ");
    expect_contains(msg, "too large for " + name(t));
  }
}

// The largest magnitude of each block type: an f16 scale's 65504 times the largest level and
// sub-block scale (Q4_K, Q5_K: the largest min). Values up to 0.4 of it quantize as well as small
// ones; values above it are refused.
double largest(DType t) {
  switch (t) {
    case DType::Q8_0:
      return 65504.0 * 127;
    case DType::Q4_0:
      return 65504.0 * 8;
    case DType::Q5_0:
      return 65504.0 * 16;
    case DType::Q4_K:
    case DType::Q5_K:
      return 65504.0 * 63;  // the min of a negative value: dmin·m
    case DType::Q6_K:
      return 65504.0 * 128 * 32;
    case DType::IQ4_XS:
      return 65504.0 * 32 * 127;
    default:
      return 0;
  }
}

TEST(RoundTrip, LargeValuesWithinTheRange) {
  const auto g = make_input(Kind::Gaussian, kRows * kCols, 12);
  float amax = 0;
  for (float v : g) amax = std::max(amax, std::fabs(v));
  for (const Bound& b : kBounds) {
    if (!dtype_is_quantized(b.t)) continue;
    auto x = g;
    for (float& v : x) v = float(double(v) / amax * 0.4 * largest(b.t));
    const double err = rel_rms(x, round_trip(b.t, x, kRows, kCols));
    EXPECT_LE(err, b.gaussian) << name(b.t);
    x[5] = float(1.01 * largest(b.t));
    std::vector<uint8_t> q(dtype_bytes(b.t, kCols));
    const std::string msg = error_of([&] { quantize_row(b.t, x.data(), q.data(), kCols); });
    expect_contains(msg, "at index 5 ");
    expect_contains(msg, "too large for " + name(b.t));
  }
}

TEST(Quantize, NonFiniteValuesNameTheirIndex) {
  for (DType t : kWeightTypes) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      auto x = make_input(Kind::Gaussian, kCols, 9);
      x[300] = bad;
      std::vector<uint8_t> q(dtype_bytes(t, kCols));
      expect_contains(error_of([&] { quantize_row(t, x.data(), q.data(), kCols); }),
                      "non-finite value at index 300");
    }
  }
}

TEST(Quantize, MatrixErrorsNameTheFirstBadRow) {
  auto x = make_input(Kind::Gaussian, 5 * 256, 10);
  x[3 * 256 + 4] = std::numeric_limits<float>::quiet_NaN();
  x[4 * 256 + 1] = std::numeric_limits<float>::infinity();
  for (DType t : kWeightTypes) {
    std::vector<uint8_t> q(dtype_bytes(t, 5 * 256));
    const std::string msg = error_of([&] { quantize_matrix(t, x.data(), q.data(), 5, 256); });
    expect_contains(msg, "non-finite value at index " + std::to_string(3 * 256 + 4));
    expect_contains(msg, "row 3");
  }
}

TEST(Quantize, RowsThatAreNotWholeBlocks) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> q(4096);
  expect_contains(error_of([&] { quantize_row(DType::Q4_K, x.data(), q.data(), 300); }), "256");
  expect_contains(error_of([&] { quantize_row(DType::Q8_0, x.data(), q.data(), 33); }), "32");
  std::vector<float> y(300);
  expect_contains(error_of([&] { dequantize_row(DType::Q6_K, q.data(), y.data(), 100); }), "Q6_K");
  expect_contains(error_of([&] { quantize_row(DType::I32, x.data(), q.data(), 4); }),
                  "not a weight type");
}

TEST(Quantize, WeightTypes) {
  for (DType t : kWeightTypes) EXPECT_TRUE(is_weight_type(t)) << name(t);
  for (DType t : {DType::F64, DType::I32, DType::U32, DType::I64}) EXPECT_FALSE(is_weight_type(t));
}

// quantize_matrix writes quantize_row's bits for every row, with 1 thread or several; the same for
// dequantize_matrix.
TEST(Quantize, MatrixIsRowByRowAtAnyThreadCount) {
  const int64_t rows = 13, cols = 512;
  const auto x = make_input(Kind::Outliers, rows * cols, 11);
  const int threads = omp_get_max_threads();
  for (DType t : kWeightTypes) {
    const size_t rb = dtype_bytes(t, cols);
    std::vector<uint8_t> by_row(rb * rows), one(rb * rows), many(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(t, x.data() + r * cols, by_row.data() + r * rb, cols);
    omp_set_num_threads(1);
    quantize_matrix(t, x.data(), one.data(), rows, cols);
    omp_set_num_threads(4);
    quantize_matrix(t, x.data(), many.data(), rows, cols);
    omp_set_num_threads(threads);
    EXPECT_EQ(one, by_row) << name(t);
    EXPECT_EQ(many, by_row) << name(t);
    std::vector<float> y_row(rows * cols), y_mat(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t, by_row.data() + r * rb, y_row.data() + r * cols, cols);
    dequantize_matrix(t, by_row.data(), y_mat.data(), rows, cols);
    EXPECT_EQ(0, std::memcmp(y_row.data(), y_mat.data(), y_row.size() * 4)) << name(t);
  }
}

// ---- GGML's blocks (tests/fixtures/quant/ggml_blocks.bin) --------------------------------------

DType dtype_of_ggml(uint32_t id) {
  switch (id) {
    case 0:
      return DType::F32;
    case 1:
      return DType::F16;
    case 2:
      return DType::Q4_0;
    case 6:
      return DType::Q5_0;
    case 8:
      return DType::Q8_0;
    case 12:
      return DType::Q4_K;
    case 13:
      return DType::Q5_K;
    case 14:
      return DType::Q6_K;
    case 23:
      return DType::IQ4_XS;
    case 30:
      return DType::BF16;
  }
  ADD_FAILURE() << "GGML type " << id << " in the fixture";
  return DType::I32;
}

struct GgmlCase {
  DType t;
  std::vector<uint8_t> blocks;
  std::vector<float> dequantized;
};

struct GgmlFixture {
  uint32_t rows = 0, cols = 0;
  std::vector<float> input;
  std::vector<GgmlCase> cases;
};

// The layout is scripts/reference/ggml_blocks/ggml_blocks.c's.
GgmlFixture read_fixture() {
  const std::string path = std::string(ZAYA_TEST_FIXTURES) + "/quant/ggml_blocks.bin";
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << "missing " << path;
  auto get = [&](void* p, size_t n) {
    f.read(static_cast<char*>(p), std::streamsize(n));
    EXPECT_TRUE(f) << path << " is truncated";
  };
  GgmlFixture fx;
  uint32_t head[5] = {};
  get(head, sizeof head);
  EXPECT_EQ(head[0], 0x4247515au);
  EXPECT_EQ(head[1], 1u);
  fx.rows = head[2];
  fx.cols = head[3];
  const size_t n = size_t(fx.rows) * fx.cols;
  fx.input.resize(n);
  get(fx.input.data(), n * 4);
  for (uint32_t i = 0; i < head[4] && f; ++i) {
    uint32_t id = 0;
    uint64_t nbytes = 0;
    get(&id, 4);
    get(&nbytes, 8);
    GgmlCase c{dtype_of_ggml(id), std::vector<uint8_t>(nbytes), std::vector<float>(n)};
    EXPECT_EQ(nbytes, dtype_bytes(c.t, int64_t(n))) << name(c.t);
    get(c.blocks.data(), nbytes);
    get(c.dequantized.data(), n * 4);
    fx.cases.push_back(std::move(c));
  }
  return fx;
}

TEST(Ggml, FixtureHasEveryWeightType) {
  const GgmlFixture fx = read_fixture();
  EXPECT_EQ(fx.cases.size(), std::size(kWeightTypes));
  for (DType t : kWeightTypes) {
    bool found = false;
    for (const auto& c : fx.cases) found |= c.t == t;
    EXPECT_TRUE(found) << name(t);
  }
}

// Our dequantization of GGML's blocks is GGML's, bit for bit.
TEST(Ggml, DequantizeIsBitExact) {
  const GgmlFixture fx = read_fixture();
  for (const auto& c : fx.cases) {
    std::vector<float> y(c.dequantized.size());
    dequantize_matrix(c.t, c.blocks.data(), y.data(), fx.rows, fx.cols);
    int differ = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &y[i], 4);
      std::memcpy(&b, &c.dequantized[i], 4);
      if (a != b && ++differ <= 3)
        ADD_FAILURE() << name(c.t) << " value " << i << ": " << y[i] << " vs GGML's "
                      << c.dequantized[i];
    }
  }
}

// Our quantizer's error on the fixture's input is at most 1.02 times GGML's reference quantizer's,
// per row (each row is one kind of input) and overall; F16, BF16 and F32 give GGML's bytes.
TEST(Ggml, QuantizeErrorAtMostGgmls) {
  const GgmlFixture fx = read_fixture();
  for (const auto& c : fx.cases) {
    std::vector<uint8_t> ours(c.blocks.size());
    quantize_matrix(c.t, fx.input.data(), ours.data(), fx.rows, fx.cols);
    std::vector<float> y(fx.input.size());
    dequantize_matrix(c.t, ours.data(), y.data(), fx.rows, fx.cols);
    if (!dtype_is_quantized(c.t)) {
      EXPECT_EQ(ours, c.blocks) << name(c.t);
    }
    const size_t nb = c.blocks.size() / dtype_block_bytes(c.t);
    size_t same = 0;
    for (size_t b = 0; b < nb; ++b) {
      const size_t bb = dtype_block_bytes(c.t);
      same += std::memcmp(ours.data() + b * bb, c.blocks.data() + b * bb, bb) == 0;
    }
    const double e_ours = rel_rms(fx.input, y), e_ggml = rel_rms(fx.input, c.dequantized);
    std::printf(
        "  %-7s relative RMS error %.4e, GGML's %.4e (ratio %.4f); %zu of %zu blocks "
        "equal GGML's\n",
        name(c.t).c_str(), e_ours, e_ggml, e_ggml > 0 ? e_ours / e_ggml : 1.0, same, nb);
    EXPECT_LE(e_ours, 1.02 * e_ggml) << name(c.t);
    for (uint32_t r = 0; r < fx.rows; ++r) {
      const auto at = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + r * fx.cols, v.begin() + (r + 1) * fx.cols);
      };
      const double ro = rel_rms(at(fx.input), at(y)), rg = rel_rms(at(fx.input), at(c.dequantized));
      std::printf("          row %u: %.4e vs %.4e\n", r, ro, rg);
      EXPECT_LE(ro, 1.02 * rg) << name(c.t) << " row " << r;
    }
  }
}

}  // namespace
}  // namespace zaya::quant
