// cca_conv: forward against a literal transcription of docs/model.md §4.2 (explicit y_{−1} = b0 and
// u_{t<0} = 0); backward against numerical gradients, including the += contract; determinism of
// the parameter-gradient reductions across thread counts.
#include <omp.h>

#include <cstring>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// One convolution problem: u[B,T,C], w0[C,1,2], b0[C], w1[C,d,2], b1[C] with C = groups·d.
struct Conv {
  int64_t B, T, groups, d, C;
  std::vector<double> u, w0, b0, w1, b1;
  Conv(int64_t B_, int64_t T_, int64_t groups_, int64_t d_, uint64_t seed)
      : B(B_), T(T_), groups(groups_), d(d_), C(groups_ * d_) {
    u = randn<double>(B * T * C, seed);
    w0 = randn<double>(2 * C, seed + 1, 0.7);
    b0 = randn<double>(C, seed + 2, 0.5);
    w1 = randn<double>(C * d * 2, seed + 3, 1.0 / std::sqrt(2.0 * d));
    b1 = randn<double>(C, seed + 4, 0.5);
  }
  // Rounds every input through f32 so the double reference sees exactly the f32 op's inputs.
  void round_to_float() {
    for (auto* v : {&u, &w0, &b0, &w1, &b1})
      for (double& x : *v) x = double(float(x));
  }
};

// Spec §4.2, literally. y(b, j, c) for j = −1 … T−1; z[b,t,c].
double ref_u(const Conv& p, int64_t b, int64_t t, int64_t c) {
  return t < 0 ? 0.0 : p.u[(b * p.T + t) * p.C + c];
}
double ref_y(const Conv& p, int64_t b, int64_t j, int64_t c) {
  return p.b0[c] + p.w0[c * 2 + 0] * ref_u(p, b, j - 1, c) + p.w0[c * 2 + 1] * ref_u(p, b, j, c);
}
std::vector<double> ref_z(const Conv& p) {
  std::vector<double> z(p.B * p.T * p.C);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t t = 0; t < p.T; ++t)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t g = c / p.d;
        double s = p.b1[c];
        for (int64_t i = 0; i < p.d; ++i)
          s += p.w1[(c * p.d + i) * 2 + 0] * ref_y(p, b, t - 1, g * p.d + i) +
               p.w1[(c * p.d + i) * 2 + 1] * ref_y(p, b, t, g * p.d + i);
        z[(b * p.T + t) * p.C + c] = s;
      }
  return z;
}
std::vector<double> ref_saved_y(const Conv& p) {
  std::vector<double> y(p.B * (p.T + 1) * p.C);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t j = -1; j < p.T; ++j)
      for (int64_t c = 0; c < p.C; ++c) y[(b * (p.T + 1) + j + 1) * p.C + c] = ref_y(p, b, j, c);
  return y;
}

template <class S>
std::vector<S> cast(const std::vector<double>& v) {
  return std::vector<S>(v.begin(), v.end());
}

// Runs the op in dtype S; returns z and fills y.
template <class S>
std::vector<S> run_forward(const Conv& p, std::vector<S>& y) {
  auto u = cast<S>(p.u), w0 = cast<S>(p.w0), b0 = cast<S>(p.b0), w1 = cast<S>(p.w1),
       b1 = cast<S>(p.b1);
  std::vector<S> z(p.B * p.T * p.C);
  y.assign(p.B * (p.T + 1) * p.C, S(0));
  ops::cca_conv_forward(Tensor(z.data(), {p.B, p.T, p.C}), Tensor(y.data(), {p.B, p.T + 1, p.C}),
                        Tensor(u.data(), {p.B, p.T, p.C}), Tensor(w0.data(), {p.C, 1, 2}),
                        Tensor(b0.data(), {p.C}), Tensor(w1.data(), {p.C, p.d, 2}),
                        Tensor(b1.data(), {p.C}));
  return z;
}

