// xent: forward (loss, lse) against a double reference on odd sizes with ignored rows; backward
// against numerical gradients in double and a double reference in f32; dlogits aliasing logits;
// large logits (1000, 1e4) neither overflow nor lose the answer.
#include <cmath>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Targets in [0, V) with every third row ignored (−1).
std::vector<int32_t> make_targets(int64_t N, int64_t V, uint64_t seed) {
  CounterRng rng{seed, 0};
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n) t[n] = n % 3 == 2 ? -1 : int32_t(rng.bits(n) % uint64_t(V));
  return t;
}

struct XentRef {
  std::vector<double> loss, lse, dlogits;
};
XentRef xent_reference(const std::vector<double>& logits, const std::vector<int32_t>& target,
                       int64_t N, int64_t V, double scale) {
  XentRef r{std::vector<double>(N), std::vector<double>(N), std::vector<double>(N * V)};
  for (int64_t n = 0; n < N; ++n) {
    const double* l = logits.data() + n * V;
    double m = l[0], s = 0;
    for (int64_t j = 1; j < V; ++j) m = std::max(m, l[j]);
    for (int64_t j = 0; j < V; ++j) s += std::exp(l[j] - m);
    r.lse[n] = m + std::log(s);
    if (target[n] < 0) continue;
    r.loss[n] = r.lse[n] - l[target[n]];
    for (int64_t j = 0; j < V; ++j)
      r.dlogits[n * V + j] = scale * (std::exp(l[j] - r.lse[n]) - (j == target[n] ? 1.0 : 0.0));
  }
  return r;
}

template <class T>
struct XentOut {
  std::vector<T> loss, lse, dlogits;
};
// Forward then backward; in_place computes dlogits over a copy of the logits buffer.
template <class T>
XentOut<T> run_xent(std::vector<T> logits, std::vector<int32_t> target, int64_t N, int64_t V,
                    double scale, bool in_place) {
  XentOut<T> o{std::vector<T>(N, T(-3)), std::vector<T>(N, T(-3)), {}};
  ops::xent_forward(Tensor(o.loss.data(), {N}), Tensor(o.lse.data(), {N}),
                    Tensor(logits.data(), {N, V}), Tensor(target.data(), {N}));
  if (in_place) {
    ops::xent_backward(Tensor(logits.data(), {N, V}), Tensor(logits.data(), {N, V}),
                       Tensor(o.lse.data(), {N}), Tensor(target.data(), {N}), scale);
    o.dlogits = std::move(logits);
  } else {
    o.dlogits.assign(N * V, T(7));  // overwritten
    ops::xent_backward(Tensor(o.dlogits.data(), {N, V}), Tensor(logits.data(), {N, V}),
                       Tensor(o.lse.data(), {N}), Tensor(target.data(), {N}), scale);
  }
  return o;
}

}  // namespace

TEST(Xent, F32MatchesReferenceOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t V : kOddSizes) {
      auto logits = cast<double>(randn<float>(N * V, 1, 3.0));
      auto target = make_targets(N, V, 2);
      const double scale = 1.0 / double(N);
      auto ref = xent_reference(logits, target, N, V, scale);
      auto out = run_xent(cast<float>(logits), target, N, V, scale, false);
      expect_close(out.loss, ref.loss, kOpAbs, kOpRel, "loss f32");
      expect_close(out.lse, ref.lse, kOpAbs, kOpRel, "lse f32");
      // dlogits carry the factor `scale`, so the absolute tolerance does too.
      expect_close(out.dlogits, ref.dlogits, kOpAbs * scale, kOpRel, "dlogits f32");
      for (int64_t n = 0; n < N; ++n) {
        if (target[n] < 0) {
          EXPECT_EQ(out.loss[n], 0.f) << "ignored row " << n;
        }
      }
    }
}

TEST(Xent, BackwardMatchesNumericalGradient) {
  const int64_t N = 7, V = 9;
  auto logits = randn<double>(N * V, 3, 2.0);
  auto target = make_targets(N, V, 4);
  const double scale = 0.37;
  auto loss = [&] {
    std::vector<double> l(N), lse(N);
    ops::xent_forward(Tensor(l.data(), {N}), Tensor(lse.data(), {N}), Tensor(logits.data(), {N, V}),
                      Tensor(target.data(), {N}));
    double s = 0;
    for (double v : l) s += scale * v;
    return s;
  };
  auto out = run_xent(logits, target, N, V, scale, false);
  expect_grad_close(out.dlogits, numerical_grad(loss, logits.data(), logits.size()), kGradRelDouble,
                    "dlogits");
  for (int64_t n = 0; n < N; ++n) {
    if (target[n] >= 0) continue;
    for (int64_t j = 0; j < V; ++j) EXPECT_EQ(out.dlogits[n * V + j], 0.0) << "ignored row";
  }
}

TEST(Xent, InPlaceBackwardEqualsSeparateBuffer) {
  for (int64_t N : {int64_t(7), int64_t(257)}) {
    const int64_t V = 257;  // 257 × 257 crosses the threading threshold
    auto logits = randn<float>(N * V, 5, 3.0);
    auto target = make_targets(N, V, 6);
    auto a = run_xent(logits, target, N, V, 0.5, false);
    auto b = run_xent(logits, target, N, V, 0.5, true);
    EXPECT_EQ(a.dlogits, b.dlogits);
    auto a64 = run_xent(cast<double>(logits), target, N, V, 0.5, false);
    auto b64 = run_xent(cast<double>(logits), target, N, V, 0.5, true);
    EXPECT_EQ(a64.dlogits, b64.dlogits);
  }
}

TEST(Xent, LargeLogitsDoNotOverflow) {
  const int64_t N = 7, V = 33;
  for (double offset : {1000.0, -1000.0, 1e4}) {
    auto logits = cast<double>(randn<float>(N * V, 7, 2.0, offset));
    for (int64_t j = 0; j < V; ++j) logits[3 * V + j] = offset;  // a flat row: loss = log V
    auto target = make_targets(N, V, 8);
    target[3] = 5;
    auto ref = xent_reference(logits, target, N, V, 1.0);
    EXPECT_NEAR(ref.loss[3], std::log(double(V)), 1e-12);
    auto out = run_xent(cast<float>(logits), target, N, V, 1.0, true);
    // lse ≈ offset is stored in f32, so lse and loss (its difference with a logit of the same
    // size) carry one rounding of |offset|, and every p = exp(ℓ − lse) a relative error of that.
    const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(offset)) - 23);
    expect_close(out.lse, ref.lse, ulp, kOpRel, "large lse f32");
    expect_close(out.loss, ref.loss, ulp + kOpAbs, kOpRel, "large loss f32");
    expect_close(out.dlogits, ref.dlogits, kOpAbs, 2 * ulp, "large dlogits f32");
    auto out64 = run_xent(logits, target, N, V, 1.0, true);
    expect_close(out64.loss, ref.loss, 1e-12, 1e-12, "large loss f64");
    expect_close(out64.dlogits, ref.dlogits, 1e-12, 1e-9, "large dlogits f64");
  }
}
