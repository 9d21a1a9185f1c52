// embedding_forward / embedding_backward on the GPU against the CPU backend (label gpu; skips
// without a device): F32 and BF16 tables, odd widths (scalar path) and 2048 (vector path), repeated
// ids, skip_row, the ZAYA1 vocabulary 262,272, += into a prefilled dtable.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

// N ids in [0, V) with many repeats (every third token is id 0 or V − 1).
std::vector<int32_t> make_ids(int64_t N, int64_t V, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(N));
  CounterRng rng{seed, 3};
  for (int64_t n = 0; n < N; ++n) {
    const int32_t r = int32_t(rng.uniform(uint64_t(n)) * double(V));
    ids[size_t(n)] = n % 3 == 0 ? (n % 2 ? int32_t(V - 1) : 0) : std::min<int32_t>(r, V - 1);
  }
  return ids;
}

struct Case {
  int64_t N, V, D;
};
const std::vector<Case> kCases = {{1, 1, 1},       {7, 5, 7},       {31, 40, 33},   {33, 7, 31},
                                  {257, 300, 257}, {33, 300, 2048}, {3, 262272, 8}, {600, 50, 64}};

TEST(GpuEmbedding, Forward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const Case& c : kCases)
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + " V " + std::to_string(c.V) + " D " +
                   std::to_string(c.D) + " " + std::string(dtype_name(dt)));
      DevicePair table = random_pair(dt, {c.V, c.D}, seed += 10);
      DevicePair ids = i32_pair(make_ids(c.N, c.V, seed));
      DevicePair out(DType::F32, {c.N, c.D});
      ops::embedding_forward(out.cpu, ids.cpu, table.cpu);
      ops::embedding_forward(out.gpu, ids.gpu, table.gpu);
      expect_equal(out, "out");
    }
}

TEST(GpuEmbedding, Backward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 500;
  for (const Case& c : kCases)
    for (int64_t skip : {int64_t(-1), int64_t(0), c.V - 1}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + " V " + std::to_string(c.V) + " D " +
                   std::to_string(c.D) + " skip " + std::to_string(skip));
      DevicePair dtable = random_pair(DType::F32, {c.V, c.D}, seed += 10);
      DevicePair dout = random_pair(DType::F32, {c.N, c.D}, seed + 1);
      DevicePair ids = i32_pair(make_ids(c.N, c.V, seed + 2));
      ops::embedding_backward(dtable.cpu, dout.cpu, ids.cpu, skip);
      ops::embedding_backward(dtable.gpu, dout.gpu, ids.gpu, skip);
      expect_nmse(dtable, kGpuF32Nmse, "dtable");
    }
}

TEST(GpuEmbedding, BackwardAllOneId) {
  ZAYA_REQUIRE_GPU();
  const int64_t N = 2000, V = 9, D = 2048;
  DevicePair dtable = random_pair(DType::F32, {V, D}, 1);
  DevicePair dout = random_pair(DType::F32, {N, D}, 2);
  DevicePair ids = i32_pair(std::vector<int32_t>(size_t(N), 4));
  ops::embedding_backward(dtable.cpu, dout.cpu, ids.cpu, -1);
  ops::embedding_backward(dtable.gpu, dout.gpu, ids.gpu, -1);
  expect_nmse(dtable, kGpuF32Nmse, "dtable");
}

}  // namespace
}  // namespace zaya::test
