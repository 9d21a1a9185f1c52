// linear: forward against a double loop reference; backward against numerical gradients.
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

std::vector<double> linear_reference(const std::vector<double>& x, const std::vector<double>& w,
                                     const std::vector<double>& b, int64_t N, int64_t I,
                                     int64_t O) {
  std::vector<double> y(N * O);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double s = b.empty() ? 0 : b[o];
      for (int64_t i = 0; i < I; ++i) s += x[n * I + i] * w[o * I + i];
      y[n * O + o] = s;
    }
  return y;
}

}  // namespace

TEST(Linear, ForwardF32MatchesReferenceOnOddSizes) {
  for (int64_t N : kOddSizes) {
    const int64_t I = 33, O = 7;
    auto x = randn<double>(N * I, 1), w = randn<double>(O * I, 2), b = randn<double>(O, 3);
    auto ref = linear_reference(x, w, b, N, I, O);
    std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end());
    std::vector<float> y(N * O);
    ops::linear_forward(Tensor(y.data(), {N, O}), Tensor(xf.data(), {N, I}),
                        Tensor(wf.data(), {O, I}), Tensor(bf.data(), {O}));
    expect_close(y, ref, kOpAbs * 10, kOpRel * 10, "linear f32");
  }
}

TEST(Linear, AccumulateAddsToOutput) {
  const int64_t N = 3, I = 4, O = 5;
  auto x = randn<double>(N * I, 4), w = randn<double>(O * I, 5);
  auto ref = linear_reference(x, w, {}, N, I, O);
  std::vector<double> y(N * O, 1.0);
  ops::linear_forward(Tensor(y.data(), {N, O}), Tensor(x.data(), {N, I}), Tensor(w.data(), {O, I}),
                      Tensor{}, true);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i] + 1.0, 1e-12);
}

TEST(Linear, BackwardMatchesNumericalGradient) {
  const int64_t N = 7, I = 5, O = 3;
  auto x = randn<double>(N * I, 6), w = randn<double>(O * I, 7), b = randn<double>(O, 8);
  auto dy = randn<double>(N * O, 9);
  auto loss = [&] {
    std::vector<double> y(N * O);
    ops::linear_forward(Tensor(y.data(), {N, O}), Tensor(x.data(), {N, I}),
                        Tensor(w.data(), {O, I}), Tensor(b.data(), {O}));
    return dot(y, dy);
  };
  std::vector<double> dx(N * I), dw(O * I, 0.0), db(O, 0.0);
  ops::linear_backward(Tensor(dx.data(), {N, I}), Tensor(dw.data(), {O, I}), Tensor(db.data(), {O}),
                       Tensor(dy.data(), {N, O}), Tensor(x.data(), {N, I}),
                       Tensor(w.data(), {O, I}));
  expect_grad_close(dx, numerical_grad(loss, x.data(), x.size()), kGradRelDouble, "dx");
  expect_grad_close(dw, numerical_grad(loss, w.data(), w.size()), kGradRelDouble, "dw");
  expect_grad_close(db, numerical_grad(loss, b.data(), b.size()), kGradRelDouble, "db");
}
