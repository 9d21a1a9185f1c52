// l2norm_scale: forward against docs/model.md §4.5 in double (with and without the linear
// temperature); backward against numerical gradients (dx overwrites, dtemp accumulates).
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct NormSize {
  int64_t B, T, H, d;
  int64_t numel() const { return B * T * H * d; }
};

// y = s_h · x/‖x‖ with s_h = √d·temp[h] (or √d); norm = ‖x‖.
void reference(const NormSize& s, const std::vector<double>& x, const std::vector<double>& temp,
               std::vector<double>& y, std::vector<double>& norm) {
  y.assign(x.size(), 0);
  norm.assign(s.B * s.T * s.H, 0);
  for (int64_t nh = 0; nh < s.B * s.T * s.H; ++nh) {
    double ss = 0;
    for (int64_t i = 0; i < s.d; ++i) ss += x[nh * s.d + i] * x[nh * s.d + i];
    norm[nh] = std::sqrt(ss);
    const double scale = std::sqrt(double(s.d)) * (temp.empty() ? 1.0 : temp[nh % s.H]);
    for (int64_t i = 0; i < s.d; ++i) y[nh * s.d + i] = scale * x[nh * s.d + i] / norm[nh];
  }
}

template <class S>
void run_forward(const NormSize& s, std::vector<S>& x, std::vector<S>& temp, std::vector<S>& y,
                 std::vector<S>& norm) {
  y.assign(x.size(), S(0));
  norm.assign(s.B * s.T * s.H, S(0));
  ops::l2norm_scale_forward(
      Tensor(y.data(), {s.B, s.T, s.H, s.d}), Tensor(norm.data(), {s.B, s.T, s.H}),
      Tensor(x.data(), {s.B, s.T, s.H, s.d}), temp.empty() ? Tensor{} : Tensor(temp.data(), {s.H}));
}

const NormSize kSizes[] = {{1, 1, 3, 8}, {2, 2, 1, 6}, {3, 7, 2, 8}, {1, 33, 3, 6}, {2, 7, 5, 1}};

}  // namespace

TEST(L2NormScale, ForwardF32MatchesReference) {
  for (const NormSize& s : kSizes)
    for (bool with_temp : {false, true}) {
      auto x = randn<double>(s.numel(), 1 + s.T);
      auto temp = with_temp ? randn<double>(s.H, 2, 1.0, 0.5) : std::vector<double>{};
      for (auto* v : {&x, &temp})
        for (double& e : *v) e = double(float(e));
      std::vector<double> yr, nr;
      reference(s, x, temp, yr, nr);
      std::vector<float> xf(x.begin(), x.end()), tf(temp.begin(), temp.end()), y, norm;
      run_forward(s, xf, tf, y, norm);
      expect_close(y, yr, kOpAbs, kOpRel, "y");
      expect_close(norm, nr, kOpAbs, kOpRel, "norm");
    }
}

TEST(L2NormScale, BackwardMatchesNumericalGradient) {
  for (const NormSize& s : kSizes)
    for (bool with_temp : {false, true}) {
      auto x = randn<double>(s.numel(), 100 + s.T);
      auto temp = with_temp ? randn<double>(s.H, 4, 1.0, 0.5) : std::vector<double>{};
      auto dy = randn<double>(s.numel(), 5);
      auto loss = [&] {
        std::vector<double> y, norm;
        run_forward(s, x, temp, y, norm);
        return dot(y, dy);
      };
      std::vector<double> y, norm;
      run_forward(s, x, temp, y, norm);
      auto dx = randn<double>(s.numel(), 6);  // garbage: overwritten
      const auto dtemp0 = randn<double>(s.H, 7);
      auto dtemp = with_temp ? dtemp0 : std::vector<double>{};  // prefilled: accumulated into
      ops::l2norm_scale_backward(
          Tensor(dx.data(), {s.B, s.T, s.H, s.d}),
          with_temp ? Tensor(dtemp.data(), {s.H}) : Tensor{},
          Tensor(dy.data(), {s.B, s.T, s.H, s.d}), Tensor(x.data(), {s.B, s.T, s.H, s.d}),
          Tensor(norm.data(), {s.B, s.T, s.H}), with_temp ? Tensor(temp.data(), {s.H}) : Tensor{});
      SCOPED_TRACE(testing::Message() << "B" << s.B << " T" << s.T << " H" << s.H << " d" << s.d
                                      << " temp " << with_temp);
      const auto num_dx = numerical_grad(loss, x.data(), x.size());
      if (s.d == 1) {  // y = s·sign(x): the gradient is identically zero, relative error is moot
        expect_close(dx, num_dx, 1e-8, 0, "dx (d = 1)");
      } else {
        expect_grad_close(dx, num_dx, kGradRelDouble, "dx");
      }
      if (with_temp) {
        for (int64_t h = 0; h < s.H; ++h) dtemp[h] -= dtemp0[h];
        expect_grad_close(dtemp, numerical_grad(loss, temp.data(), temp.size()), kGradRelDouble,
                          "dtemp");
      }
    }
}

TEST(L2NormScale, BackwardAllowsDxAliasingDy) {
  const NormSize s{2, 3, 2, 6};
  auto x = randn<double>(s.numel(), 8), temp = randn<double>(s.H, 9);
  auto dy = randn<double>(s.numel(), 10);
  std::vector<double> y, norm;
  run_forward(s, x, temp, y, norm);
  auto call = [&](double* dx, double* dy_in, std::vector<double>& dt) {
    ops::l2norm_scale_backward(Tensor(dx, {s.B, s.T, s.H, s.d}), Tensor(dt.data(), {s.H}),
                               Tensor(dy_in, {s.B, s.T, s.H, s.d}),
                               Tensor(x.data(), {s.B, s.T, s.H, s.d}),
                               Tensor(norm.data(), {s.B, s.T, s.H}), Tensor(temp.data(), {s.H}));
  };
  std::vector<double> dx(s.numel()), in_place = dy, dt1(s.H), dt2(s.H);
  call(dx.data(), dy.data(), dt1);
  call(in_place.data(), in_place.data(), dt2);
  EXPECT_EQ(in_place, dx);
  EXPECT_EQ(dt2, dt1);
}
