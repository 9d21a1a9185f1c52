// sym_product (ops/cpu/syrk.h): C = alpha·P·Pᵀ + beta·C against a double reference, for P = X and
// P = Xᵀ, square and rectangular both ways, sizes that are not multiples of the tile (1, 7, 33,
// 257), strided operands, several tile sides; the result is exactly symmetric, C's lower triangle
// is never read, and the bits do not depend on the thread count. sym_multiply: C = P·R for
// commuting symmetric P, R (polynomials in one symmetric matrix) against a double reference, for
// sizes around the tile side and strided operands; exactly symmetric, the padding untouched, bits
// independent of the thread count.
#include "ops/cpu/syrk.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
using zaya::ops::cpu::kSymBlock;
using zaya::ops::cpu::sym_multiply;
using zaya::ops::cpu::sym_multiply_block;
using zaya::ops::cpu::sym_plan;
using zaya::ops::cpu::sym_product;
using zaya::ops::cpu::SymPlan;

namespace {

// One case: P [m,k]; X is [m, k] (!trans) or [k, m] (trans), rows padded to ldx = width + pad.
struct Case {
  int64_t m, k;
  bool trans;
  int64_t pad;
  int64_t width() const { return trans ? m : k; }
  int64_t height() const { return trans ? k : m; }
  int64_t ldx() const { return width() + pad; }
  double p(const std::vector<double>& x, int64_t i, int64_t l) const {
    return trans ? x[size_t(l * ldx() + i)] : x[size_t(i * ldx() + l)];
  }
};

// alpha·P·Pᵀ + beta·C0 (C0 symmetric), in double.
std::vector<double> reference(const Case& c, const std::vector<double>& x, double alpha,
                              double beta, const std::vector<double>& c0, int64_t ldc) {
  std::vector<double> want(size_t(c.m * ldc));
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.m; ++j) {
      double s = 0;
      for (int64_t l = 0; l < c.k; ++l) s += c.p(x, i, l) * c.p(x, j, l);
      want[size_t(i * ldc + j)] =
          alpha * s + beta * c0[size_t(std::min(i, j) * ldc + std::max(i, j))];
    }
  return want;
}

// Runs sym_product<T> on case c with C's lower triangle (and the padding) poisoned with NaN, and
// checks it against the double reference: every element of the [m,m] block (both triangles),
// exact symmetry, the padding columns untouched.
template <class T>
std::vector<T> check(const Case& c, SymPlan plan, double alpha, double beta, uint64_t seed,
                     double abs_tol, double rel_tol) {
  const int64_t ldc = c.m + 3;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Entries of size 1/sqrt(k), so that P·Pᵀ is O(1) whatever k.
  const std::vector<double> x =
      randn_f32(size_t(c.height() * c.ldx()), seed, 1.0 / std::sqrt(double(c.k)));
  std::vector<double> c0 = randn_f32(size_t(c.m * ldc), seed + 1);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j)
      if (j < i || j >= c.m) c0[size_t(i * ldc + j)] = nan;
  const std::vector<double> want = reference(c, x, alpha, beta, c0, ldc);

  const std::vector<T> xt = cast<T>(x);
  std::vector<T> got = cast<T>(c0);
  sym_product<T>(c.trans, c.m, c.k, T(alpha), xt.data(), c.ldx(), T(beta), got.data(), ldc, plan);
  const std::string what = "m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " trans " +
                           std::to_string(c.trans) + " block " + std::to_string(plan.block) +
                           " chunks " + std::to_string(plan.chunks);
  for (int64_t i = 0; i < c.m; ++i) {
    expect_close(got.data() + i * ldc, want.data() + i * ldc, size_t(c.m), abs_tol, rel_tol,
                 what.c_str());
    for (int64_t j = 0; j < c.m; ++j)
      EXPECT_EQ(got[size_t(i * ldc + j)], got[size_t(j * ldc + i)])
          << what << " (" << i << "," << j << ")";
    for (int64_t j = c.m; j < ldc; ++j) EXPECT_TRUE(std::isnan(double(got[size_t(i * ldc + j)])));
    if (::testing::Test::HasFailure()) break;
  }
  return got;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t m : {1, 7, 33, 257})
    for (int64_t k : {1, 7, 33, 257})
      for (bool trans : {false, true}) out.push_back({m, k, trans, (m + k) % 3});
  return out;
}

