// moe dispatch (docs/model.md §5.5–5.6, §8.6): forward against a per-token double reference,
// backward against numerical gradients (choice fixed), skip class (outputs p·x), empty experts, odd
// sizes, dx +=, determinism.
#include <omp.h>

#include <array>
#include <cmath>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Legend as in src/ops/cpu/moe.cpp: N tokens, D width, E experts (class E = skip), F = 2H.
struct MoeCase {
  int64_t N, D, E, F;
  std::vector<double> x_ND, weight_N, w1_EFD, w2_EDH;
  std::vector<int32_t> choice_N;
  int64_t H() const { return F / 2; }
};

enum class Route { WithSkip, NoSkip, AllSkip };

MoeCase make_case(int64_t N, int64_t E, int64_t D, int64_t F, uint64_t seed,
                  Route route = Route::WithSkip) {
  MoeCase c;
  c.N = N, c.D = D, c.E = E, c.F = F;
  c.x_ND = randn<double>(N * D, seed);
  c.w1_EFD = randn<double>(E * F * D, seed + 1, 1.0 / std::sqrt(double(D)));
  c.w2_EDH = randn<double>(E * D * (F / 2), seed + 2, 1.0 / std::sqrt(double(F / 2)));
  CounterRng rng{seed + 3, 0};
  c.weight_N.resize(N);
  c.choice_N.resize(N);
  for (int64_t n = 0; n < N; ++n) {
    c.weight_N[n] = rng.uniform(2 * n);
    const uint64_t r = rng.bits(2 * n + 1);
    c.choice_N[n] = route == Route::AllSkip  ? int32_t(E)
                    : route == Route::NoSkip ? int32_t(r % E)
                                             : int32_t(r % (E + 1));
  }
  return c;
}

struct MoeOut {
  std::vector<double> out_ND, f_ND, gu_NF, act_NH;
};

// Scalar per-token reference in double. Skip rows of gu/act are left zero.
MoeOut moe_reference(const MoeCase& c) {
  const int64_t N = c.N, D = c.D, E = c.E, F = c.F, H = c.H();
  MoeOut r{std::vector<double>(N * D), std::vector<double>(N * D), std::vector<double>(N * F),
           std::vector<double>(N * H)};
  for (int64_t n = 0; n < N; ++n) {
    const int64_t e = c.choice_N[n];
    const double* x = &c.x_ND[n * D];
    double* f = &r.f_ND[n * D];
    if (e == E) {
      for (int64_t d = 0; d < D; ++d) f[d] = x[d];
    } else {
      double* gu = &r.gu_NF[n * F];
      double* act = &r.act_NH[n * H];
      for (int64_t j = 0; j < F; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += c.w1_EFD[(e * F + j) * D + d] * x[d];
        gu[j] = s;
      }
      for (int64_t j = 0; j < H; ++j) act[j] = gu[j] / (1 + std::exp(-gu[j])) * gu[H + j];
      for (int64_t d = 0; d < D; ++d) {
        double s = 0;
        for (int64_t j = 0; j < H; ++j) s += c.w2_EDH[(e * D + d) * H + j] * act[j];
        f[d] = s;
      }
    }
    for (int64_t d = 0; d < D; ++d) r.out_ND[n * D + d] = c.weight_N[n] * f[d];
  }
  return r;
}

