// Reductions, counting, scaling and the optimizer updates of ops.h against reference loops that
// spell out the arithmetic (double where the op says double, f32 where it says f32): the results
// must be bitwise equal, on the odd sizes and on sizes above the parallel thresholds with 1 and
// 3 threads (the fixed-block sums must not depend on the thread count).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Sizes around and above the 2^16-element sum block and the 2^15 parallel thresholds.
const std::vector<int64_t> kLarge = {(1 << 16) - 1, 1 << 16, 3 * (1 << 16) + 7};

std::vector<int64_t> all_sizes() {
  std::vector<int64_t> s = kOddSizes;
  s.insert(s.end(), kLarge.begin(), kLarge.end());
  return s;
}

// The block sum spelled out: blocks of 2^16 in order, then the partial sums in order. Within a
// block sum adds in order; sum_squares element i goes to lane i mod 8 (the tail to lane 0), the
// lanes then added in order.
double ref_block_sum(const std::vector<float>& x, bool squares) {
  const int64_t n = int64_t(x.size()), block = 1 << 16, lanes = squares ? 8 : 1;
  std::vector<double> part;
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min(n, b0 + block), whole = b0 + (b1 - b0) / lanes * lanes;
    std::vector<double> lane(size_t(lanes), 0.0);
    for (int64_t i = b0; i < b1; ++i) {
      const double v = double(x[size_t(i)]);
      lane[size_t(i < whole ? (i - b0) % lanes : 0)] += squares ? v * v : v;
    }
    double s = 0;
    for (double v : lane) s += v;
    part.push_back(s);
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

// Runs f with 1 and with 3 OpenMP threads and returns both results.
template <class F>
auto with_threads(F&& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto a = f();
  omp_set_num_threads(3);
  auto b = f();
  omp_set_num_threads(saved);
  return std::make_pair(a, b);
}

}  // namespace

TEST(ReduceOps, SumAndSumSquaresAreTheFixedBlockSums) {
  for (int64_t n : all_sizes()) {
    auto x = randn<float>(size_t(n), uint64_t(n), 1.0, 0.25);
    const Tensor t(x.data(), {n});
    auto [s1, s3] = with_threads([&] { return ops::sum(t); });
    auto [q1, q3] = with_threads([&] { return ops::sum_squares(t); });
    EXPECT_EQ(s1, ref_block_sum(x, false)) << n;
    EXPECT_EQ(s3, s1) << n;
    EXPECT_EQ(q1, ref_block_sum(x, true)) << n;
    EXPECT_EQ(q3, q1) << n;
  }
  // Up to one block the sum is the plain sequential one (the loss sum of model_forward).
  auto x = randn<float>(257, 3);
  double seq = 0;
  for (float v : x) seq += v;
  EXPECT_EQ(ops::sum(Tensor(x.data(), {257})), seq);
  auto d = randn<double>(7, 4);  // fewer than 8 elements: all in lane 0, in order
  double seq_d = 0;
  for (double v : d) seq_d += v * v;
  EXPECT_EQ(ops::sum_squares(Tensor(d.data(), {7})), seq_d);
}

TEST(ReduceOps, SumToWritesTheSumsBits) {
  for (int64_t n : all_sizes()) {
    auto x = randn<float>(size_t(n), uint64_t(n) + 7, 1.0, 0.5);
    double out = -1;
    ops::sum_to(Tensor(&out, {1}), Tensor(x.data(), {n}));
    EXPECT_EQ(out, ops::sum(Tensor(x.data(), {n}))) << n;
  }
  auto d = randn<double>(1000, 5);
  double out = -1;
  ops::sum_to(Tensor(&out, {1}), Tensor(d.data(), {1000}));
  EXPECT_EQ(out, ops::sum(Tensor(d.data(), {1000})));
  std::vector<float> none;
  ops::sum_to(Tensor(&out, {1}), Tensor(none.data(), {0}));
  EXPECT_EQ(out, 0.0);
  float wrong = 0;  // out must be one F64
  EXPECT_DEATH(ops::sum_to(Tensor(&wrong, {1}), Tensor(d.data(), {1000})), "sum_to: out F64");
}

