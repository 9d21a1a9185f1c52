// lm_head_xent (the fused tied LM head + cross-entropy): forward and backward against a double
// reference on sizes that are no multiple of the tiles (V = 1, 7, 1000, 1025, 2500, 4099) with
// ignored rows; numerical gradients of dx and dw in double; agreement with the unfused path (linear
// + xent); the same bits for 1, 2 and 3 threads; all rows ignored; undefined dx or dw.
#include <omp.h>

#include <cmath>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Targets in [0, V) with every third row ignored (−1), or all of them when all_ignored.
std::vector<int32_t> make_targets(int64_t N, int64_t V, uint64_t seed, bool all_ignored = false) {
  CounterRng rng{seed, 0};
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n)
    t[n] = all_ignored || n % 3 == 2 ? -1 : int32_t(rng.bits(n) % uint64_t(V));
  return t;
}

struct Problem {
  int64_t N, D, V;
  std::vector<double> x, w;  // exactly representable in f32
  std::vector<int32_t> target;
};

Problem make_problem(int64_t N, int64_t D, int64_t V, uint64_t seed, bool all_ignored = false) {
  return {N,
          D,
          V,
          cast<double>(randn<float>(N * D, seed, 1.0)),
          cast<double>(randn<float>(V * D, seed + 1, 2.0 / std::sqrt(double(D)))),
          make_targets(N, V, seed + 2, all_ignored)};
}

template <class T>
struct Out {
  std::vector<T> loss, lse, dx, dw;
};

// The double reference: logits, then xent, then the two products.
Out<double> reference(const Problem& p, double scale) {
  const int64_t N = p.N, D = p.D, V = p.V;
  Out<double> r{std::vector<double>(N), std::vector<double>(N), std::vector<double>(N * D),
                std::vector<double>(V * D)};
  std::vector<double> l(V);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t v = 0; v < V; ++v) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += p.x[n * D + d] * p.w[v * D + d];
      l[v] = s;
    }
    double m = l[0], s = 0;
    for (int64_t v = 1; v < V; ++v) m = std::max(m, l[v]);
    for (int64_t v = 0; v < V; ++v) s += std::exp(l[v] - m);
    r.lse[n] = m + std::log(s);
    const int64_t t = p.target[n];
    if (t < 0) continue;
    r.loss[n] = r.lse[n] - l[t];
    for (int64_t v = 0; v < V; ++v) {
      const double g = scale * (std::exp(l[v] - r.lse[n]) - (v == t ? 1.0 : 0.0));
      for (int64_t d = 0; d < D; ++d) {
        r.dx[n * D + d] += g * p.w[v * D + d];
        r.dw[v * D + d] += g * p.x[n * D + d];
      }
    }
  }
  return r;
}

// The fused op in T: forward, then backward into dx (garbage first: it is overwritten) and dw
// (prefilled with dw0, which is subtracted afterwards: it must accumulate). want_dx / want_dw
// false: passed undefined.
template <class T>
Out<T> run_fused(const Problem& p, double scale, bool want_dx = true, bool want_dw = true,
                 int threads = 0) {
  const int64_t N = p.N, D = p.D, V = p.V;
  std::vector<T> x = cast<T>(p.x), w = cast<T>(p.w);
  std::vector<int32_t> target = p.target;
  Out<T> o{std::vector<T>(N, T(-3)), std::vector<T>(N, T(-3)), std::vector<T>(N * D, T(7)),
           std::vector<T>(V * D)};
  // (Small against the gradients, so that subtracting it back costs no precision.)
  const std::vector<T> dw0 = cast<T>(randn<float>(V * D, 99, 1e-3 * scale));
  o.dw = dw0;
  const int keep = omp_get_max_threads();
  if (threads) omp_set_num_threads(threads);
  const Tensor tx(x.data(), {N, D}), tw(w.data(), {V, D}), tt(target.data(), {N});
  ops::lm_head_xent_forward(Tensor(o.loss.data(), {N}), Tensor(o.lse.data(), {N}), tx, tw, tt);
  ops::lm_head_xent_backward(want_dx ? Tensor(o.dx.data(), {N, D}) : Tensor{},
                             want_dw ? Tensor(o.dw.data(), {V, D}) : Tensor{}, tx, tw,
                             Tensor(o.lse.data(), {N}), tt, scale);
  if (threads) omp_set_num_threads(keep);
  for (size_t i = 0; i < o.dw.size(); ++i) o.dw[i] -= dw0[i];
  return o;
}