template <class T>
std::vector<T> to(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// The grouping moe_forward saves: the tokens of class 0, 1, …, E (skip) in turn, each ascending;
// offsets[c] the start of class c, offsets[E + 1] = N.
void expect_grouping(const MoeCase& c, const std::vector<int32_t>& order,
                     const std::vector<int32_t>& offsets) {
  std::vector<int32_t> want_order, want_offsets(size_t(c.E + 2), 0);
  for (int64_t e = 0; e <= c.E; ++e) {
    want_offsets[size_t(e)] = int32_t(want_order.size());
    for (int64_t n = 0; n < c.N; ++n)
      if (c.choice_N[size_t(n)] == e) want_order.push_back(int32_t(n));
  }
  want_offsets[size_t(c.E + 1)] = int32_t(c.N);
  EXPECT_EQ(order, want_order);
  EXPECT_EQ(offsets, want_offsets);
}

// The op in dtype T on the case's (double) data.
template <class T>
MoeOut run_forward(const MoeCase& c) {
  const int64_t N = c.N, D = c.D, E = c.E, F = c.F, H = c.H();
  auto x = to<T>(c.x_ND), w = to<T>(c.weight_N), w1 = to<T>(c.w1_EFD), w2 = to<T>(c.w2_EDH);
  std::vector<T> out(N * D, T(7)), f(N * D, T(7)), gu(N * F, T(7)), act(N * H, T(7));
  auto choice = c.choice_N;
  std::vector<int32_t> order(N, -1), offsets(E + 2, -1);
  ops::moe_forward(Tensor(out.data(), {N, D}), Tensor(f.data(), {N, D}), Tensor(gu.data(), {N, F}),
                   Tensor(act.data(), {N, H}), Tensor(x.data(), {N, D}), Tensor(choice.data(), {N}),
                   Tensor(w.data(), {N}), Tensor(w1.data(), {E, F, D}),
                   Tensor(w2.data(), {E, D, H}), Tensor(order.data(), {N}),
                   Tensor(offsets.data(), {E + 2}));
  expect_grouping(c, order, offsets);
  return {to_double(out), to_double(f), to_double(gu), to_double(act)};
}

struct MoeGrads {
  std::vector<double> dx_ND, dw1_EFD, dw2_EDH, dweight_N;
};

// Forward then backward in dtype T. dx/dw1/dw2 start from the given prefills (they accumulate);
// dweight starts as garbage (it is overwritten).
// reroute_token0: token 0 changes class between the two (the backward must refuse that).
template <class T>
MoeGrads run_backward(const MoeCase& c, const std::vector<double>& dout_ND, const MoeGrads& start,
                      bool reroute_token0 = false) {
  const int64_t N = c.N, D = c.D, E = c.E, F = c.F, H = c.H();
  auto x = to<T>(c.x_ND), w = to<T>(c.weight_N), w1 = to<T>(c.w1_EFD), w2 = to<T>(c.w2_EDH);
  auto dout = to<T>(dout_ND);
  std::vector<T> out(N * D), f(N * D), gu(N * F), act(N * H);
  auto choice = c.choice_N;
  std::vector<int32_t> order(N), offsets(E + 2);
  ops::moe_forward(Tensor(out.data(), {N, D}), Tensor(f.data(), {N, D}), Tensor(gu.data(), {N, F}),
                   Tensor(act.data(), {N, H}), Tensor(x.data(), {N, D}), Tensor(choice.data(), {N}),
                   Tensor(w.data(), {N}), Tensor(w1.data(), {E, F, D}),
                   Tensor(w2.data(), {E, D, H}), Tensor(order.data(), {N}),
                   Tensor(offsets.data(), {E + 2}));
  if (reroute_token0) choice[0] = (choice[0] + 1) % int32_t(E + 1);
  auto dx = to<T>(start.dx_ND), dw1 = to<T>(start.dw1_EFD), dw2 = to<T>(start.dw2_EDH);
  std::vector<T> dweight(N, T(-99));
  ops::moe_backward(
      Tensor(dx.data(), {N, D}), Tensor(dw1.data(), {E, F, D}), Tensor(dw2.data(), {E, D, H}),
      Tensor(dweight.data(), {N}), Tensor(dout.data(), {N, D}), Tensor(x.data(), {N, D}),
      Tensor(choice.data(), {N}), Tensor(w.data(), {N}), Tensor(w1.data(), {E, F, D}),
      Tensor(w2.data(), {E, D, H}), Tensor(f.data(), {N, D}), Tensor(gu.data(), {N, F}),
      Tensor(act.data(), {N, H}), Tensor(order.data(), {N}), Tensor(offsets.data(), {E + 2}));
  return {to_double(dx), to_double(dw1), to_double(dw2), to_double(dweight)};
}

MoeGrads zero_grads(const MoeCase& c) {
  return {std::vector<double>(c.N * c.D),
          std::vector<double>(c.w1_EFD.size()),
          std::vector<double>(c.w2_EDH.size()),
          {}};
}

// Rows of a [N,W] buffer that belong to real experts (skip rows of gu/act are unspecified).
std::vector<double> expert_rows(const std::vector<double>& v_NW, const MoeCase& c, int64_t W) {
  std::vector<double> rows;
  for (int64_t n = 0; n < c.N; ++n)
    if (c.choice_N[n] != c.E) rows.insert(rows.end(), &v_NW[n * W], &v_NW[n * W] + W);
  return rows;
}

void expect_forward_close(const MoeOut& got, const MoeOut& ref, const MoeCase& c, double abs,
                          double rel) {
  expect_close(got.out_ND, ref.out_ND, abs, rel, "out");
  expect_close(got.f_ND, ref.f_ND, abs, rel, "f");
  expect_close(expert_rows(got.gu_NF, c, c.F), expert_rows(ref.gu_NF, c, c.F), abs, rel, "gu");
  expect_close(expert_rows(got.act_NH, c, c.H()), expert_rows(ref.act_NH, c, c.H()), abs, rel,
               "act");
}

}  // namespace

