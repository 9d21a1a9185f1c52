// The memory ops (fill, the counter-RNG fills, copy, convert, copy_segments, gather/scatter of
// rows, concat_cols, shift_targets, zero_where_class): the GPU against the CPU backend (label
// gpu). Bit moves and conversions must be exact. fill_uniform is exact too (integer mixing and
// exact or singly rounded IEEE steps on both sides). fill_normal's Box–Muller goes through the
// device's double log and cos (within 1–2 ulp of glibc's): an element may differ by one f32 ulp
// where the double lands next to a rounding boundary (~2^-28 of elements), so it is held to NMSE
// ≤ 1e-12 (a single-ulp difference is ~1e-14 of the element's square) and the count of differing
// elements is printed.
#include <cstdio>

#include "gpu_test_util.h"

namespace zaya::test {
namespace {

// Widths (elements per row) of the row ops: the widest move unit changes with them.
const std::vector<int64_t>& widths() {
  static const std::vector<int64_t> w{1, 2, 3, 4, 7, 8, 31, 33, 257, 2048};
  return w;
}

// A pair of `dtype` with pseudo-random bits (any dtype: BF16, F32, I32 …).
DevicePair bits_pair(DType dtype, std::initializer_list<int64_t> dims, uint64_t seed) {
  DevicePair p(dtype, dims);
  CounterRng rng{seed, 11};
  uint8_t* b = static_cast<uint8_t*>(p.cpu.data);
  for (size_t i = 0; i < p.cpu.nbytes(); ++i) b[i] = uint8_t(rng.bits(i) >> 32);
  if (dtype == DType::F32 || dtype == DType::BF16) {  // finite values (NaN ≠ NaN in comparisons)
    const DevicePair r = random_pair(dtype, dims, seed);
    std::memcpy(p.cpu.data, r.cpu.data, p.cpu.nbytes());
  }
  p.upload();
  return p;
}

TEST(GpuMemory, FillNormalMatchesCpu) {
  ZAYA_REQUIRE_GPU();
  for (int64_t n : {1, 7, 33, 257, 1 << 20}) {
    DevicePair t(DType::F32, {n});
    ops::fill_normal(t.cpu, 42, 3, 0.02);
    ops::fill_normal(t.gpu, 42, 3, 0.02);
    expect_nmse(t, 1e-12, "fill_normal");
    const std::vector<double> a = t.gpu_values(), b = t.cpu_values();
    int64_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    std::printf("fill_normal n %lld: %lld elements differ from the CPU\n", (long long)n,
                (long long)differ);
  }
}

TEST(GpuMemory, FillUniformExact) {
  ZAYA_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : {1, 7, 33, 257, 1 << 20}) {
      DevicePair t(dt, {n});
      ops::fill_uniform(t.cpu, 7, 9, 0.05);
      ops::fill_uniform(t.gpu, 7, 9, 0.05);
      expect_equal(t, dt == DType::F32 ? "fill_uniform F32" : "fill_uniform BF16");
    }
}

TEST(GpuMemory, FillCopyConvert) {
  ZAYA_REQUIRE_GPU();
  for (int64_t n : odd_sizes()) {
    DevicePair f(DType::F32, {n}), d(DType::F64, {n}), i(DType::I32, {n});
    for (DevicePair* p : {&f, &d, &i}) {
      ops::fill(p->cpu, -2.5);
      ops::fill(p->gpu, -2.5);
      expect_equal(*p, "fill");
    }
    DevicePair z = bits_pair(DType::BF16, {n}, 3);
    ops::fill_zero(z.cpu);
    ops::fill_zero(z.gpu);
    expect_equal(z, "fill_zero");

    const DevicePair src = random_pair(DType::F32, {n}, uint64_t(n));
    DevicePair dst(DType::F32, {n});
    ops::copy(dst.cpu, src.cpu);
    ops::copy(dst.gpu, src.gpu);
    expect_equal(dst, "copy");

    // F32 → BF16 rounds to nearest even, BF16 → F32 widens: exact on both sides.
    DevicePair h(DType::BF16, {n}), back(DType::F32, {n});
    ops::convert(h.cpu, src.cpu);
    ops::convert(h.gpu, src.gpu);
    expect_equal(h, "convert F32 → BF16");
    ops::convert(back.cpu, h.cpu);
    ops::convert(back.gpu, h.gpu);
    expect_equal(back, "convert BF16 → F32");
  }
}

TEST(GpuMemory, CopySegments) {
  ZAYA_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::I32}) {
    const int64_t n = 700000;
    const DevicePair src = bits_pair(dt, {n}, 5);
    DevicePair dst = bits_pair(dt, {n}, 6);  // untouched parts must keep their bits
    // Aligned and odd offsets and lengths, one longer than a 2^18-byte piece, an empty one.
    const std::vector<ops::CopySegment> segs{
        {0, 0, 16},     {17, 1001, 33}, {4096, 2048, 1},        {100, 200000, 300001},
        {5, 600003, 7}, {9, 9, 0},      {650000, 650001, 49999}};
    ops::copy_segments(dst.cpu, src.cpu, segs);
    ops::copy_segments(dst.gpu, src.gpu, segs);
    expect_equal(dst, "copy_segments");
  }
}