// The one-pass op (lm_head_xent_forward_backward) in T, with the same conventions as run_fused.
template <class T>
Out<T> run_one_pass(const Problem& p, double scale, int threads = 0) {
  const int64_t N = p.N, D = p.D, V = p.V;
  std::vector<T> x = cast<T>(p.x), w = cast<T>(p.w);
  std::vector<int32_t> target = p.target;
  Out<T> o{std::vector<T>(N, T(-3)), std::vector<T>(N, T(-3)), std::vector<T>(N * D, T(7)),
           std::vector<T>(V * D)};
  const std::vector<T> dw0 = cast<T>(randn<float>(V * D, 99, 1e-3 * scale));
  o.dw = dw0;
  const int keep = omp_get_max_threads();
  if (threads) omp_set_num_threads(threads);
  ops::lm_head_xent_forward_backward(Tensor(o.loss.data(), {N}), Tensor(o.lse.data(), {N}),
                                     Tensor(o.dx.data(), {N, D}), Tensor(o.dw.data(), {V, D}),
                                     Tensor(x.data(), {N, D}), Tensor(w.data(), {V, D}),
                                     Tensor(target.data(), {N}), scale);
  if (threads) omp_set_num_threads(keep);
  for (size_t i = 0; i < o.dw.size(); ++i) o.dw[i] -= dw0[i];
  return o;
}

// Today's unfused path in f32: linear_forward into [N,V], xent_forward, xent_backward in place,
// linear_backward.
Out<float> run_unfused(const Problem& p, double scale) {
  const int64_t N = p.N, D = p.D, V = p.V;
  std::vector<float> x = cast<float>(p.x), w = cast<float>(p.w), logits(N * V);
  std::vector<int32_t> target = p.target;
  Out<float> o{std::vector<float>(N), std::vector<float>(N), std::vector<float>(N * D),
               std::vector<float>(V * D)};
  const Tensor tx(x.data(), {N, D}), tw(w.data(), {V, D}), tl(logits.data(), {N, V});
  const Tensor tt(target.data(), {N}), lse(o.lse.data(), {N});
  ops::linear_forward(tl, tx, tw, {});
  ops::xent_forward(Tensor(o.loss.data(), {N}), lse, tl, tt);
  ops::xent_backward(tl, tl, lse, tt, scale);
  ops::linear_backward(Tensor(o.dx.data(), {N, D}), Tensor(o.dw.data(), {V, D}), {}, tl, tx, tw);
  return o;
}

// An f32 result against the double reference: loss, lse, and the gradients (they carry the
// factor `scale`, so the absolute tolerance does too); ignored rows give loss 0 and dx 0.
void expect_matches_reference(const Problem& p, const Out<float>& out, const Out<double>& ref,
                              double scale) {
  const int64_t N = p.N, D = p.D;
  const std::string at =
      " N=" + std::to_string(N) + " D=" + std::to_string(D) + " V=" + std::to_string(p.V);
  expect_close(out.loss, ref.loss, kOpAbs, kOpRel, ("loss" + at).c_str());
  expect_close(out.lse, ref.lse, kOpAbs, kOpRel, ("lse" + at).c_str());
  expect_close(out.dx, ref.dx, kOpAbs * scale, kOpRel, ("dx" + at).c_str());
  expect_close(out.dw, ref.dw, kOpAbs * scale, kOpRel, ("dw" + at).c_str());
  for (int64_t n = 0; n < N; ++n)
    if (p.target[n] < 0) {
      EXPECT_EQ(out.loss[n], 0.f) << "ignored row " << n << at;
      for (int64_t d = 0; d < D; ++d) EXPECT_EQ(out.dx[n * D + d], 0.f) << "ignored row";
    }
}

// An f64 result against the double reference (only the summation order differs).
void expect_f64_matches_reference(const Out<double>& out, const Out<double>& ref) {
  expect_close(out.loss, ref.loss, 1e-12, 1e-12, "loss f64");
  expect_close(out.lse, ref.lse, 1e-12, 1e-12, "lse f64");
  expect_close(out.dx, ref.dx, 1e-13, 1e-10, "dx f64");
  expect_close(out.dw, ref.dw, 1e-13, 1e-10, "dw f64");
}

}  // namespace