TEST(Moe, ForwardMatchesReferenceOnOddSizes) {
  uint64_t seed = 100;
  for (int64_t N : {1, 7, 33, 257})
    for (int64_t E : {1, 2, 5})
      for (auto [D, F] : {std::pair<int64_t, int64_t>{7, 10}, {33, 18}})
        for (Route route : {Route::WithSkip, Route::NoSkip}) {
          SCOPED_TRACE(testing::Message() << "N=" << N << " E=" << E << " D=" << D << " F=" << F
                                          << " skip=" << (route == Route::WithSkip));
          auto c = make_case(N, E, D, F, seed += 10, route);
          auto ref = moe_reference(c);
          expect_forward_close(run_forward<float>(c), ref, c, kOpAbs, kOpRel);
          expect_forward_close(run_forward<double>(c), ref, c, 1e-14, 1e-12);
        }
}

// The experts' f32 SwiGLU is the decoder's silu_mul, bit for bit (both are ops/cpu/swiglu.h), at a
// width with a SIMD body and a tail (H = 37).
TEST(Moe, ExpertActivationIsTheDecodersSiluMul) {
  auto c = make_case(65, 3, 16, 74, 900);
  const auto got = run_forward<float>(c);
  const int64_t F = c.F, H = c.H();
  for (int64_t n = 0; n < c.N; ++n) {
    if (c.choice_N[n] == c.E) continue;
    std::vector<float> gu(&got.gu_NF[n * F], &got.gu_NF[n * F] + F),
        act(static_cast<size_t>(H), 0.0f);
    ops::silu_mul(Tensor(act.data(), {1, H}), Tensor(gu.data(), {1, F}));
    for (int64_t j = 0; j < H; ++j)
      ASSERT_EQ(float(got.act_NH[n * H + j]), act[j]) << n << " " << j;
  }
}

TEST(Moe, BackwardMatchesNumericalGradient) {
  for (Route route : {Route::WithSkip, Route::NoSkip}) {
    SCOPED_TRACE(route == Route::WithSkip ? "with skip" : "no skip");
    auto c = make_case(13, 3, 5, 8, 7, route);
    const int64_t N = c.N, D = c.D, E = c.E, F = c.F, H = c.H();
    auto dout = randn<double>(N * D, 8);
    // Prefilled accumulators: dx, dw1, dw2 must be added to, not overwritten.
    MoeGrads start{
        randn<double>(N * D, 9), randn<double>(E * F * D, 10), randn<double>(E * D * H, 11), {}};
    auto got = run_backward<double>(c, dout, start);
    for (size_t i = 0; i < got.dx_ND.size(); ++i) got.dx_ND[i] -= start.dx_ND[i];
    for (size_t i = 0; i < got.dw1_EFD.size(); ++i) got.dw1_EFD[i] -= start.dw1_EFD[i];
    for (size_t i = 0; i < got.dw2_EDH.size(); ++i) got.dw2_EDH[i] -= start.dw2_EDH[i];

    auto loss = [&] { return dot(run_forward<double>(c).out_ND, dout); };
    expect_grad_close(got.dx_ND, numerical_grad(loss, c.x_ND.data(), c.x_ND.size()), kGradRelDouble,
                      "dx");
    expect_grad_close(got.dw1_EFD, numerical_grad(loss, c.w1_EFD.data(), c.w1_EFD.size()),
                      kGradRelDouble, "dw1");
    expect_grad_close(got.dw2_EDH, numerical_grad(loss, c.w2_EDH.data(), c.w2_EDH.size()),
                      kGradRelDouble, "dw2");
    expect_grad_close(got.dweight_N, numerical_grad(loss, c.weight_N.data(), c.weight_N.size()),
                      kGradRelDouble, "dweight");
  }
}

TEST(Moe, BackwardF32MatchesF64) {
  for (int64_t N : {1, 7, 257}) {
    auto c = make_case(N, 5, 33, 18, 200 + N);
    auto dout = randn<double>(N * c.D, 300 + N);
    MoeGrads start = zero_grads(c);
    start.dx_ND = randn<double>(N * c.D, 400 + N);
    auto ref = run_backward<double>(c, dout, start);
    auto got = run_backward<float>(c, dout, start);
    expect_close(got.dx_ND, ref.dx_ND, kOpAbs, kOpRel, "dx f32");
    expect_close(got.dweight_N, ref.dweight_N, kOpAbs, kOpRel, "dweight f32");
    // Weight gradients sum over up to N tokens: compare in relative L2 (float backward row of
    // the tolerance table).
    EXPECT_LE(rel_l2(got.dw1_EFD.data(), ref.dw1_EFD.data(), ref.dw1_EFD.size()), kGradRelFloat);
    EXPECT_LE(rel_l2(got.dw2_EDH.data(), ref.dw2_EDH.data(), ref.dw2_EDH.size()), kGradRelFloat);
  }
}