TEST(ReduceOps, CountScoredAndCountClasses) {
  for (int64_t N : kOddSizes) {
    const int64_t K = 5;
    std::vector<int32_t> c(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) c[size_t(n)] = int32_t((n * 7 + 3) % K);
    std::vector<int64_t> counts(size_t(K), 10), ref = counts;  // adds to what is there
    std::vector<double> fcounts(size_t(K), 0.5), fref = fcounts;
    for (int32_t v : c) ++ref[size_t(v)], fref[size_t(v)] += 1.0;
    ops::count_classes(Tensor(counts.data(), {K}), Tensor(c.data(), {N}), K);
    ops::count_classes(Tensor(fcounts.data(), {K}), Tensor(c.data(), {N}), K);
    EXPECT_EQ(counts, ref);
    EXPECT_EQ(fcounts, fref);

    std::vector<int32_t> tgt(static_cast<size_t>(N));
    int64_t scored = 0;
    for (int64_t n = 0; n < N; ++n) {
      tgt[size_t(n)] = n % 3 == 0 ? -1 : int32_t(n);
      scored += tgt[size_t(n)] >= 0;
    }
    EXPECT_EQ(ops::count_scored(Tensor(tgt.data(), {N})), scored);
  }
}

TEST(ReduceOps, ScaleMultipliesByTheRoundedFactor) {
  for (int64_t n : all_sizes()) {
    auto x = randn<float>(size_t(n), 5);
    auto ref = x;
    const double s = 0.3 / 0.7;  // not a float: the factor is rounded once
    for (float& v : ref) v *= float(s);
    ops::scale(Tensor(x.data(), {n}), s);
    EXPECT_EQ(x, ref) << n;
  }
  auto d = randn<double>(31, 6), dref = d;
  for (double& v : dref) v *= 1.7;
  ops::scale(Tensor(d.data(), {31}), 1.7);
  EXPECT_EQ(d, dref);
}

TEST(OptimOps, AdamWUpdateIsTheDoubleArithmetic) {
  ops::AdamWParams p;
  p.lr = 3e-3, p.beta1 = 0.9, p.beta2 = 0.95, p.eps = 1e-8, p.weight_decay = 0.1, p.step = 3;
  for (int64_t n : all_sizes()) {
    auto w = randn<float>(size_t(n), 7), g = randn<float>(size_t(n), 8),
         m = randn<float>(size_t(n), 9, 0.1), v = randn<float>(size_t(n), 10, 0.1);
    for (float& x : v) x = std::abs(x);
    auto rw = w, rm = m, rv = v;
    const double bc1 = 1.0 - std::pow(p.beta1, 3.0), bc2 = 1.0 - std::pow(p.beta2, 3.0);
    for (size_t i = 0; i < size_t(n); ++i) {
      const double gi = g[i];
      const double mi = p.beta1 * double(rm[i]) + (1.0 - p.beta1) * gi;
      const double vi = p.beta2 * double(rv[i]) + (1.0 - p.beta2) * gi * gi;
      rm[i] = float(mi), rv[i] = float(vi);
      rw[i] = float(double(rw[i]) * (1.0 - p.lr * p.weight_decay) -
                    (p.lr / bc1) * mi / (std::sqrt(vi) * (1.0 / std::sqrt(bc2)) + p.eps));
    }
    ops::adamw_update(Tensor(w.data(), {n}), Tensor(g.data(), {n}), Tensor(m.data(), {n}),
                      Tensor(v.data(), {n}), p);
    EXPECT_EQ(w, rw) << n;
    EXPECT_EQ(m, rm) << n;
    EXPECT_EQ(v, rv) << n;
  }
}

