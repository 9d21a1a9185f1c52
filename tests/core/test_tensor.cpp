// core/: dtype conversions, tensor views and the counter-based RNG (arenas and host buffers:
// test_arena.cpp, test_host_buffer.cpp).
#include <cmath>
#include <limits>

#include "core/rng.h"
#include "core/tensor.h"
#include "test_util.h"

using namespace zaya;

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3·2^-8 ties between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
  for (float x : {0.0f, 1.5f, -3.25f, std::ldexp(1.0f, 100), std::ldexp(1.0f, -100)})
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(x)), x);
}

TEST(DType, F16DecodesNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x8000), -0.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(Tensor, ViewsShareMemory) {
  std::vector<float> buf(24);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i);
  Tensor t(buf.data(), {4, 3, 2});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(-1), 2);
  EXPECT_EQ(t.shape_str(), "[4,3,2]");
  Tensor r = t.rows(1, 3);
  EXPECT_EQ(r.shape[0], 2);
  EXPECT_EQ(r.ptr<float>()[0], 6.0f);
  Tensor v = t.view({6, 4});
  EXPECT_EQ(v.data, t.data);
  Tensor p = t.prefix({2, 5});
  EXPECT_EQ(p.numel(), 10);
  EXPECT_FALSE(Tensor{}.defined());
}

TEST(TensorDeathTest, WrongDtypeAccessAborts) {
  std::vector<float> buf(4);
  Tensor t(buf.data(), {4});
  EXPECT_DEATH(t.ptr<double>(), "accessed as F64");
  EXPECT_DEATH(t.view({5}), "view");
}

TEST(Rng, CounterBasedAndDeterministic) {
  CounterRng a{42, 7}, b{42, 7}, other_stream{42, 8}, other_seed{43, 7};
  EXPECT_EQ(a.bits(123), b.bits(123));
  EXPECT_NE(a.bits(123), other_stream.bits(123));
  EXPECT_NE(a.bits(123), other_seed.bits(123));
  EXPECT_NE(a.bits(123), a.bits(124));
  // Any element can be drawn on its own: order of draws does not matter.
  EXPECT_EQ(a.normal(1000), b.normal(1000));
}

TEST(Rng, NormalHasUnitMoments) {
  CounterRng rng{1, 0};
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal(uint64_t(i));
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);  // 4.5 standard errors
  EXPECT_NEAR(var, 1.0, 0.015);
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.uniform(uint64_t(i));
    EXPECT_GT(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}