// Gradient buffers of one backward call, in dtype S, prefilled with `prefill` values.
template <class S>
struct Grads {
  std::vector<S> du, dw0, db0, dw1, db1;
};
template <class S>
Grads<S> run_backward(const Conv& p, const std::vector<double>& dz_d, const Grads<S>& prefill) {
  std::vector<S> y;
  run_forward<S>(p, y);
  auto u = cast<S>(p.u), w0 = cast<S>(p.w0), w1 = cast<S>(p.w1), dz = cast<S>(dz_d);
  Grads<S> g = prefill;
  ops::cca_conv_backward(Tensor(g.du.data(), {p.B, p.T, p.C}), Tensor(g.dw0.data(), {p.C, 1, 2}),
                         Tensor(g.db0.data(), {p.C}), Tensor(g.dw1.data(), {p.C, p.d, 2}),
                         Tensor(g.db1.data(), {p.C}), Tensor(dz.data(), {p.B, p.T, p.C}),
                         Tensor(u.data(), {p.B, p.T, p.C}), Tensor(y.data(), {p.B, p.T + 1, p.C}),
                         Tensor(w0.data(), {p.C, 1, 2}), Tensor(w1.data(), {p.C, p.d, 2}));
  return g;
}

template <class S>
Grads<S> prefilled(const Conv& p, uint64_t seed) {
  return {cast<S>(randn<double>(p.B * p.T * p.C, seed)), cast<S>(randn<double>(2 * p.C, seed + 1)),
          cast<S>(randn<double>(p.C, seed + 2)), cast<S>(randn<double>(p.C * p.d * 2, seed + 3)),
          cast<S>(randn<double>(p.C, seed + 4))};
}

template <class S>
Grads<S> zero_grads(const Conv& p) {
  return {std::vector<S>(p.B * p.T * p.C), std::vector<S>(2 * p.C), std::vector<S>(p.C),
          std::vector<S>(p.C * p.d * 2), std::vector<S>(p.C)};
}

std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

}  // namespace

TEST(CcaConv, ForwardF32MatchesSpecReferenceOnOddSizes) {
  struct Size {
    int64_t B, T, groups, d;
  };
  for (Size s : {Size{1, 1, 3, 8}, Size{2, 2, 3, 6}, Size{3, 7, 5, 8}, Size{1, 33, 3, 6},
                 Size{2, 7, 1, 1}, Size{1, 5, 2, 3}}) {
    Conv p(s.B, s.T, s.groups, s.d, 100 + s.T);
    p.round_to_float();
    std::vector<float> y;
    auto z = run_forward<float>(p, y);
    expect_close(z, ref_z(p), kOpAbs, kOpRel, "z f32");
    expect_close(y, ref_saved_y(p), kOpAbs, kOpRel, "saved y f32");
  }
}

TEST(CcaConv, ForwardF64MatchesSpecReference) {
  Conv p(2, 7, 3, 6, 7);
  std::vector<double> y;
  auto z = run_forward<double>(p, y);
  expect_close(z, ref_z(p), 1e-13, 1e-13, "z f64");
  expect_close(y, ref_saved_y(p), 1e-13, 1e-13, "saved y f64");
}

// The padding-bias subtlety: y_{−1} = b0, so with u ≡ 0 every z_t (including z_0) is
// b1 + Σ_i (w1[c,i,0] + w1[c,i,1])·b0[g·d+i]. A zero-padded stage-0 output would give z_0 without
// the tap-0 term.
TEST(CcaConv, PaddingPositionCarriesStageZeroBias) {
  Conv p(2, 3, 3, 6, 11);
  std::fill(p.u.begin(), p.u.end(), 0.0);
  std::vector<double> y;
  auto z = run_forward<double>(p, y);
  for (int64_t c = 0; c < p.C; ++c) EXPECT_EQ(y[c], p.b0[c]) << "y row 0 must be b0";
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t g = c / p.d;
      double with_pad_bias = p.b1[c], tap0 = 0;
      for (int64_t i = 0; i < p.d; ++i) {
        tap0 += p.w1[(c * p.d + i) * 2 + 0] * p.b0[g * p.d + i];
        with_pad_bias +=
            (p.w1[(c * p.d + i) * 2 + 0] + p.w1[(c * p.d + i) * 2 + 1]) * p.b0[g * p.d + i];
      }
      EXPECT_NEAR(z[(b * p.T + 0) * p.C + c], with_pad_bias, 1e-12);
      EXPECT_GT(std::fabs(tap0), 1e-6) << "test needs a visible tap-0 term";
    }
  // And z_0 moves with b0 through both taps: ∂z_0[c]/∂b0[g·d+i] = w1[c,i,0] + w1[c,i,1] (u ≡ 0);
  // with a zero-padded y_{−1} it would be w1[c,i,1] alone.
  Conv q = p;
  q.b0[1] += 1.0;
  std::vector<double> yq;
  auto zq = run_forward<double>(q, yq);
  for (int64_t c = 0; c < p.d; ++c)
    EXPECT_NEAR(zq[c] - z[c], p.w1[(c * p.d + 1) * 2 + 0] + p.w1[(c * p.d + 1) * 2 + 1], 1e-12);
}

