// eda: in-place forward against a double reference on odd sizes; backward (drprev +=, dgamma +=)
// against numerical gradients in double; f32 backward against a double reference.
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

TEST(Eda, ForwardF32MatchesReferenceOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t R : kOddSizes) {
      auto r = randn_f32(N * R, 1), g = randn_f32(R, 2, 0.5), rp = randn_f32(N * R, 3);
      std::vector<double> ref(N * R);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < R; ++j) ref[n * R + j] = r[n * R + j] + g[j] * rp[n * R + j];
      auto r32 = cast<float>(r), g32 = cast<float>(g), rp32 = cast<float>(rp);
      ops::eda_forward(Tensor(r32.data(), {N, R}), Tensor(g32.data(), {R}),
                       Tensor(rp32.data(), {N, R}));
      expect_close(r32, ref, kOpAbs, kOpRel, "eda f32");
    }
}

TEST(Eda, BackwardMatchesNumericalGradient) {
  const int64_t N = 7, R = 9;
  auto r = randn<double>(N * R, 4), g = randn<double>(R, 5, 0.5), rp = randn<double>(N * R, 6);
  auto dr = randn<double>(N * R, 7);
  auto loss = [&] {
    auto out = r;  // in place: work on a copy
    ops::eda_forward(Tensor(out.data(), {N, R}), Tensor(g.data(), {R}), Tensor(rp.data(), {N, R}));
    return dot(out, dr);
  };
  const auto drp0 = randn<double>(N * R, 8), dg0 = randn<double>(R, 9);  // += targets
  auto drp = drp0, dg = dg0;
  ops::eda_backward(Tensor(drp.data(), {N, R}), Tensor(dg.data(), {R}), Tensor(dr.data(), {N, R}),
                    Tensor(rp.data(), {N, R}), Tensor(g.data(), {R}));
  for (size_t i = 0; i < drp.size(); ++i) drp[i] -= drp0[i];
  for (size_t i = 0; i < dg.size(); ++i) dg[i] -= dg0[i];
  expect_grad_close(drp, numerical_grad(loss, rp.data(), rp.size()), kGradRelDouble, "drprev");
  expect_grad_close(dg, numerical_grad(loss, g.data(), g.size()), kGradRelDouble, "dgamma");
}

TEST(Eda, BackwardF32MatchesReferenceOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t R : kOddSizes) {
      auto dr = randn_f32(N * R, 10), g = randn_f32(R, 11, 0.5), rp = randn_f32(N * R, 12);
      auto drp = randn_f32(N * R, 13), dg = randn_f32(R, 14);
      auto drp_ref = drp, dg_ref = dg;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < R; ++j) {
          drp_ref[n * R + j] += g[j] * dr[n * R + j];
          dg_ref[j] += dr[n * R + j] * rp[n * R + j];
        }
      auto dr32 = cast<float>(dr), g32 = cast<float>(g), rp32 = cast<float>(rp);
      auto drp32 = cast<float>(drp), dg32 = cast<float>(dg);
      ops::eda_backward(Tensor(drp32.data(), {N, R}), Tensor(dg32.data(), {R}),
                        Tensor(dr32.data(), {N, R}), Tensor(rp32.data(), {N, R}),
                        Tensor(g32.data(), {R}));
      expect_close(drp32, drp_ref, kOpAbs, kOpRel, "drprev f32");
      expect_close(dg32, dg_ref, kOpAbs, kOpRel, "dgamma f32");
    }
}
