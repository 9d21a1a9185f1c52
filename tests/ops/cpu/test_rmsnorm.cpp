// rmsnorm: forward against a double reference on odd sizes; backward (dx overwrite and +=, dw +=)
// against numerical gradients in double; f32 backward against the double one; dw bits independent
// of the thread count.
#include <omp.h>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr float kEps = 1e-5f;

struct RmsRef {
  std::vector<double> y, rstd;
};

RmsRef rmsnorm_reference(const std::vector<double>& x, const std::vector<double>& w, int64_t N,
                         int64_t D, double eps) {
  RmsRef r{std::vector<double>(N * D), std::vector<double>(N)};
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t j = 0; j < D; ++j) ss += x[n * D + j] * x[n * D + j];
    r.rstd[n] = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t j = 0; j < D; ++j) r.y[n * D + j] = w[j] * r.rstd[n] * x[n * D + j];
  }
  return r;
}

}  // namespace

TEST(RmsNorm, ForwardF32MatchesReferenceOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t D : kOddSizes) {
      auto x = randn_f32(N * D, 1, 2.0, 0.3), w = randn_f32(D, 2, 0.5, 1.0);
      auto ref = rmsnorm_reference(x, w, N, D, double(kEps));
      auto xf = cast<float>(x), wf = cast<float>(w);
      std::vector<float> y(N * D), rstd(N);
      ops::rmsnorm_forward(Tensor(y.data(), {N, D}), Tensor(rstd.data(), {N}),
                           Tensor(xf.data(), {N, D}), Tensor(wf.data(), {D}), kEps);
      expect_close(y, ref.y, kOpAbs, kOpRel, "rmsnorm y f32");
      expect_close(rstd, ref.rstd, kOpAbs, kOpRel, "rmsnorm rstd f32");
    }
}

TEST(RmsNorm, BackwardMatchesNumericalGradient) {
  const int64_t N = 7, D = 33;
  auto x = randn<double>(N * D, 3, 1.5), w = randn<double>(D, 4, 0.5, 1.0);
  auto dy = randn<double>(N * D, 5);
  auto loss = [&] {
    std::vector<double> y(N * D), rstd(N);
    ops::rmsnorm_forward(Tensor(y.data(), {N, D}), Tensor(rstd.data(), {N}),
                         Tensor(x.data(), {N, D}), Tensor(w.data(), {D}), kEps);
    return dot(y, dy);
  };
  std::vector<double> y(N * D), rstd(N);
  ops::rmsnorm_forward(Tensor(y.data(), {N, D}), Tensor(rstd.data(), {N}), Tensor(x.data(), {N, D}),
                       Tensor(w.data(), {D}), kEps);
  const auto ndx = numerical_grad(loss, x.data(), x.size());
  const auto ndw = numerical_grad(loss, w.data(), w.size());
  for (bool accumulate : {false, true}) {
    // Prefilled buffers: dw must be added to; dx overwritten (or added to with accumulate_dx).
    const auto dx0 = randn<double>(N * D, 6), dw0 = randn<double>(D, 7);
    auto dx = dx0, dw = dw0;
    ops::rmsnorm_backward(Tensor(dx.data(), {N, D}), Tensor(dw.data(), {D}),
                          Tensor(dy.data(), {N, D}), Tensor(x.data(), {N, D}),
                          Tensor(w.data(), {D}), Tensor(rstd.data(), {N}), accumulate);
    if (accumulate)
      for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];
    for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw0[i];
    expect_grad_close(dx, ndx, kGradRelDouble, accumulate ? "dx (+=)" : "dx");
    expect_grad_close(dw, ndw, kGradRelDouble, "dw (+=)");
  }
}

TEST(RmsNorm, BackwardF32MatchesDoubleOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t D : kOddSizes) {
      auto x = randn_f32(N * D, 8), w = randn_f32(D, 9, 0.5, 1.0), dy = randn_f32(N * D, 10);
      auto run = [&]<class T>(T) {
        auto xt = cast<T>(x), wt = cast<T>(w), dyt = cast<T>(dy);
        std::vector<T> y(N * D), rstd(N), dx(N * D), dw(D, T(0));
        ops::rmsnorm_forward(Tensor(y.data(), {N, D}), Tensor(rstd.data(), {N}),
                             Tensor(xt.data(), {N, D}), Tensor(wt.data(), {D}), kEps);
        ops::rmsnorm_backward(Tensor(dx.data(), {N, D}), Tensor(dw.data(), {D}),
                              Tensor(dyt.data(), {N, D}), Tensor(xt.data(), {N, D}),
                              Tensor(wt.data(), {D}), Tensor(rstd.data(), {N}));
        return std::tuple{cast<double>(dx), cast<double>(dw), cast<double>(rstd)};
      };
      auto [dx64, dw64, rstd64] = run(double{});
      auto [dx32, dw32, rstd32] = run(float{});
      // dx = ρ(ĝ − n·⟨ĝ,n⟩/D) cancels (to eps level at D = 1), so measure the f32 error against
      // the size of the terms, ‖ρĝ‖, not against dx itself. dw: each product rounds once.
      double err = 0, terms = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < D; ++j) {
          const double e = dx32[n * D + j] - dx64[n * D + j], t = rstd64[n] * dy[n * D + j] * w[j];
          err += e * e, terms += t * t;
        }
      EXPECT_LE(std::sqrt(err / terms), 1e-6) << N << "x" << D;
      expect_close(dw32, dw64, kOpAbs, kOpRel, "dw f32");
    }
}

TEST(RmsNorm, WeightGradientBitsIndependentOfThreadCount) {
  const int64_t N = 257, D = 200;
  auto x = randn<float>(N * D, 11), w = randn<float>(D, 12), dy = randn<float>(N * D, 13);
  std::vector<float> y(N * D), rstd(N);
  ops::rmsnorm_forward(Tensor(y.data(), {N, D}), Tensor(rstd.data(), {N}), Tensor(x.data(), {N, D}),
                       Tensor(w.data(), {D}), kEps);
  auto run = [&](int threads) {
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> dx(N * D), dw(D, 0.f);
    ops::rmsnorm_backward(Tensor(dx.data(), {N, D}), Tensor(dw.data(), {D}),
                          Tensor(dy.data(), {N, D}), Tensor(x.data(), {N, D}),
                          Tensor(w.data(), {D}), Tensor(rstd.data(), {N}));
    omp_set_num_threads(keep);
    dx.insert(dx.end(), dw.begin(), dw.end());
    return dx;
  };
  EXPECT_EQ(run(1), run(3));
}