// Tile sides that do and do not divide the sizes, one or several depth chunks (3 does not divide
// 7, 33 or 257; 4 chunks of k = 1 leave three empty), and the default plan.
std::vector<SymPlan> plans(const Case& c) {
  std::vector<SymPlan> out = {sym_plan(c.m, c.k)};
  for (int64_t block : {int64_t(1), int64_t(5), int64_t(16), kSymBlock})
    for (int64_t chunks : {1, 3, 4}) {
      if (block == 1 && c.m > 33) continue;  // 257² one-element tiles: slow, nothing new
      out.push_back({block, chunks});
    }
  return out;
}

}  // namespace

TEST(SymProduct, MatchesTheDoubleReferenceForEveryShapeAndPlan) {
  uint64_t seed = 1;
  for (const Case& c : cases())
    for (SymPlan plan : plans(c)) {
      check<float>(c, plan, 1.0, 0.0, seed, kOpAbs, kOpRel);
      check<double>(c, plan, 1.0, 0.0, seed, 1e-12, 1e-12);
      seed += 2;
    }
}

TEST(SymProduct, AlphaAndBetaAndTheLowerTriangleIsNotRead) {
  uint64_t seed = 5000;
  for (const Case& c : cases())
    for (SymPlan plan : {sym_plan(c.m, c.k), SymPlan{16, 3}, SymPlan{kSymBlock, 2}}) {
      check<float>(c, plan, 2.0315, -4.775, seed, kOpAbs, kOpRel);
      check<double>(c, plan, -0.5, 1.0, seed, 1e-12, 1e-12);
      seed += 2;
    }
}

TEST(SymProduct, TheDefaultPlanSplitsTheDepthInTwo) {
  EXPECT_EQ(sym_plan(512, 2048).chunks, 2);
  EXPECT_EQ(sym_plan(1024, 1024).chunks, 2);
  EXPECT_EQ(sym_plan(512, 2 * zaya::ops::cpu::kSymMinDepth - 1).chunks, 1);
  EXPECT_EQ(sym_plan(1024, 1024).block, kSymBlock);
}

TEST(SymProduct, BitsDoNotDependOnTheThreadCount) {
  const int threads = omp_get_max_threads();
  for (const Case& c : {Case{257, 300, false, 0}, Case{300, 257, true, 1}, Case{520, 64, false, 0},
                        Case{600, 700, false, 0}})
    for (SymPlan plan : {sym_plan(c.m, c.k), SymPlan{16, 3}}) {
      omp_set_num_threads(1);
      const std::vector<float> one = check<float>(c, plan, 1.0, 0.5, 900, kOpAbs, kOpRel);
      omp_set_num_threads(std::max(2, threads));
      const std::vector<float> many = check<float>(c, plan, 1.0, 0.5, 900, kOpAbs, kOpRel);
      ASSERT_EQ(one.size(), many.size());
      for (size_t i = 0; i < one.size(); ++i)
        if (!std::isnan(one[i])) {
          ASSERT_EQ(one[i], many[i]) << "element " << i;
        }
    }
  omp_set_num_threads(threads);
}

TEST(SymProduct, EmptyAndZeroDepth) {
  std::vector<float> c(9, 3.0f), x(1, 1.0f);
  sym_product<float>(false, 0, 5, 1.0f, x.data(), 5, 0.0f, c.data(), 3);  // m = 0: nothing
  for (float v : c) EXPECT_EQ(v, 3.0f);
  sym_product<float>(false, 3, 0, 1.0f, x.data(), 1, 0.5f, c.data(), 3);  // k = 0: C = beta·C
  for (float v : c) EXPECT_EQ(v, 1.5f);
}

