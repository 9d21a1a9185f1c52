// Memory ops of ops.h (fill, fill_zero, fill_normal, copy, copy_segments, gather_rows,
// scatter_rows, concat_cols, shift_targets) against plain reference loops on the odd sizes:
// they move bits, so every comparison is exact.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// Row ids in [0, R): a fixed pseudo-random pick, distinct when `distinct` (a permutation prefix).
std::vector<int32_t> pick_rows(int64_t M, int64_t R, uint64_t seed, bool distinct) {
  std::vector<int32_t> ids(static_cast<size_t>(M));
  std::vector<int32_t> perm(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) perm[size_t(r)] = int32_t(r);
  const CounterRng rng{seed, 0};
  for (int64_t r = R - 1; r > 0; --r)
    std::swap(perm[size_t(r)], perm[size_t(rng.bits(uint64_t(r)) % uint64_t(r + 1))]);
  for (int64_t m = 0; m < M; ++m)
    ids[size_t(m)] =
        distinct ? perm[size_t(m)] : int32_t(rng.bits(uint64_t(1000 + m)) % uint64_t(R));
  return ids;
}

}  // namespace

TEST(MemoryOps, FillAndFillZero) {
  for (int64_t n : kOddSizes) {
    auto f = randn<float>(size_t(n), 1);
    ops::fill(Tensor(f.data(), {n}), 0.1);
    for (float v : f) ASSERT_EQ(v, 0.1f);
    auto d = randn<double>(size_t(n), 2);
    ops::fill(Tensor(d.data(), {n}), -2.5);
    for (double v : d) ASSERT_EQ(v, -2.5);
    std::vector<int32_t> i(size_t(n), 7);
    ops::fill(Tensor(i.data(), {n}), -1);
    for (int32_t v : i) ASSERT_EQ(v, -1);
    auto z = randn<float>(size_t(n), 3);
    ops::fill_zero(Tensor(z.data(), {n}).rows(n / 2, n));  // only the tail
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(z[size_t(k)] == 0.0f, k >= n / 2) << k;
  }
}

TEST(MemoryOps, FillNormalIsTheCounterRngStream) {
  for (int64_t n : {int64_t(1), int64_t(257), int64_t(3 * (1 << 16) + 5)}) {
    std::vector<float> t(static_cast<size_t>(n));
    ops::fill_normal(Tensor(t.data(), {n}), 42, 7, 0.02);
    const CounterRng rng{42, 7};
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(t[size_t(i)], float(0.02 * rng.normal(uint64_t(i)))) << i;
  }
}

TEST(MemoryOps, CopyAndCopySegments) {
  for (int64_t n : kOddSizes) {
    auto src = randn<float>(size_t(n), 4);
    std::vector<float> dst(size_t(n), -1.0f);
    ops::copy(Tensor(dst.data(), {n}), Tensor(src.data(), {1, n}));
    EXPECT_EQ(dst, src);
  }
  // Segments of a flat buffer, as the optimizer's bucket pack: several lengths, some empty.
  const int64_t n = 257;
  auto src = randn<float>(size_t(n), 5);
  std::vector<float> dst(300, 9.0f), ref = dst;
  const std::vector<ops::CopySegment> segs = {{0, 10, 7},  {7, 0, 1},     {100, 31, 33},
                                              {8, 299, 1}, {200, 64, 57}, {5, 150, 0}};
  for (const auto& s : segs)
    for (int64_t k = 0; k < s.length; ++k) ref[size_t(s.dst + k)] = src[size_t(s.src + k)];
  ops::copy_segments(Tensor(dst.data(), {300}), Tensor(src.data(), {n}), segs);
  EXPECT_EQ(dst, ref);
}

