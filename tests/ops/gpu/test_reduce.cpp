// sum, sum_to, sum_squares, count_scored, count_classes and scale: the GPU against the CPU backend
// (label gpu). The double sums differ from the CPU's only in the order of double additions, so they
// agree to ~1e-15 of Σ|term|; counts are exact; scale is one f32 (or f64) product per element,
// exact.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

// Sizes around the CPU's 2^16 blocks and the GPU's float4 tail, plus a large one.
const std::vector<int64_t>& reduce_sizes() {
  static const std::vector<int64_t> s{1, 3, 7, 31, 33, 257, 65535, 65536, 65539, 1000003};
  return s;
}

// An F64 pair with the values of an F32 one (the sums take either dtype).
DevicePair f64_pair(const DevicePair& f32) {
  DevicePair p(DType::F64, {f32.cpu.numel()});
  const std::vector<double> v = f32.cpu_values();
  std::memcpy(p.cpu.data, v.data(), v.size() * sizeof(double));
  p.upload();
  return p;
}

void expect_sum_close(double gpu, double cpu, double scale, const char* what) {
  EXPECT_LE(std::fabs(gpu - cpu), 1e-13 * std::max(scale, 1e-300))
      << what << ": gpu " << gpu << " cpu " << cpu;
}

TEST(GpuReduce, SumAndSumSquares) {
  ZAYA_REQUIRE_GPU();
  for (int64_t n : reduce_sizes()) {
    SCOPED_TRACE("n " + std::to_string(n));
    const DevicePair a = random_pair(DType::F32, {n}, uint64_t(n) + 1, 3.0);
    const DevicePair b = f64_pair(a);
    double abs_sum = 0;
    for (double v : a.cpu_values()) abs_sum += std::fabs(v);
    const double sq = ops::sum_squares(a.cpu);
    expect_sum_close(ops::sum(a.gpu), ops::sum(a.cpu), abs_sum, "sum F32");
    expect_sum_close(ops::sum_squares(a.gpu), sq, sq, "sum_squares F32");
    expect_sum_close(ops::sum(b.gpu), ops::sum(b.cpu), abs_sum, "sum F64");
    expect_sum_close(ops::sum_squares(b.gpu), ops::sum_squares(b.cpu), sq, "sum_squares F64");
    // Deterministic: the same input gives the same bits.
    EXPECT_EQ(ops::sum_squares(a.gpu), ops::sum_squares(a.gpu));
  }
}

// sum_to leaves the sum on the device: the same bits as sum (which reads the same kernels' result).
TEST(GpuReduce, SumToIsSumOnTheDevice) {
  ZAYA_REQUIRE_GPU();
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(33), int64_t(65539)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const DevicePair a = random_pair(DType::F32, {std::max<int64_t>(n, 1)}, uint64_t(n) + 9, 2.0);
    const Tensor g = a.gpu.prefix({n});
    DevicePair out(DType::F64, {1});
    double host = -1;  // what sum_to must overwrite, also for n = 0
    device_copy(out.gpu, Tensor(&host, {1}));
    ops::sum_to(out.gpu, g);
    device_copy(Tensor(&host, {1}), out.gpu);
    EXPECT_EQ(host, n ? ops::sum(g) : 0.0);
  }
}

TEST(GpuReduce, SumOfAnUnalignedView) {
  ZAYA_REQUIRE_GPU();
  // Rows from 1 on: the data pointer is 12 bytes past a 16-byte boundary (the scalar path).
  const DevicePair a = random_pair(DType::F32, {1001, 3}, 4);
  const Tensor gv = a.gpu.rows(1, 1001), cv = a.cpu.rows(1, 1001);
  const double sq = ops::sum_squares(cv);
  expect_sum_close(ops::sum_squares(gv), sq, sq, "sum_squares of rows 1…");
}

TEST(GpuReduce, CountScored) {
  ZAYA_REQUIRE_GPU();
  for (int64_t n : reduce_sizes()) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    CounterRng rng{uint64_t(n), 1};
    for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t(rng.bits(uint64_t(i)) % 5) - 1;
    const DevicePair p = i32_pair(t);
    EXPECT_EQ(ops::count_scored(p.gpu), ops::count_scored(p.cpu)) << "n " << n;
  }
}

TEST(GpuReduce, CountClassesAccumulates) {
  ZAYA_REQUIRE_GPU();
  for (int64_t K : {1, 2, 17, 5000})  // 5000: past the shared-memory histogram
    for (int64_t N : {1, 7, 33, 257, 100000}) {
      SCOPED_TRACE("K " + std::to_string(K) + " N " + std::to_string(N));
      std::vector<int32_t> c(static_cast<size_t>(N));
      CounterRng rng{uint64_t(N * K), 2};
      for (int64_t i = 0; i < N; ++i) c[size_t(i)] = int32_t(rng.bits(uint64_t(i)) % uint64_t(K));
      const DevicePair choice = i32_pair(c);
      DevicePair i64(DType::I64, {K}), f64(DType::F64, {K});
      for (int64_t k = 0; k < K; ++k) {  // prefilled: counts add on
        static_cast<int64_t*>(i64.cpu.data)[k] = 3 * k;
        static_cast<double*>(f64.cpu.data)[k] = double(k) + 0.5;
      }
      i64.upload();
      f64.upload();
      ops::count_classes(i64.cpu, choice.cpu, K);
      ops::count_classes(i64.gpu, choice.gpu, K);
      ops::count_classes(f64.cpu, choice.cpu, K);
      ops::count_classes(f64.gpu, choice.gpu, K);
      expect_equal(i64, "I64 counts");
      expect_equal(f64, "F64 counts");
    }
}

TEST(GpuReduce, Scale) {
  ZAYA_REQUIRE_GPU();
  for (int64_t n : reduce_sizes()) {
    SCOPED_TRACE("n " + std::to_string(n));
    DevicePair a = random_pair(DType::F32, {n}, uint64_t(n) + 3);
    DevicePair b = f64_pair(a);
    ops::scale(a.cpu, 0.1);
    ops::scale(a.gpu, 0.1);
    ops::scale(b.cpu, 0.1);
    ops::scale(b.gpu, 0.1);
    expect_equal(a, "F32");
    expect_equal(b, "F64");
  }
  DevicePair c = random_pair(DType::F32, {9, 1}, 8);  // an unaligned view of rows 1…8
  ops::scale(c.cpu.rows(1, 9), -3.7);
  ops::scale(c.gpu.rows(1, 9), -3.7);
  expect_equal(c, "rows 1…");
  DevicePair big = random_pair(DType::F32, {1000004, 1}, 10);  // unaligned and many blocks
  ops::scale(big.cpu.rows(1, 1000004), 0.3);
  ops::scale(big.gpu.rows(1, 1000004), 0.3);
  expect_equal(big, "rows 1… of a large tensor");
}

}  // namespace
}  // namespace zaya::test