namespace {

// P = S/‖·‖ and R = I + 2S − S² for a random symmetric S [m,m] (entries ~ 1/√m), rounded to f32
// values, rows padded to ld = m + pad; returns C = sym_multiply(P, R) [m, ldc = m + 2] after
// checking it against P·R in double: every element (both triangles), exact symmetry, padding
// untouched. The f32 roundings of P and R make them commute only to ~1e-7: the reference is the
// double product's upper triangle, mirrored.
template <class T>
std::vector<T> check_multiply(int64_t m, int64_t pad, int64_t block, uint64_t seed, double abs_tol,
                              double rel_tol) {
  const int64_t ld = m + pad, ldc = m + 2;
  const std::vector<double> raw = randn_f32(size_t(m * m), seed, 1.0 / std::sqrt(double(m)));
  std::vector<double> sym(size_t(m * m)), p(size_t(m * ld), 0.0), r(size_t(m * ld), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j)
      sym[size_t(i * m + j)] = 0.5 * (raw[size_t(i * m + j)] + raw[size_t(j * m + i)]);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s2 = 0;
      for (int64_t l = 0; l < m; ++l) s2 += sym[size_t(i * m + l)] * sym[size_t(l * m + j)];
      p[size_t(i * ld + j)] = double(float(sym[size_t(i * m + j)]));
      r[size_t(i * ld + j)] = double(float((i == j ? 1.0 : 0.0) + 2 * sym[size_t(i * m + j)] - s2));
    }
  std::vector<double> want(size_t(m * ldc), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i; j < m; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < m; ++l) acc += p[size_t(i * ld + l)] * r[size_t(l * ld + j)];
      want[size_t(i * ldc + j)] = want[size_t(j * ldc + i)] = acc;
    }
  const std::vector<T> pt = cast<T>(p), rt = cast<T>(r);
  std::vector<T> got(size_t(m * ldc), T(std::numeric_limits<double>::quiet_NaN()));
  sym_multiply<T>(m, pt.data(), ld, rt.data(), ld, got.data(), ldc, block);
  const std::string what = "m " + std::to_string(m) + " block " + std::to_string(block);
  for (int64_t i = 0; i < m; ++i) {
    expect_close(got.data() + i * ldc, want.data() + i * ldc, size_t(m), abs_tol, rel_tol,
                 what.c_str());
    for (int64_t j = 0; j < m; ++j)
      EXPECT_EQ(got[size_t(i * ldc + j)], got[size_t(j * ldc + i)])
          << what << " (" << i << "," << j << ")";
    for (int64_t j = m; j < ldc; ++j) EXPECT_TRUE(std::isnan(double(got[size_t(i * ldc + j)])));
    if (::testing::Test::HasFailure()) break;
  }
  return got;
}

}  // namespace

TEST(SymMultiply, MatchesTheDoubleReferenceForEveryShapeAndTile) {
  uint64_t seed = 7000;
  for (int64_t m : {1, 7, 33, 128, 257})
    for (int64_t block :
         {int64_t(1), int64_t(5), int64_t(64), int64_t(100), sym_multiply_block(m)}) {
      if (block == 1 && m > 33) continue;
      check_multiply<float>(m, m % 3, block, seed, kOpAbs, kOpRel);
      check_multiply<double>(m, m % 3, block, seed, 1e-12, 1e-12);
      ++seed;
    }
}

TEST(SymMultiply, TheDefaultTileIsAQuarterOfTheSide) {
  EXPECT_EQ(sym_multiply_block(512), 128);
  EXPECT_EQ(sym_multiply_block(1024), 256);
  EXPECT_EQ(sym_multiply_block(200), 128);
  EXPECT_EQ(sym_multiply_block(1000), 256);
}

TEST(SymMultiply, BitsDoNotDependOnTheThreadCount) {
  const int threads = omp_get_max_threads();
  for (int64_t m : {300, 520})
    for (int64_t block : {sym_multiply_block(m), int64_t(64)}) {
      omp_set_num_threads(1);
      const std::vector<float> one = check_multiply<float>(m, 1, block, 950, kOpAbs, kOpRel);
      omp_set_num_threads(std::max(2, threads));
      const std::vector<float> many = check_multiply<float>(m, 1, block, 950, kOpAbs, kOpRel);
      ASSERT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
          << "m " << m << " block " << block;
    }
  omp_set_num_threads(threads);
}
