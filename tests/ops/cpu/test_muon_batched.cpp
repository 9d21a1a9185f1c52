// newton_schulz's batched form on the CPU: g [E,rows,cols] gives the same bits as E calls on its
// [rows,cols] slices (symmetric and plain, wide and tall, in place, zero steps); the GPU-only
// bf16 flag leaves the CPU's F32 result as it is; mismatched shapes stop the call.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/rng.h"
#include "ops/ops.h"

using namespace zaya;

namespace {

std::vector<float> normals(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  const CounterRng rng{seed, 3};
  for (size_t i = 0; i < n; ++i) v[i] = float(rng.normal(i));
  return v;
}

void check_batched(int64_t e, int64_t r, int64_t c, int steps, bool symmetric, bool in_place,
                   uint64_t seed) {
  const int64_t n = r * c;
  std::vector<float> g = normals(size_t(e * n), seed), batched(g.size()), each(g.size());
  if (in_place) batched = g;
  ops::newton_schulz(Tensor(batched.data(), {e, r, c}),
                     Tensor(in_place ? batched.data() : g.data(), {e, r, c}), steps, symmetric);
  for (int64_t k = 0; k < e; ++k)
    ops::newton_schulz(Tensor(each.data() + k * n, {r, c}), Tensor(g.data() + k * n, {r, c}), steps,
                       symmetric);
  ASSERT_EQ(std::memcmp(batched.data(), each.data(), g.size() * sizeof(float)), 0)
      << e << "x" << r << "x" << c << " steps " << steps << (symmetric ? " sym" : " gemm");
}

}  // namespace

TEST(NewtonSchulzBatched, SameBitsAsSeparateCalls) {
  uint64_t seed = 10;
  for (bool symmetric : {true, false}) {
    check_batched(3, 17, 40, 5, symmetric, false, ++seed);   // wide
    check_batched(3, 40, 17, 5, symmetric, false, ++seed);   // tall
    check_batched(2, 33, 33, 5, symmetric, true, ++seed);    // square, in place
    check_batched(4, 6, 9, 0, symmetric, false, ++seed);     // only the normalisation
    check_batched(1, 130, 600, 3, symmetric, true, ++seed);  // one matrix
    check_batched(2, 64, 200, 5, symmetric, true, ++seed);   // Gram space, two stages, in place
    check_batched(2, 200, 64, 5, symmetric, false, ++seed);  // the same, tall
  }
}

TEST(NewtonSchulzBatched, Bf16FlagIsTheGpusOnly) {
  std::vector<float> g = normals(5 * 12 * 20, 50), a(g.size()), b(g.size());
  ops::newton_schulz(Tensor(a.data(), {5, 12, 20}), Tensor(g.data(), {5, 12, 20}), 5, true);
  ops::newton_schulz(Tensor(b.data(), {5, 12, 20}), Tensor(g.data(), {5, 12, 20}), 5, true, true);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// A caller's bug (ZAYA_ASSERT: the message and an abort).
TEST(NewtonSchulzBatchedDeathTest, ShapesMustMatch) {
  std::vector<float> g(2 * 3 * 4), out(g.size());
  EXPECT_DEATH(ops::newton_schulz(Tensor(out.data(), {6, 4}), Tensor(g.data(), {2, 3, 4}), 5, true),
               "newton_schulz: out \\[6,4\\] for g \\[2,3,4\\]");
  EXPECT_DEATH(
      ops::newton_schulz(Tensor(out.data(), {1, 2, 3, 4}), Tensor(g.data(), {1, 2, 3, 4}), 5, true),
      "2-D or 3-D");
}
