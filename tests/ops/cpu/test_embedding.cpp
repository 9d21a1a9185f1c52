// embedding: forward is an exact row copy; backward scatter-adds into dtable (+=) against a double
// reference and a numerical gradient, leaves skip_row (the pad row) untouched, handles repeated
// ids, and gives the same bits for any thread count.
#include <omp.h>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// N ids in [0, V), with row 0 (the pad row in the tests) and repeats guaranteed where N allows.
std::vector<int32_t> make_ids(int64_t N, int64_t V, uint64_t seed) {
  CounterRng rng{seed, 0};
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = int32_t(rng.bits(n) % uint64_t(V));
  if (N > 2) ids[1] = 0, ids[N - 1] = ids[N - 2];
  return ids;
}

}  // namespace

TEST(Embedding, ForwardCopiesRowsOnOddSizes) {
  for (int64_t N : kOddSizes)
    for (int64_t D : kOddSizes) {
      const int64_t V = 31;
      auto table = randn<float>(V * D, 1);
      auto ids = make_ids(N, V, 2);
      std::vector<float> out(N * D, -1.f);
      ops::embedding_forward(Tensor(out.data(), {N, D}), Tensor(ids.data(), {N}),
                             Tensor(table.data(), {V, D}));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < D; ++j)
          ASSERT_EQ(out[n * D + j], table[ids[n] * D + j]) << n << "," << j;
    }
}

TEST(Embedding, BackwardF32MatchesReferenceOnOddSizes) {
  for (int64_t skip_row : {int64_t(-1), int64_t(0)})
    for (int64_t N : kOddSizes)
      for (int64_t D : kOddSizes) {
        const int64_t V = 7;  // small vocabulary: many repeats per row when N = 257
        auto ids = make_ids(N, V, 3);
        auto dout = randn<float>(N * D, 4);
        const auto dtable0 = randn<float>(V * D, 5);  // += target
        std::vector<double> ref(dtable0.begin(), dtable0.end());
        for (int64_t n = 0; n < N; ++n)
          if (ids[n] != skip_row)
            for (int64_t j = 0; j < D; ++j) ref[ids[n] * D + j] += dout[n * D + j];
        auto dtable = dtable0;
        ops::embedding_backward(Tensor(dtable.data(), {V, D}), Tensor(dout.data(), {N, D}),
                                Tensor(ids.data(), {N}), skip_row);
        expect_close(dtable, ref, kOpAbs, kOpRel, "embedding backward f32");
        if (skip_row >= 0) {
          for (int64_t j = 0; j < D; ++j) {
            ASSERT_EQ(dtable[skip_row * D + j], dtable0[skip_row * D + j]) << "skip row changed";
          }
        }
      }
}

TEST(Embedding, BackwardMatchesNumericalGradient) {
  const int64_t N = 33, V = 7, D = 5;
  auto table = randn<double>(V * D, 6);
  auto ids = make_ids(N, V, 7);
  auto dout = randn<double>(N * D, 8);
  auto loss = [&] {
    std::vector<double> out(N * D);
    ops::embedding_forward(Tensor(out.data(), {N, D}), Tensor(ids.data(), {N}),
                           Tensor(table.data(), {V, D}));
    return dot(out, dout);
  };
  const auto num = numerical_grad(loss, table.data(), table.size());
  for (int64_t skip_row : {int64_t(-1), int64_t(0), int64_t(3)}) {
    const auto dtable0 = randn<double>(V * D, 9);
    auto dtable = dtable0;
    ops::embedding_backward(Tensor(dtable.data(), {V, D}), Tensor(dout.data(), {N, D}),
                            Tensor(ids.data(), {N}), skip_row);
    std::vector<double> got(V * D), want = num;
    for (int64_t i = 0; i < V * D; ++i) got[i] = dtable[i] - dtable0[i];
    if (skip_row >= 0)
      for (int64_t j = 0; j < D; ++j) {
        EXPECT_EQ(got[skip_row * D + j], 0.0) << "skip row " << skip_row << " changed";
        want[skip_row * D + j] = 0;  // the lookup adds nothing to the pad row
      }
    expect_grad_close(got, want, kGradRelDouble, "dtable");
  }
}

TEST(Embedding, BackwardBitsIndependentOfThreadCount) {
  const int64_t N = 4099, V = 33, D = 64;
  auto ids = make_ids(N, V, 10);
  auto dout = randn<float>(N * D, 11, 1.0, 0.5);
  auto run = [&](int threads) {
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> dtable(V * D, 0.25f);
    ops::embedding_backward(Tensor(dtable.data(), {V, D}), Tensor(dout.data(), {N, D}),
                            Tensor(ids.data(), {N}), 0);
    omp_set_num_threads(keep);
    return dtable;
  };
  EXPECT_EQ(run(1), run(3));
}