// The clipping factor folded into AdamW (grad_scale) gives the bits of scaling g first.
TEST(OptimOps, AdamWGradScaleIsScalingFirst) {
  ops::AdamWParams p;
  p.lr = 3e-3, p.weight_decay = 0.1, p.step = 2;
  for (int64_t n : all_sizes()) {
    auto w = randn<float>(size_t(n), 7), g = randn<float>(size_t(n), 8),
         m = randn<float>(size_t(n), 9, 0.1), v = randn<float>(size_t(n), 10, 0.1);
    for (float& x : v) x = std::abs(x);
    auto rw = w, rm = m, rv = v, rg = g;
    const double clip = 1.0 / 3.7;
    ops::scale(Tensor(rg.data(), {n}), clip);
    ops::adamw_update(Tensor(rw.data(), {n}), Tensor(rg.data(), {n}), Tensor(rm.data(), {n}),
                      Tensor(rv.data(), {n}), p);
    p.grad_scale = clip;
    ops::adamw_update(Tensor(w.data(), {n}), Tensor(g.data(), {n}), Tensor(m.data(), {n}),
                      Tensor(v.data(), {n}), p);
    p.grad_scale = 1;
    EXPECT_EQ(w, rw) << n;
    EXPECT_EQ(m, rm) << n;
    EXPECT_EQ(v, rv) << n;
  }
}

TEST(OptimOps, MuonMomentumAndApply) {
  for (bool nesterov : {false, true})
    for (int64_t n : all_sizes()) {
      auto buf = randn<float>(size_t(n), 11), g = randn<float>(size_t(n), 12);
      std::vector<float> scratch(size_t(n), 5.0f);
      auto rbuf = buf, rscratch = scratch;
      const float mu = float(0.95);
      for (size_t i = 0; i < size_t(n); ++i) {
        rbuf[i] = mu * rbuf[i] + g[i];
        rscratch[i] = nesterov ? g[i] + mu * rbuf[i] : rbuf[i];
      }
      ops::muon_momentum(Tensor(buf.data(), {n}), Tensor(scratch.data(), {n}),
                         Tensor(g.data(), {n}), 0.95, nesterov);
      EXPECT_EQ(buf, rbuf) << n;
      EXPECT_EQ(scratch, rscratch) << n;

      auto w = randn<float>(size_t(n), 13), rw = w;
      const double lr = 0.02, decay = 1.0 - 0.02 * 0.1, scale = 0.2 * std::sqrt(257.0);
      for (size_t i = 0; i < size_t(n); ++i)
        rw[i] = float(double(rw[i]) * decay - lr * scale * double(scratch[i]));
      ops::muon_apply(Tensor(w.data(), {n}), Tensor(scratch.data(), {n}), lr, decay, scale);
      EXPECT_EQ(w, rw) << n;
    }
}

TEST(DecodeActivations, SiluMulOnOddSizes) {
  for (int64_t M : kOddSizes)
    for (int64_t H : kOddSizes) {
      auto gu = randn<float>(size_t(M * 2 * H), uint64_t(M + H), 2.0);
      std::vector<float> act(size_t(M * H), -1.0f);
      ops::silu_mul(Tensor(act.data(), {M, H}), Tensor(gu.data(), {M, 2 * H}));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < H; ++j) {
          const float z = gu[size_t(m * 2 * H + j)], u = gu[size_t(m * 2 * H + H + j)];
          // the SIMD body gives the bits of the scalar tail (a [1,1] call) wherever j falls
          float one = -1.0f, pair[2] = {z, u};
          ops::silu_mul(Tensor(&one, {1, 1}), Tensor(pair, {1, 2}));
          ASSERT_EQ(act[size_t(m * H + j)], one) << m << " " << j;
          // and within f32 rounding of the exact SiLU
          const double zd = z, want = zd / (1.0 + std::exp(-zd)) * double(u);
          ASSERT_NEAR(act[size_t(m * H + j)], want, kOpAbs + kOpRel * std::abs(want));
        }
    }
}