TEST(Moe, ExpertsWithoutTokensGetExactlyZeroGradient) {
  auto c = make_case(33, 5, 7, 10, 500);
  for (int64_t n = 0; n < c.N; ++n) c.choice_N[n] = std::array<int32_t, 3>{0, 2, 5}[n % 3];
  expect_forward_close(run_forward<float>(c), moe_reference(c), c, kOpAbs, kOpRel);
  auto dout = randn<double>(c.N * c.D, 501);
  auto g = run_backward<float>(c, dout, zero_grads(c));
  const int64_t FD = c.F * c.D, DH = c.D * c.H();
  for (int64_t e = 0; e < c.E; ++e) {
    double sum1 = 0, sum2 = 0;
    for (int64_t i = 0; i < FD; ++i) sum1 += std::fabs(g.dw1_EFD[e * FD + i]);
    for (int64_t i = 0; i < DH; ++i) sum2 += std::fabs(g.dw2_EDH[e * DH + i]);
    if (e == 0 || e == 2) {
      EXPECT_GT(sum1, 0) << "expert " << e;
      EXPECT_GT(sum2, 0) << "expert " << e;
    } else {
      EXPECT_EQ(sum1, 0) << "expert " << e;
      EXPECT_EQ(sum2, 0) << "expert " << e;
    }
  }
}

TEST(Moe, AllTokensSkip) {
  auto c = make_case(33, 2, 7, 10, 600, Route::AllSkip);
  auto fw = run_forward<float>(c);
  auto dout = randn<double>(c.N * c.D, 601);
  MoeGrads start = zero_grads(c);
  start.dx_ND = randn<double>(c.N * c.D, 602);
  auto g = run_backward<float>(c, dout, start);
  for (int64_t n = 0; n < c.N; ++n) {
    const float w = float(c.weight_N[n]);
    double dw_ref = 0;
    for (int64_t d = 0; d < c.D; ++d) {
      const int64_t i = n * c.D + d;
      const float x = float(c.x_ND[i]), dy = float(dout[i]);
      ASSERT_EQ(fw.f_ND[i], x);                               // f = x (skip class)
      ASSERT_EQ(fw.out_ND[i], w * x);                         // out = p_skip · x, never 0
      ASSERT_EQ(g.dx_ND[i], float(start.dx_ND[i]) + w * dy);  // dx += w · dout
      dw_ref += double(dy) * double(x);
    }
    EXPECT_NEAR(g.dweight_N[n], dw_ref, kOpAbs + kOpRel * std::fabs(dw_ref));
  }
  for (double v : g.dw1_EFD) ASSERT_EQ(v, 0);
  for (double v : g.dw2_EDH) ASSERT_EQ(v, 0);
}

// The backward takes the forward's grouping; the CPU checks it against the choices it is given
// (choices changed since the forward, or offsets of other choices, are a bug of the caller).
TEST(Moe, BackwardRefusesAGroupingOfOtherChoices) {
  const auto c = make_case(9, 4, 3, 6, 700, Route::WithSkip);
  const auto dout = randn<double>(c.N * c.D, 701);
  EXPECT_DEATH(run_backward<float>(c, dout, zero_grads(c), /*reroute_token0=*/true),
               "not the forward's grouping");
}

TEST(Moe, DeterministicAcrossRunsAndThreadCounts) {
  // Large enough that the elementwise loops run in parallel (the op keeps small ones serial).
  auto c = make_case(2053, 2, 65, 130, 700);
  auto dout = randn<double>(c.N * c.D, 701);
  auto f1 = run_forward<float>(c);
  expect_forward_close(f1, moe_reference(c), c, kOpAbs, kOpRel);
  auto g1 = run_backward<float>(c, dout, zero_grads(c));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(threads > 1 ? 1 : 2);
  auto f2 = run_forward<float>(c);
  auto g2 = run_backward<float>(c, dout, zero_grads(c));
  omp_set_num_threads(threads);
  EXPECT_EQ(f1.out_ND, f2.out_ND);
  EXPECT_EQ(f1.gu_NF, f2.gu_NF);
  EXPECT_EQ(g1.dx_ND, g2.dx_ND);
  EXPECT_EQ(g1.dw1_EFD, g2.dw1_EFD);
  EXPECT_EQ(g1.dw2_EDH, g2.dw2_EDH);
  EXPECT_EQ(g1.dweight_N, g2.dweight_N);
}