TEST(CcaConv, BackwardMatchesNumericalGradientAndAccumulates) {
  struct Size {
    int64_t B, T, groups, d;
  };
  for (Size s : {Size{2, 7, 3, 6}, Size{1, 1, 3, 8}, Size{3, 2, 1, 5}}) {
    Conv p(s.B, s.T, s.groups, s.d, 200 + s.T);
    auto dz = randn<double>(p.B * p.T * p.C, 300 + s.T);
    auto loss = [&] {
      std::vector<double> y;
      return dot(run_forward<double>(p, y), dz);
    };
    const auto pre = prefilled<double>(p, 400);
    const auto g = run_backward<double>(p, dz, pre);
    expect_grad_close(minus(g.du, pre.du), numerical_grad(loss, p.u.data(), p.u.size()),
                      kGradRelDouble, "du");
    expect_grad_close(minus(g.dw0, pre.dw0), numerical_grad(loss, p.w0.data(), p.w0.size()),
                      kGradRelDouble, "dw0");
    expect_grad_close(minus(g.db0, pre.db0), numerical_grad(loss, p.b0.data(), p.b0.size()),
                      kGradRelDouble, "db0");
    expect_grad_close(minus(g.dw1, pre.dw1), numerical_grad(loss, p.w1.data(), p.w1.size()),
                      kGradRelDouble, "dw1");
    expect_grad_close(minus(g.db1, pre.db1), numerical_grad(loss, p.b1.data(), p.b1.size()),
                      kGradRelDouble, "db1");
  }
}

TEST(CcaConv, BackwardF32MatchesF64) {
  Conv p(2, 33, 3, 8, 21);
  p.round_to_float();
  auto dz = randn<double>(p.B * p.T * p.C, 22);
  for (double& x : dz) x = double(float(x));
  const auto gd = run_backward<double>(p, dz, zero_grads<double>(p));
  const auto gf = run_backward<float>(p, dz, zero_grads<float>(p));
  const std::pair<const std::vector<float>*, const std::vector<double>*> pairs[] = {
      {&gf.du, &gd.du},
      {&gf.dw0, &gd.dw0},
      {&gf.db0, &gd.db0},
      {&gf.dw1, &gd.dw1},
      {&gf.db1, &gd.db1}};
  for (auto [f, d] : pairs) EXPECT_LE(rel_l2(f->data(), d->data(), f->size()), 1e-6);
}

TEST(CcaConv, ParameterGradientsAreBitwiseIndependentOfThreadCount) {
  Conv p(2, 64, 4, 16, 31);  // large enough for every parallel region to engage
  auto dz = randn<double>(p.B * p.T * p.C, 32);
  const auto pre = prefilled<float>(p, 33);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run_backward<float>(p, dz, pre);
  omp_set_num_threads(std::max(threads, 3));
  const auto many = run_backward<float>(p, dz, pre);
  omp_set_num_threads(threads);
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same(one.du, many.du));
  EXPECT_TRUE(same(one.dw0, many.dw0));
  EXPECT_TRUE(same(one.db0, many.db0));
  EXPECT_TRUE(same(one.dw1, many.dw1));
  EXPECT_TRUE(same(one.db1, many.db1));
}