TEST(MemoryOps, GatherScatterConcatOnOddSizes) {
  for (int64_t R : kOddSizes)
    for (int64_t W : kOddSizes) {
      const int64_t M = (R + 1) / 2;
      auto src = randn<float>(size_t(R * W), 6);
      const auto ids = pick_rows(M, R, uint64_t(R * W), /*distinct=*/false);
      std::vector<float> g(size_t(M * W), -3.0f);
      ops::gather_rows(Tensor(g.data(), {M, W}), Tensor(src.data(), {R, W}),
                       Tensor(const_cast<int32_t*>(ids.data()), {M}));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < W; ++j)
          ASSERT_EQ(g[size_t(m * W + j)], src[size_t(ids[size_t(m)] * W + j)]);

      // Scatter to distinct rows, plain and weighted (the decoder's w[n]·f[m]); other rows kept.
      const auto to = pick_rows(M, R, uint64_t(R + 3 * W), /*distinct=*/true);
      auto rows = randn<float>(size_t(M * W), 7), w = randn<float>(size_t(R), 8);
      auto plain = randn<float>(size_t(R * W), 9), weighted = plain, ref_p = plain, ref_w = plain;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < W; ++j) {
          const size_t d = size_t(to[size_t(m)] * W + j), s = size_t(m * W + j);
          ref_p[d] = rows[s];
          ref_w[d] = w[size_t(to[size_t(m)])] * rows[s];
        }
      const Tensor to_t(const_cast<int32_t*>(to.data()), {M});
      ops::scatter_rows(Tensor(plain.data(), {R, W}), to_t, Tensor(rows.data(), {M, W}), {});
      ops::scatter_rows(Tensor(weighted.data(), {R, W}), to_t, Tensor(rows.data(), {M, W}),
                        Tensor(w.data(), {R}));
      EXPECT_EQ(plain, ref_p);
      EXPECT_EQ(weighted, ref_w);

      // concat_cols: [R, W] ‖ [R, M] → [R, W + M].
      auto b = randn<float>(size_t(R * M), 10);
      std::vector<float> cat(size_t(R * (W + M)), -4.0f), ref_c;
      for (int64_t r = 0; r < R; ++r) {
        ref_c.insert(ref_c.end(), src.begin() + r * W, src.begin() + (r + 1) * W);
        ref_c.insert(ref_c.end(), b.begin() + r * M, b.begin() + (r + 1) * M);
      }
      ops::concat_cols(Tensor(cat.data(), {R, W + M}), Tensor(src.data(), {R, W}),
                       Tensor(b.data(), {R, M}));
      EXPECT_EQ(cat, ref_c);
    }
}

TEST(MemoryOps, ShiftTargetsPredictsTheNextToken) {
  for (int64_t B : {int64_t(1), int64_t(7)})
    for (int64_t T : kOddSizes) {
      std::vector<int32_t> ids(static_cast<size_t>(B * T)), tgt(size_t(B * T), 99);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 5) % 101);
      ops::shift_targets(Tensor(tgt.data(), {B * T}), Tensor(ids.data(), {B * T}), B, T);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          ASSERT_EQ(tgt[size_t(b * T + t)], t + 1 < T ? ids[size_t(b * T + t + 1)] : -1);
    }
}

TEST(MemoryOpsDeathTest, RowIdsOutsideTheSourceAreRejected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> src(6), dst(2);
  std::vector<int32_t> ids = {0, 3};
  EXPECT_DEATH(ops::gather_rows(Tensor(dst.data(), {2, 1}), Tensor(src.data(), {3, 2}),
                                Tensor(ids.data(), {2})),
               "gather_rows");
  EXPECT_DEATH(ops::gather_rows(Tensor(dst.data(), {2, 1}), Tensor(src.data(), {3, 1}),
                                Tensor(ids.data(), {2})),
               "row_ids\\[1\\] = 3 not in \\[0, 3\\)");
}

TEST(MemoryOps, FillUniformAndConvert) {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(257), int64_t(70000)}) {
    std::vector<float> f(static_cast<size_t>(n));
    std::vector<uint16_t> h(static_cast<size_t>(n)), h2(static_cast<size_t>(n));
    ops::fill_uniform(Tensor(f.data(), {n}), 9, 3, 0.5);
    ops::fill_uniform(Tensor(h.data(), DType::BF16, {n}), 9, 3, 0.5);
    const CounterRng rng{9, 3};
    for (int64_t k = 0; k < n; ++k) {
      ASSERT_EQ(f[size_t(k)], float(0.5 * (2.0 * rng.uniform(uint64_t(k)) - 1.0))) << k;
      ASSERT_LE(std::fabs(f[size_t(k)]), 0.5f);
      ASSERT_EQ(h[size_t(k)], f32_to_bf16(f[size_t(k)])) << k;  // the F32 value, rounded once
    }
    ops::convert(Tensor(h2.data(), DType::BF16, {n}), Tensor(f.data(), {n}));
    EXPECT_EQ(h2, h);
    std::vector<float> back(static_cast<size_t>(n));
    ops::convert(Tensor(back.data(), {n}), Tensor(h2.data(), DType::BF16, {n}));
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(back[size_t(k)], bf16_to_f32(h2[size_t(k)]));
  }
}

TEST(MemoryOps, ZeroWhereClass) {
  for (int64_t n : kOddSizes) {
    auto v = randn<float>(size_t(n), 5);
    const auto want = v;
    const std::vector<int32_t> ids = pick_rows(n, 4, 6, false);  // classes 0…3
    ops::zero_where_class(Tensor(v.data(), {n}), Tensor(const_cast<int32_t*>(ids.data()), {n}), 3);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(v[size_t(i)], ids[size_t(i)] == 3 ? 0.0f : want[size_t(i)]) << i;
  }
}
