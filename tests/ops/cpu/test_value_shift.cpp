// value_shift: forward against the rule of docs/model.md §4.4 (concatenate current/previous halves,
// then split into heads, including heads that straddle the halves); backward against numerical
// gradients.
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct ShiftSize {
  int64_t B, T, Hk, d;
  int64_t W() const { return Hk * d; }
};

// v_t = [p_t[:half] ; p_{t−1}[half:]] with p_{−1} = 0, written per head entry.
std::vector<double> reference(const ShiftSize& s, const std::vector<double>& p) {
  const int64_t W = s.W(), half = W / 2;
  std::vector<double> v(s.B * s.T * W);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t g = 0; g < s.Hk; ++g)
        for (int64_t i = 0; i < s.d; ++i) {
          const int64_t e = g * s.d + i;  // position in the concatenated vector
          double val;
          if (e < half)
            val = p[(b * s.T + t) * W + e];
          else
            val = t == 0 ? 0.0 : p[(b * s.T + t - 1) * W + e];
          v[(b * s.T + t) * W + e] = val;
        }
  return v;
}

template <class S>
std::vector<S> run_forward(const ShiftSize& s, std::vector<S>& p) {
  std::vector<S> v(p.size(), S(-7));
  ops::value_shift_forward(Tensor(v.data(), {s.B, s.T, s.Hk, s.d}),
                           Tensor(p.data(), {s.B, s.T, s.W()}));
  return v;
}

// Hk = 3 with d = 6 or 2 puts head 1 across the two halves.
const ShiftSize kSizes[] = {{1, 1, 2, 8}, {2, 2, 3, 6}, {3, 7, 2, 8}, {1, 33, 3, 2}, {2, 7, 1, 6}};

}  // namespace

TEST(ValueShift, ForwardMatchesReference) {
  for (const ShiftSize& s : kSizes) {
    auto p = randn<double>(s.B * s.T * s.W(), 1 + s.T);
    std::vector<float> pf(p.begin(), p.end());
    for (double& x : p) x = double(float(x));
    const auto ref = reference(s, p);  // a pure copy: must be exact
    EXPECT_EQ(run_forward(s, p), ref);
    const auto vf = run_forward(s, pf);
    EXPECT_EQ(std::vector<double>(vf.begin(), vf.end()), ref);
  }
}

TEST(ValueShift, BackwardMatchesNumericalGradientAndOverwrites) {
  for (const ShiftSize& s : kSizes) {
    auto p = randn<double>(s.B * s.T * s.W(), 50 + s.T), dv = randn<double>(p.size(), 3);
    auto loss = [&] { return dot(run_forward(s, p), dv); };
    auto dp = randn<double>(p.size(), 4);  // garbage, must be overwritten
    ops::value_shift_backward(Tensor(dp.data(), {s.B, s.T, s.W()}),
                              Tensor(dv.data(), {s.B, s.T, s.Hk, s.d}));
    expect_grad_close(dp, numerical_grad(loss, p.data(), p.size()), kGradRelDouble, "dp");
  }
}
