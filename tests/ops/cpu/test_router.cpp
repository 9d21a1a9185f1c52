// router_select: softmax + biased top-1 (docs/model.md §5.3–5.5) against a double reference;
// tie-breaking, fp32 score arithmetic and bias semantics; backward against numerical gradients.
#include <cmath>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Routed {
  std::vector<double> probs, weight;
  std::vector<int32_t> choice;
};

// Double softmax per row. The choice compares p + bias in the dtype T under test: the probability
// is rounded to T and the bias added in T arithmetic, ties to the lowest index.
template <class T>
Routed router_reference(const std::vector<double>& logits, const std::vector<double>& bias,
                        int64_t N, int64_t K) {
  Routed r{std::vector<double>(N * K), std::vector<double>(N), std::vector<int32_t>(N)};
  for (int64_t n = 0; n < N; ++n) {
    const double* l = &logits[n * K];
    double max = l[0], sum = 0;
    for (int64_t e = 1; e < K; ++e) max = std::max(max, l[e]);
    for (int64_t e = 0; e < K; ++e) sum += std::exp(l[e] - max);
    for (int64_t e = 0; e < K; ++e) r.probs[n * K + e] = std::exp(l[e] - max) / sum;
    int32_t best = 0;
    for (int64_t e = 1; e < K; ++e) {
      T score = T(r.probs[n * K + e]) + T(bias[e]);
      T best_score = T(r.probs[n * K + best]) + T(bias[best]);
      if (score > best_score) best = int32_t(e);
    }
    r.choice[n] = best;
    r.weight[n] = r.probs[n * K + best];
  }
  return r;
}

// Runs the op in dtype T on double inputs; outputs converted back to double.
template <class T>
Routed run_router(const std::vector<double>& logits, const std::vector<double>& bias, int64_t N,
                  int64_t K) {
  std::vector<T> l(logits.begin(), logits.end()), b(bias.begin(), bias.end()), p(N * K), w(N);
  std::vector<int32_t> c(N, -1);
  ops::router_select_forward(Tensor(p.data(), {N, K}), Tensor(c.data(), {N}), Tensor(w.data(), {N}),
                             Tensor(l.data(), {N, K}), Tensor(b.data(), {K}));
  return {std::vector<double>(p.begin(), p.end()), std::vector<double>(w.begin(), w.end()), c};
}

}  // namespace

TEST(Router, ForwardMatchesReferenceOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t K : {1, 2, 5, 17}) {
      auto logits = randn<double>(N * K, 10 + K, 2.0);
      auto bias = randn<double>(K, 20 + K, 0.1);
      bias[K - 1] = -1;  // the skip class's stored bias, never updated
      auto ref32 = router_reference<float>(logits, bias, N, K);
      auto got32 = run_router<float>(logits, bias, N, K);
      expect_close(got32.probs, ref32.probs, kOpAbs, kOpRel, "probs f32");
      EXPECT_EQ(got32.choice, ref32.choice) << "f32 N=" << N << " K=" << K;
      for (int64_t n = 0; n < N; ++n)  // weight is exactly the stored probability of the choice
        ASSERT_EQ(got32.weight[n], got32.probs[n * K + got32.choice[n]]);

      auto ref64 = router_reference<double>(logits, bias, N, K);
      auto got64 = run_router<double>(logits, bias, N, K);
      expect_close(got64.probs, ref64.probs, 1e-15, 1e-13, "probs f64");
      expect_close(got64.weight, ref64.weight, 1e-15, 1e-13, "weight f64");
      EXPECT_EQ(got64.choice, ref64.choice) << "f64 N=" << N << " K=" << K;
    }
}

template <class T>
void check_ties() {
  const int64_t K = 4;
  // Row 0: all equal. Row 1: classes 1 and 3 tie on p. Row 2: equal p, classes 1 and 2 tie on
  // p + b.
  std::vector<double> logits = {0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0};
  auto r = run_router<T>(logits, {0, 0, 0, 0}, 3, K);
  EXPECT_EQ(r.choice[0], 0);
  EXPECT_EQ(r.choice[1], 1);
  r = run_router<T>(logits, {0, 0.25, 0.25, 0.125}, 3, K);
  EXPECT_EQ(r.choice[2], 1);
  // Different p, equal p + b: b₁ = p₀ − p₁ is exact in T (Sterbenz), so p₁ + b₁ == p₀ exactly.
  std::vector<double> row = {0.5, 0, 0.1, -2};  // p₀ > p₂ > p₁, all within 2× of p₀
  auto p = run_router<T>(row, {0, 0, 0, 0}, 1, K).probs;
  const double b1 = double(T(p[0]) - T(p[1]));
  ASSERT_EQ(T(T(p[1]) + T(b1)), T(p[0]));
  auto t = run_router<T>(row, {0, b1, 0, 0}, 1, K);
  EXPECT_EQ(t.choice[0], 0);
  EXPECT_EQ(t.weight[0], p[0]);
  // A tie between classes 1 and 2 (class 0 pushed down) keeps the lower one.
  const double b2 = double(T(p[0]) - T(p[2]));
  ASSERT_EQ(T(T(p[2]) + T(b2)), T(p[0]));
  t = run_router<T>(row, {-1, b1, b2, 0}, 1, K);
  EXPECT_EQ(t.choice[0], 1);
  EXPECT_EQ(t.weight[0], p[1]);
}