// The GPU keeps recent piece lists on the device (a list met again is not uploaded; 256 kept):
// 300 different lists, then the first ones again after they were dropped, then a list met just
// before — the CPU's result every time.
TEST(GpuMemory, CopySegmentsReusesAndDropsItsDeviceLists) {
  ZAYA_REQUIRE_GPU();
  const int64_t n = 4096;
  const DevicePair src = bits_pair(DType::F32, {n}, 7);
  DevicePair dst = bits_pair(DType::F32, {n}, 8);
  auto run = [&](int64_t k) {
    const std::vector<ops::CopySegment> segs{{k % 1000, (k * 7) % 3000, 1 + k % 37},
                                             {3500, 3500 + k % 100, 5}};
    ops::copy_segments(dst.cpu, src.cpu, segs);
    ops::copy_segments(dst.gpu, src.gpu, segs);
  };
  for (int64_t k = 0; k < 300; ++k) run(k);
  for (int64_t k = 0; k < 10; ++k) run(k);
  run(299);
  expect_equal(dst, "copy_segments with reused and dropped lists");
}

TEST(GpuMemory, GatherAndScatterRows) {
  ZAYA_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::I32})
    for (int64_t W : widths()) {
      SCOPED_TRACE("W " + std::to_string(W) + " " + std::string(dtype_name(dt)));
      const int64_t R = 41, M = 33;
      std::vector<int32_t> ids(M);  // distinct rows (scatter needs them distinct)
      for (int64_t m = 0; m < M; ++m) ids[size_t(m)] = int32_t((m * 5 + 3) % R);
      const DevicePair row_ids = i32_pair(ids);
      const DevicePair table = bits_pair(dt, {R, W}, uint64_t(W));
      DevicePair g = bits_pair(dt, {M, W}, uint64_t(W) + 1);
      ops::gather_rows(g.cpu, table.cpu, row_ids.cpu);
      ops::gather_rows(g.gpu, table.gpu, row_ids.gpu);
      expect_equal(g, "gather_rows");

      const DevicePair rows = bits_pair(dt, {M, W}, uint64_t(W) + 2);
      DevicePair s = bits_pair(dt, {R, W}, uint64_t(W) + 3);
      ops::scatter_rows(s.cpu, row_ids.cpu, rows.cpu, Tensor{});
      ops::scatter_rows(s.gpu, row_ids.gpu, rows.gpu, Tensor{});
      expect_equal(s, "scatter_rows");
      if (dt != DType::F32) continue;
      const DevicePair w = random_pair(DType::F32, {R}, uint64_t(W) + 4);
      DevicePair sw = bits_pair(dt, {R, W}, uint64_t(W) + 5);
      ops::scatter_rows(sw.cpu, row_ids.cpu, rows.cpu, w.cpu);
      ops::scatter_rows(sw.gpu, row_ids.gpu, rows.gpu, w.gpu);
      expect_equal(sw, "scatter_rows weighted");  // one f32 product per element
    }
}

TEST(GpuMemory, ConcatCols) {
  ZAYA_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t A : {1, 4, 7, 64})
      for (int64_t B : {1, 3, 8, 33}) {
        const int64_t N = 37;
        const DevicePair a = bits_pair(dt, {N, A}, uint64_t(A)),
                         b = bits_pair(dt, {N, B}, uint64_t(B) + 9);
        DevicePair d(dt, {N, A + B});
        ops::concat_cols(d.cpu, a.cpu, b.cpu);
        ops::concat_cols(d.gpu, a.gpu, b.gpu);
        expect_equal(d, "concat_cols");
      }
}

TEST(GpuMemory, ShiftTargets) {
  ZAYA_REQUIRE_GPU();
  for (int64_t B : {1, 3})
    for (int64_t T : odd_sizes()) {
      const DevicePair ids = bits_pair(DType::I32, {B * T}, uint64_t(B * T));
      DevicePair t(DType::I32, {B * T});
      ops::shift_targets(t.cpu, ids.cpu, B, T);
      ops::shift_targets(t.gpu, ids.gpu, B, T);
      expect_equal(t, "shift_targets");
    }
}

TEST(GpuMemory, ZeroWhereClass) {
  ZAYA_REQUIRE_GPU();
  for (int64_t N : odd_sizes()) {
    std::vector<int32_t> c(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) c[size_t(n)] = int32_t(n % 3);
    const DevicePair choice = i32_pair(c);
    DevicePair v = random_pair(DType::F32, {N}, uint64_t(N));
    ops::zero_where_class(v.cpu, choice.cpu, 2);
    ops::zero_where_class(v.gpu, choice.gpu, 2);
    expect_equal(v, "zero_where_class");
  }
}

}  // namespace
}  // namespace zaya::test