TEST(LmHeadXent, F32MatchesReferenceOnOddSizes) {
  // (V = 1025, 2500 and 4099 take vocabulary chunks of 128, 256 and 512.)
  for (int64_t V : {1, 7, 1000, 1025, 2500, 4099})
    for (int64_t N : {1, 7, 257})
      for (int64_t D : {1, 7, 33}) {
        const Problem p = make_problem(N, D, V, uint64_t(N * 131 + D * 7 + V));
        const double scale = 1.0 / double(N);
        const auto ref = reference(p, scale);
        const auto out = run_fused<float>(p, scale);
        expect_matches_reference(p, out, ref, scale);
      }
}

TEST(LmHeadXent, F64MatchesReference) {
  const Problem p = make_problem(37, 9, 1025, 11);
  const auto ref = reference(p, 0.25);
  const auto out = run_fused<double>(p, 0.25);
  expect_f64_matches_reference(out, ref);
}

TEST(LmHeadXent, BackwardMatchesNumericalGradient) {
  for (int64_t V : {1, 11, 300}) {
    Problem p = make_problem(7, 5, V, 21);
    const double scale = 0.37;
    const int64_t N = p.N, D = p.D;
    auto loss = [&] {
      std::vector<double> l(N), lse(N);
      ops::lm_head_xent_forward(Tensor(l.data(), {N}), Tensor(lse.data(), {N}),
                                Tensor(p.x.data(), {N, D}), Tensor(p.w.data(), {V, D}),
                                Tensor(p.target.data(), {N}));
      double s = 0;
      for (double v : l) s += scale * v;
      return s;
    };
    const auto out = run_fused<double>(p, scale);
    expect_grad_close(out.dx, numerical_grad(loss, p.x.data(), p.x.size()), kGradRelDouble, "dx");
    expect_grad_close(out.dw, numerical_grad(loss, p.w.data(), p.w.size()), kGradRelDouble, "dw");
  }
}

TEST(LmHeadXent, MatchesUnfusedPath) {
  // 300 rows × 1025 entries: several row blocks and vocabulary chunks, above the threading
  // threshold, with partial last tiles.
  const Problem p = make_problem(300, 64, 1025, 31);
  const double scale = 1.0 / 200;
  const auto fused = run_fused<float>(p, scale);
  const auto unfused = run_unfused(p, scale);
  // Tighter than against the double reference (kOpAbs·scale): the two differ by f32 rounding
  // (the order of the sums over rows and vocabulary, f32 against f64 exponentials) only.
  expect_close(fused.loss, unfused.loss, 2e-6, 1e-6, "loss fused vs unfused");
  expect_close(fused.lse, unfused.lse, 2e-6, 1e-6, "lse fused vs unfused");
  expect_close(fused.dx, unfused.dx, 3e-6 * scale, 1e-5, "dx fused vs unfused");
  expect_close(fused.dw, unfused.dw, 3e-6 * scale, 1e-5, "dw fused vs unfused");
}

TEST(LmHeadXent, SameBitsForAnyThreadCount) {
  const Problem p = make_problem(600, 32, 1300, 41);
  const auto one = run_fused<float>(p, 0.01, true, true, 1);
  for (int threads : {2, 3}) {
    const auto many = run_fused<float>(p, 0.01, true, true, threads);
    EXPECT_EQ(one.loss, many.loss) << threads << " threads";
    EXPECT_EQ(one.lse, many.lse) << threads << " threads";
    EXPECT_EQ(one.dx, many.dx) << threads << " threads";
    EXPECT_EQ(one.dw, many.dw) << threads << " threads";
  }
}

TEST(LmHeadXent, AllRowsIgnored) {
  const Problem p = make_problem(300, 16, 1025, 51, /*all_ignored=*/true);
  const auto ref = reference(p, 0.5);
  const auto out = run_fused<float>(p, 0.5);
  expect_close(out.lse, ref.lse, kOpAbs, kOpRel, "lse of ignored rows");
  for (float v : out.loss) EXPECT_EQ(v, 0.f);
  for (float v : out.dx) EXPECT_EQ(v, 0.f);
  for (float v : out.dw) EXPECT_EQ(v, 0.f);  // the prefill is untouched
}

TEST(LmHeadXent, UndefinedGradientsAreSkipped) {
  const Problem p = make_problem(130, 8, 600, 61);
  const auto both = run_fused<float>(p, 0.1);
  const auto only_dx = run_fused<float>(p, 0.1, true, false);
  const auto only_dw = run_fused<float>(p, 0.1, false, true);
  EXPECT_EQ(both.dx, only_dx.dx);
  EXPECT_EQ(both.dw, only_dw.dw);
  for (float v : only_dx.dw) EXPECT_EQ(v, 0.f);  // dw was not passed: its prefill stays
}