TEST(Router, TiesGoToLowestIndex) {
  check_ties<float>();
  check_ties<double>();
}

TEST(Router, F32ScoresUseFloatArithmetic) {
  // p = (½, ½) exactly. With b = (0, 2⁻³⁰), 0.5f + 2⁻³⁰ rounds to 0.5f in float (fp32 scores: a
  // tie, so class 0), while in double class 1 wins.
  std::vector<double> logits = {0.3, 0.3}, bias = {0, std::ldexp(1.0, -30)};
  EXPECT_EQ(run_router<float>(logits, bias, 1, 2).choice[0], 0);
  EXPECT_EQ(run_router<double>(logits, bias, 1, 2).choice[0], 1);
}

TEST(Router, BiasesSteerTheChoiceButNotTheWeight) {
  // p = (0.5, 0.3, 0.2) up to rounding; the bias on class 2 makes it win, weight stays p[2].
  std::vector<double> logits = {std::log(0.5), std::log(0.3), std::log(0.2)};
  for (auto run : {run_router<float>, run_router<double>}) {
    auto plain = run(logits, {0, 0, 0}, 1, 3);
    EXPECT_EQ(plain.choice[0], 0);
    auto steered = run(logits, {0, 0, 0.31}, 1, 3);
    EXPECT_EQ(steered.choice[0], 2);
    EXPECT_NEAR(steered.weight[0], 0.2, 1e-7);
    EXPECT_EQ(steered.weight[0], steered.probs[2]);
    EXPECT_EQ(steered.probs, plain.probs);
    // A large negative bias (the skip class's −1) keeps a dominant class from winning.
    auto skip = run({0, 0, 5}, {0, 0, -1}, 1, 3);
    EXPECT_EQ(skip.choice[0], 0);
  }
}

TEST(Router, BackwardMatchesNumericalGradient) {
  const int64_t N = 33, K = 6;  // K = 5 experts + skip
  auto logits = randn<double>(N * K, 31, 1.5);
  auto bias = randn<double>(K, 32, 0.05);
  bias[K - 1] = -1;
  auto dweight = randn<double>(N, 33);
  std::vector<double> probs(N * K), weight(N);
  std::vector<int32_t> choice(N);
  ops::router_select_forward(Tensor(probs.data(), {N, K}), Tensor(choice.data(), {N}),
                             Tensor(weight.data(), {N}), Tensor(logits.data(), {N, K}),
                             Tensor(bias.data(), {K}));
  const std::vector<int32_t> fixed = choice;
  // Loss Σ dweight·weight; the perturbation (1e-6) is far below every row's score margin, which
  // the forward re-checks through the choice.
  auto loss = [&] {
    std::vector<double> p(N * K), w(N);
    std::vector<int32_t> c(N);
    ops::router_select_forward(Tensor(p.data(), {N, K}), Tensor(c.data(), {N}),
                               Tensor(w.data(), {N}), Tensor(logits.data(), {N, K}),
                               Tensor(bias.data(), {K}));
    EXPECT_EQ(c, fixed) << "a perturbation flipped the argmax";
    return dot(w, dweight);
  };
  std::vector<double> dlogits(N * K, 123.0);  // overwritten
  ops::router_select_backward(Tensor(dlogits.data(), {N, K}), Tensor(dweight.data(), {N}),
                              Tensor(probs.data(), {N, K}), Tensor(choice.data(), {N}));
  expect_grad_close(dlogits, numerical_grad(loss, logits.data(), logits.size()), kGradRelDouble,
                    "dlogits");

  // F32 backward agrees with the double one.
  std::vector<float> pf(probs.begin(), probs.end()), dwf(dweight.begin(), dweight.end()),
      dlf(N * K);
  ops::router_select_backward(Tensor(dlf.data(), {N, K}), Tensor(dwf.data(), {N}),
                              Tensor(pf.data(), {N, K}), Tensor(choice.data(), {N}));
  expect_close(dlf, dlogits, kOpAbs, kOpRel, "dlogits f32");
}
