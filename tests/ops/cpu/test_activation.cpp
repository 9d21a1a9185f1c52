// gelu (exact erf form): forward and derivative against double references, including the tails;
// backward against a numerical gradient in double; odd sizes.
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Φ via erfc: the double reference stays accurate in the far negative tail.
double gelu_ref(double x) {
  return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
}
double gelu_grad_ref(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

std::vector<double> inputs(int64_t n, uint64_t seed) {
  auto f = randn<float>(n, seed, 3.0);
  // The tails and 0 where there is room.
  const float special[] = {0.f, -1e-3f, 1e-3f, -6.f, 6.f, -12.f, 12.f, -40.f, 40.f};
  for (int64_t i = 0; i < n && i < 9; ++i) f[i] = special[i];
  return std::vector<double>(f.begin(), f.end());
}

}  // namespace

TEST(Gelu, ForwardAndBackwardF32MatchReferenceOnOddSizes) {
  for (int64_t n : kOddSizes) {
    const auto x = inputs(n, 1), dy = randn<double>(n, 2);
    std::vector<double> y_ref(n), dx_ref(n);
    std::vector<float> x32(x.begin(), x.end()), dy32(dy.begin(), dy.end()), y(n), dx(n);
    for (int64_t i = 0; i < n; ++i) {
      y_ref[i] = gelu_ref(x[i]);
      dx_ref[i] = double(dy32[i]) * gelu_grad_ref(x[i]);
    }
    ops::gelu_forward(Tensor(y.data(), {n}), Tensor(x32.data(), {n}));
    ops::gelu_backward(Tensor(dx.data(), {n}), Tensor(dy32.data(), {n}), Tensor(x32.data(), {n}));
    expect_close(y, y_ref, kOpAbs, kOpRel, "gelu f32");
    expect_close(dx, dx_ref, kOpAbs, kOpRel, "gelu backward f32");
  }
}

TEST(Gelu, AnyShapeIsElementwise) {
  const int64_t B = 3, T = 7, C = 5;
  auto x = inputs(B * T * C, 3);
  std::vector<double> y(B * T * C);
  ops::gelu_forward(Tensor(y.data(), {B, T, C}), Tensor(x.data(), {B * T, C}));
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], gelu_ref(x[i]), 1e-15 + 1e-14 * std::fabs(y[i]));
}

TEST(Gelu, BackwardMatchesNumericalGradient) {
  const int64_t n = 33;
  auto x = inputs(n, 4);
  const auto dy = randn<double>(n, 5);
  auto loss = [&] {
    std::vector<double> y(n);
    ops::gelu_forward(Tensor(y.data(), {n}), Tensor(x.data(), {n}));
    return dot(y, dy);
  };
  std::vector<double> dx(n, 7.0);  // overwritten
  auto dyv = dy;
  ops::gelu_backward(Tensor(dx.data(), {n}), Tensor(dyv.data(), {n}), Tensor(x.data(), {n}));
  expect_grad_close(dx, numerical_grad(loss, x.data(), x.size()), kGradRelDouble, "dx");
}
