// RoPE: tables against the fp32 recipe of docs/model.md §4.6 bit for bit and against exact angles
// within fp32 rounding; offset tables are slices of longer ones; the rotation against a double
// reference, norm preservation, untouched tail dims; backward against numerical gradients.
#include <cstring>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Tables {
  int64_t T, m;
  std::vector<float> cos, sin;
};

Tables make_tables(int64_t T, int64_t pos0, double theta, int64_t r) {
  Tables tb{T, r / 2, std::vector<float>(T * (r / 2)), std::vector<float>(T * (r / 2))};
  ops::rope_tables(Tensor(tb.cos.data(), {T, r / 2}), Tensor(tb.sin.data(), {T, r / 2}), pos0,
                   theta, r);
  return tb;
}

struct RopeSize {
  int64_t B, T, H, d, r;
  int64_t numel() const { return B * T * H * d; }
};

// Spec §4.6 on each head vector, in double, with the (f32) table values.
std::vector<double> reference(const RopeSize& s, const std::vector<double>& x, const Tables& tb) {
  std::vector<double> y = x;
  const int64_t m = s.r / 2;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.H; ++h) {
        const double* v = x.data() + ((b * s.T + t) * s.H + h) * s.d;
        double* out = y.data() + ((b * s.T + t) * s.H + h) * s.d;
        for (int64_t i = 0; i < m; ++i) {
          const double c = tb.cos[t * m + i], sn = tb.sin[t * m + i];
          out[i] = v[i] * c - v[i + m] * sn;
          out[i + m] = v[i + m] * c + v[i] * sn;
        }
      }
  return y;
}

template <class S>
void rope(std::vector<S>& x, const RopeSize& s, const Tables& tb, bool backward = false) {
  Tensor xt(x.data(), {s.B, s.T, s.H, s.d});
  Tensor ct((void*)tb.cos.data(), DType::F32, {tb.T, tb.m});
  Tensor st((void*)tb.sin.data(), DType::F32, {tb.T, tb.m});
  if (backward)
    ops::rope_backward(xt, ct, st);
  else
    ops::rope_forward(xt, ct, st);
}

const RopeSize kSizes[] = {
    {1, 1, 3, 8, 8}, {2, 7, 2, 8, 4}, {3, 33, 1, 6, 2}, {2, 2, 5, 6, 6}, {1, 7, 3, 10, 6}};

}  // namespace

TEST(Rope, TablesFollowTheFp32Recipe) {
  struct Case {
    int64_t T, pos0;
    double theta;
    int64_t r;
  };
  for (Case k :
       {Case{33, 0, 1e4, 64}, Case{7, 5, 1e6, 8}, Case{1, 0, 1e4, 6}, Case{50, 1000, 1e6, 64}}) {
    const Tables tb = make_tables(k.T, k.pos0, k.theta, k.r);
    const int64_t m = k.r / 2;
    for (int64_t t = 0; t < k.T; ++t)
      for (int64_t i = 0; i < m; ++i) {
        // Every step in fp32, written with the C functions (docs/model.md §4.6).
        const float e = float(2 * i) / float(k.r);
        const float inv_freq = 1.0f / powf(float(k.theta), e);
        const float angle = float(k.pos0 + t) * inv_freq;
        ASSERT_EQ(tb.cos[t * m + i], cosf(angle)) << "t " << t << " i " << i;
        ASSERT_EQ(tb.sin[t * m + i], sinf(angle)) << "t " << t << " i " << i;
        // And within fp32 rounding of the exact angle: the relative angle error is ~1e-6
        // (θ^e amplifies the rounding of e by ln θ), so the bound grows with the angle.
        const double exact = double(k.pos0 + t) * std::pow(k.theta, -2.0 * double(i) / double(k.r));
        const double tol = 1e-6 + 2e-6 * exact;
        EXPECT_NEAR(tb.cos[t * m + i], std::cos(exact), tol);
        EXPECT_NEAR(tb.sin[t * m + i], std::sin(exact), tol);
      }
  }
}

TEST(Rope, OffsetTablesAreSlicesOfALongerTable) {
  const int64_t r = 16, m = r / 2;
  const Tables all = make_tables(40, 0, 1e4, r);
  const Tables part = make_tables(20, 13, 1e4, r);
  EXPECT_EQ(std::memcmp(part.cos.data(), all.cos.data() + 13 * m, 20 * m * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(part.sin.data(), all.sin.data() + 13 * m, 20 * m * sizeof(float)), 0);
}

TEST(Rope, ForwardMatchesReferenceKeepsTailAndNorm) {
  for (const RopeSize& s : kSizes) {
    const Tables tb = make_tables(s.T, 0, 1e4, s.r);
    auto x = randn<double>(s.numel(), 1 + s.T);
    for (double& e : x) e = double(float(e));
    const auto ref = reference(s, x, tb);

    std::vector<float> xf(x.begin(), x.end());
    rope(xf, s, tb);
    expect_close(xf, ref, kOpAbs, kOpRel, "rope f32");
    std::vector<double> xd = x;
    rope(xd, s, tb);
    expect_close(xd, ref, 1e-14, 1e-14, "rope f64");

    for (int64_t row = 0; row < s.B * s.T * s.H; ++row) {
      double n_in = 0, n_out = 0;
      for (int64_t j = 0; j < s.d; ++j) {
        const int64_t e = row * s.d + j;
        n_in += x[e] * x[e];
        n_out += xd[e] * xd[e];
        if (j >= s.r) {
          EXPECT_EQ(xd[e], x[e]) << "dims ≥ r pass through";
        }
      }
      // cos² + sin² = 1 only to f32 rounding of the table values.
      EXPECT_NEAR(std::sqrt(n_out), std::sqrt(n_in), 1e-6 * std::sqrt(n_in));
    }
  }
}

TEST(Rope, BackwardMatchesNumericalGradientAndInvertsForward) {
  for (const RopeSize& s : kSizes) {
    const Tables tb = make_tables(s.T, 3, 1e4, s.r);
    auto x = randn<double>(s.numel(), 50 + s.T), dy = randn<double>(s.numel(), 3);
    auto loss = [&] {
      std::vector<double> y = x;
      rope(y, s, tb);
      return dot(y, dy);
    };
    std::vector<double> dx = dy;
    rope(dx, s, tb, /*backward=*/true);
    expect_grad_close(dx, numerical_grad(loss, x.data(), x.size()), kGradRelDouble, "dx");

    // Rotation by −angle undoes rotation by +angle (up to the table's cos² + sin² ≠ 1 rounding).
    std::vector<double> round_trip = x;
    rope(round_trip, s, tb);
    rope(round_trip, s, tb, /*backward=*/true);
    expect_close(round_trip, x, 1e-6, 1e-6, "backward ∘ forward");
  }
}