TEST(LmHeadXentDeathTest, TargetOutOfRangeAsserts) {
  Problem p = make_problem(3, 4, 5, 71);
  p.target[1] = 5;
  std::vector<float> x = cast<float>(p.x), w = cast<float>(p.w), loss(3), lse(3);
  EXPECT_DEATH(ops::lm_head_xent_forward(Tensor(loss.data(), {3}), Tensor(lse.data(), {3}),
                                         Tensor(x.data(), {3, 4}), Tensor(w.data(), {5, 4}),
                                         Tensor(p.target.data(), {3})),
               "target\\[1\\] = 5");
}

// ---- lm_head_xent_forward_backward (one logits product per row block). Its row blocks have
// 16–256 rows (256 for V ≤ 8192, 16 from V = 131072 on) and its dw chunks 128–512 entries.

TEST(LmHeadXentOnePass, F32MatchesReferenceOnOddSizes) {
  // N = 257 and 300: a partial last row block of 256; V = 1025, 2500, 4099: partial last chunks.
  for (int64_t V : {1, 7, 1025, 2500, 4099})
    for (int64_t N : {1, 7, 257, 300})
      for (int64_t D : {1, 33}) {
        const Problem p = make_problem(N, D, V, uint64_t(N * 131 + D * 7 + V + 5));
        const double scale = 1.0 / double(N);
        const auto ref = reference(p, scale);
        const auto out = run_one_pass<float>(p, scale);
        expect_matches_reference(p, out, ref, scale);
      }
}

TEST(LmHeadXentOnePass, LargeVocabularySmallBlocks) {
  // V = 140000: blocks of 16 rows (2^21 / V < 16), so N = 41 has two full blocks and a partial one.
  const Problem p = make_problem(41, 3, 140000, 7);
  const double scale = 0.05;
  const auto ref = reference(p, scale);
  const auto out = run_one_pass<float>(p, scale);
  expect_close(out.loss, ref.loss, kOpAbs, kOpRel, "loss V=140000");
  expect_close(out.lse, ref.lse, kOpAbs, kOpRel, "lse V=140000");
  expect_close(out.dx, ref.dx, kOpAbs * scale, kOpRel, "dx V=140000");
  expect_close(out.dw, ref.dw, kOpAbs * scale, kOpRel, "dw V=140000");
}

TEST(LmHeadXentOnePass, F64MatchesReference) {
  const Problem p = make_problem(300, 9, 1025, 13);
  const auto ref = reference(p, 0.25);
  const auto out = run_one_pass<double>(p, 0.25);
  expect_f64_matches_reference(out, ref);
}

TEST(LmHeadXentOnePass, MatchesNumericalGradient) {
  for (int64_t V : {1, 11, 300}) {
    Problem p = make_problem(7, 5, V, 23);
    const double scale = 0.37;
    const int64_t N = p.N, D = p.D;
    std::vector<double> dx_scratch(N * D), dw_scratch(V * D);
    auto loss = [&] {  // the loss the op itself reports
      std::vector<double> l(N), lse(N);
      ops::lm_head_xent_forward_backward(
          Tensor(l.data(), {N}), Tensor(lse.data(), {N}), Tensor(dx_scratch.data(), {N, D}),
          Tensor(dw_scratch.data(), {V, D}), Tensor(p.x.data(), {N, D}), Tensor(p.w.data(), {V, D}),
          Tensor(p.target.data(), {N}), scale);
      double s = 0;
      for (double v : l) s += scale * v;
      return s;
    };
    const auto out = run_one_pass<double>(p, scale);
    expect_grad_close(out.dx, numerical_grad(loss, p.x.data(), p.x.size()), kGradRelDouble, "dx");
    expect_grad_close(out.dw, numerical_grad(loss, p.w.data(), p.w.size()), kGradRelDouble, "dw");
  }
}

TEST(LmHeadXentOnePass, MatchesForwardThenBackward) {
  // Several row blocks and chunks, above the threading threshold, partial last block and chunk.
  for (int64_t V : {1025, 8192}) {
    const Problem p = make_problem(600, 64, V, 33);
    const double scale = 1.0 / 400;
    const auto one = run_one_pass<float>(p, scale);
    const auto two = run_fused<float>(p, scale);
    // f32 rounding only: the two-pass against the online log-sum-exp, exp(ℓ − m)/Σ against
    // exp(ℓ − lse), the order of the sums over rows of dw.
    expect_close(one.loss, two.loss, 2e-6, 1e-6, "loss one pass vs forward + backward");
    expect_close(one.lse, two.lse, 2e-6, 1e-6, "lse one pass vs forward + backward");
    expect_close(one.dx, two.dx, 3e-6 * scale, 1e-5, "dx one pass vs forward + backward");
    expect_close(one.dw, two.dw, 3e-6 * scale, 1e-5, "dw one pass vs forward + backward");
  }
}

