// qk_mean: forward against the formulas of docs/model.md §4.3 in double; backward against numerical
// gradients (both outputs overwrite).
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct QkSize {
  int64_t B, T, Hq, Hk, d;
  int64_t C() const { return (Hq + Hk) * d; }
  int64_t N() const { return B * T; }
};

// Spec §4.3 written per head: g(h) = ⌊h/G⌋, mean over the G query heads of kv head g.
void reference(const QkSize& s, const std::vector<double>& z, const std::vector<double>& u,
               std::vector<double>& Q, std::vector<double>& K) {
  const int64_t G = s.Hq / s.Hk, C = s.C(), d = s.d;
  Q.assign(s.N() * s.Hq * d, 0);
  K.assign(s.N() * s.Hk * d, 0);
  for (int64_t n = 0; n < s.N(); ++n) {
    auto q0 = [&](int64_t h, int64_t i) { return u[n * C + h * d + i]; };
    auto k0 = [&](int64_t g, int64_t i) { return u[n * C + (s.Hq + g) * d + i]; };
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < d; ++i)
        Q[(n * s.Hq + h) * d + i] = z[n * C + h * d + i] + 0.5 * (q0(h, i) + k0(h / G, i));
    for (int64_t g = 0; g < s.Hk; ++g)
      for (int64_t i = 0; i < d; ++i) {
        double mean = 0;
        for (int64_t h = 0; h < s.Hq; ++h)
          if (h / G == g) mean += q0(h, i) / double(G);
        K[(n * s.Hk + g) * d + i] = z[n * C + (s.Hq + g) * d + i] + 0.5 * (mean + k0(g, i));
      }
  }
}

template <class S>
void run_forward(const QkSize& s, std::vector<S>& z, std::vector<S>& u, std::vector<S>& Q,
                 std::vector<S>& K) {
  Q.assign(s.N() * s.Hq * s.d, S(0));
  K.assign(s.N() * s.Hk * s.d, S(0));
  ops::qk_mean_forward(Tensor(Q.data(), {s.B, s.T, s.Hq, s.d}),
                       Tensor(K.data(), {s.B, s.T, s.Hk, s.d}), Tensor(z.data(), {s.B, s.T, s.C()}),
                       Tensor(u.data(), {s.B, s.T, s.C()}));
}

const QkSize kSizes[] = {{1, 1, 6, 3, 8},  {2, 2, 3, 3, 6}, {3, 7, 2, 1, 8},
                         {1, 33, 5, 1, 6}, {2, 7, 6, 2, 3}, {1, 2, 9, 3, 1}};

}  // namespace

TEST(QkMean, ForwardF32MatchesReference) {
  for (const QkSize& s : kSizes) {
    auto z = randn<double>(s.N() * s.C(), 1 + s.T), u = randn<double>(s.N() * s.C(), 2 + s.T);
    for (auto* v : {&z, &u})
      for (double& x : *v) x = double(float(x));
    std::vector<double> Qr, Kr;
    reference(s, z, u, Qr, Kr);
    std::vector<float> zf(z.begin(), z.end()), uf(u.begin(), u.end()), Q, K;
    run_forward(s, zf, uf, Q, K);
    expect_close(Q, Qr, kOpAbs, kOpRel, "Q");
    expect_close(K, Kr, kOpAbs, kOpRel, "K");
  }
}

TEST(QkMean, BackwardMatchesNumericalGradientAndOverwrites) {
  for (const QkSize& s : kSizes) {
    auto z = randn<double>(s.N() * s.C(), 3 + s.T), u = randn<double>(s.N() * s.C(), 4 + s.T);
    auto dQ = randn<double>(s.N() * s.Hq * s.d, 5), dK = randn<double>(s.N() * s.Hk * s.d, 6);
    auto loss = [&] {
      std::vector<double> Q, K;
      run_forward(s, z, u, Q, K);
      return dot(Q, dQ) + dot(K, dK);
    };
    // Garbage in the outputs must be overwritten.
    auto dz = randn<double>(s.N() * s.C(), 7), du = randn<double>(s.N() * s.C(), 8);
    ops::qk_mean_backward(
        Tensor(dz.data(), {s.B, s.T, s.C()}), Tensor(du.data(), {s.B, s.T, s.C()}),
        Tensor(dQ.data(), {s.B, s.T, s.Hq, s.d}), Tensor(dK.data(), {s.B, s.T, s.Hk, s.d}));
    expect_grad_close(dz, numerical_grad(loss, z.data(), z.size()), kGradRelDouble, "dz");
    expect_grad_close(du, numerical_grad(loss, u.data(), u.size()), kGradRelDouble, "du");
  }
}