TEST(LmHeadXentOnePass, SameBitsForAnyThreadCount) {
  const Problem p = make_problem(1100, 32, 1300, 43);  // 5 blocks, the last of 76 rows
  const auto one = run_one_pass<float>(p, 0.01, 1);
  for (int threads : {2, 3}) {
    const auto many = run_one_pass<float>(p, 0.01, threads);
    EXPECT_EQ(one.loss, many.loss) << threads << " threads";
    EXPECT_EQ(one.lse, many.lse) << threads << " threads";
    EXPECT_EQ(one.dx, many.dx) << threads << " threads";
    EXPECT_EQ(one.dw, many.dw) << threads << " threads";
  }
}

TEST(LmHeadXentOnePass, IgnoredRowsAndBlocks) {
  // Rows 256…511 (the second block) all ignored: that block adds nothing to dw; the others do.
  Problem p = make_problem(700, 16, 1025, 53);
  for (int64_t n = 256; n < 512; ++n) p.target[size_t(n)] = -1;
  const auto ref = reference(p, 0.5);
  const auto out = run_one_pass<float>(p, 0.5);
  expect_close(out.lse, ref.lse, kOpAbs, kOpRel, "lse");
  expect_close(out.dw, ref.dw, kOpAbs * 0.5, kOpRel, "dw");
  for (int64_t n = 0; n < p.N; ++n)
    if (p.target[size_t(n)] < 0) {
      EXPECT_EQ(out.loss[n], 0.f);
      for (int64_t d = 0; d < p.D; ++d) EXPECT_EQ(out.dx[n * p.D + d], 0.f);
    }
  const Problem none = make_problem(300, 16, 1025, 51, /*all_ignored=*/true);
  const auto zero = run_one_pass<float>(none, 0.5);
  expect_close(zero.lse, reference(none, 0.5).lse, kOpAbs, kOpRel, "lse of ignored rows");
  for (float v : zero.loss) EXPECT_EQ(v, 0.f);
  for (float v : zero.dx) EXPECT_EQ(v, 0.f);
  for (float v : zero.dw) EXPECT_EQ(v, 0.f);  // the prefill is untouched
}

TEST(LmHeadXentOnePass, AccumulatesIntoDw) {
  // Two calls on the same dw add up to twice one call (micro-batches sum), within rounding.
  const Problem p = make_problem(300, 8, 600, 63);
  const int64_t N = p.N, D = p.D, V = p.V;
  std::vector<float> x = cast<float>(p.x), w = cast<float>(p.w), loss(N), lse(N), dx(N * D);
  std::vector<float> dw1(V * D), dw2(V * D);
  std::vector<int32_t> target = p.target;
  auto call = [&](std::vector<float>& dw) {
    ops::lm_head_xent_forward_backward(Tensor(loss.data(), {N}), Tensor(lse.data(), {N}),
                                       Tensor(dx.data(), {N, D}), Tensor(dw.data(), {V, D}),
                                       Tensor(x.data(), {N, D}), Tensor(w.data(), {V, D}),
                                       Tensor(target.data(), {N}), 0.1);
  };
  call(dw1);
  call(dw2);
  call(dw2);
  for (float& v : dw1) v *= 2;
  expect_close(dw2, dw1, 1e-7, 1e-6, "dw after two calls");
}

TEST(LmHeadXentOnePassDeathTest, TargetOutOfRangeAsserts) {
  Problem p = make_problem(3, 4, 5, 73);
  p.target[2] = -2;
  std::vector<float> x = cast<float>(p.x), w = cast<float>(p.w), loss(3), lse(3), dx(12), dw(20);
  EXPECT_DEATH(ops::lm_head_xent_forward_backward(
                   Tensor(loss.data(), {3}), Tensor(lse.data(), {3}), Tensor(dx.data(), {3, 4}),
                   Tensor(dw.data(), {5, 4}), Tensor(x.data(), {3, 4}), Tensor(w.data(), {5, 4}),
                   Tensor(p.target.data(), {3}), 1.0),
               "target\\[2\\] = -2");
}
