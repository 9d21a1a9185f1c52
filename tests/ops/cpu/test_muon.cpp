// ops::newton_schulz: the symmetric path (ops/cpu/syrk.h's tiled symmetric products, or the
// Gram-space iteration where n ≥ 1.5·m, ops/cpu/muon.cpp) equals the plain-GEMM path, its f32 error
// against a double Newton–Schulz stays within a stated bound and a small factor of the f32 plain
// path's on random and ill-conditioned inputs, both equal a scalar double reference, the output's
// singular values are the quintic's image of the input's, and the bits do not depend on the thread
// count (the symmetric products by their tiling, tests/ops/cpu/test_syrk.cpp; the GEMMs by
// ops/cpu/blas.h's panels).
//
// Why the band: X = UΣVᵀ ⇒ every step maps each singular value σ ↦ φ(σ) = aσ + bσ³ + cσ⁵
// independently. After normalisation by ‖G‖_F all σ ≤ 1, and on [0.0045, 1] five applications of
// φ land in [0.6818, 1.2024] (evaluated densely in the test below), so for inputs whose smallest
// normalised singular value exceeds 0.0045 (random rectangular matrices: ≈ 0.04 and up) the
// output singular values lie in [0.68, 1.21].
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "ops/ops.h"
#include "test_util.h"

extern "C" void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
                       double* w, double* work, const int* lwork, int* info);

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

// Singular values (ascending) of x[rows,cols] from the eigenvalues of the short-side Gram matrix.
std::vector<double> singular_values(const std::vector<double>& x, int rows, int cols) {
  const bool t = rows > cols;
  const int m = t ? cols : rows, n = t ? rows : cols;
  std::vector<double> a(static_cast<size_t>(m * m), 0.0), w(static_cast<size_t>(m));
  auto at = [&](int i, int k) { return t ? x[size_t(k * cols + i)] : x[size_t(i * cols + k)]; };
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += at(i, k) * at(j, k);
      a[size_t(i * m + j)] = s;
    }
  int lwork = 3 * m + 64, info = 0;
  std::vector<double> work(static_cast<size_t>(lwork));
  dsyev_("N", "U", &m, a.data(), &m, w.data(), work.data(), &lwork, &info);
  EXPECT_EQ(info, 0);
  for (double& v : w) v = std::sqrt(std::max(v, 0.0));
  return w;
}

double phi5(double s) {
  for (int i = 0; i < 5; ++i) s = kA * s + kB * s * s * s + kC * s * s * s * s * s;
  return s;
}

// Plain loops in double: the definition.
std::vector<double> reference(const std::vector<double>& g, int rows, int cols, int steps) {
  const bool t = rows > cols;
  const int m = t ? cols : rows, n = t ? rows : cols;
  double norm = 0;
  for (double v : g) norm += v * v;
  norm = std::sqrt(norm) + 1e-7;
  std::vector<double> x(size_t(m * n)), a(size_t(m * m)), b(size_t(m * m)), y(size_t(m * n));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      (t ? x[size_t(c * n + r)] : x[size_t(r * n + c)]) = g[size_t(r * cols + c)] / norm;
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        double acc = 0;
        for (int k = 0; k < n; ++k) acc += x[size_t(i * n + k)] * x[size_t(j * n + k)];
        a[size_t(i * m + j)] = acc;
      }
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        double acc = 0;
        for (int k = 0; k < m; ++k) acc += a[size_t(i * m + k)] * a[size_t(k * m + j)];
        b[size_t(i * m + j)] = kB * a[size_t(i * m + j)] + kC * acc;
      }
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double acc = kA * x[size_t(i * n + j)];
        for (int k = 0; k < m; ++k) acc += b[size_t(i * m + k)] * x[size_t(k * n + j)];
        y[size_t(i * n + j)] = acc;
      }
    x.swap(y);
  }
  std::vector<double> out(g.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[size_t(r * cols + c)] = t ? x[size_t(c * n + r)] : x[size_t(r * n + c)];
  return out;
}

template <class T>
std::vector<T> run(const std::vector<T>& g, int rows, int cols, bool symmetric, int steps = 5) {
  std::vector<T> out(g.size());
  std::vector<T> in = g;
  ops::newton_schulz(Tensor(out.data(), {rows, cols}), Tensor(in.data(), {rows, cols}), steps,
                     symmetric);
  return out;
}

// Orthonormal columns [rows, k ≤ rows] (row-major) from Gaussian ones, modified Gram–Schmidt
// twice, in double.
std::vector<double> orthonormal(int rows, int k, uint64_t seed) {
  std::vector<double> q = randn<double>(size_t(rows * k), seed);
  for (int pass = 0; pass < 2; ++pass)
    for (int j = 0; j < k; ++j) {
      for (int i = 0; i < j; ++i) {
        double d = 0;
        for (int r = 0; r < rows; ++r) d += q[size_t(r * k + i)] * q[size_t(r * k + j)];
        for (int r = 0; r < rows; ++r) q[size_t(r * k + j)] -= d * q[size_t(r * k + i)];
      }
      double nrm = 0;
      for (int r = 0; r < rows; ++r) nrm += q[size_t(r * k + j)] * q[size_t(r * k + j)];
      for (int r = 0; r < rows; ++r) q[size_t(r * k + j)] /= std::sqrt(nrm);
    }
  return q;
}

// U·diag(s)·Vᵀ [rows, cols] for orthonormal U [rows,k], V [cols,k], k = s.size().
std::vector<double> with_singular_values(int rows, int cols, const std::vector<double>& s,
                                         uint64_t seed) {
  const int k = int(s.size());
  const std::vector<double> u = orthonormal(rows, k, seed), v = orthonormal(cols, k, seed + 1);
  std::vector<double> g(size_t(rows * cols), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      double acc = 0;
      for (int l = 0; l < k; ++l) acc += u[size_t(r * k + l)] * s[size_t(l)] * v[size_t(c * k + l)];
      g[size_t(r * cols + c)] = acc;
    }
  return g;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

// f32 symmetric and plain results' largest errors against the double plain path, on g.
struct Errors {
  double sym, plain;
};
Errors f32_errors(const std::vector<double>& g, int rows, int cols) {
  const std::vector<double> want = run(g, rows, cols, false);
  const std::vector<float> gf(g.begin(), g.end());
  return {max_abs_diff(run(gf, rows, cols, true), want),
          max_abs_diff(run(gf, rows, cols, false), want)};
}

}  // namespace

TEST(NewtonSchulz, QuinticBandOnNormalisedSingularValues) {
  double lo = 1e30, hi = 0;
  for (int i = 0; i <= 200000; ++i) {
    const double s = 0.0045 + (1.0 - 0.0045) * i / 200000.0, y = phi5(s);
    lo = std::min(lo, y), hi = std::max(hi, y);
  }
  EXPECT_GT(lo, 0.68);
  EXPECT_LT(hi, 1.21);
}

TEST(NewtonSchulz, SingularValuesAreTheQuinticImageAndInTheBand) {
  const int shapes[][2] = {{64, 256}, {256, 64}, {33, 257}, {7, 31}, {100, 40}};
  uint64_t seed = 1;
  for (auto [rows, cols] : shapes)
    for (bool symmetric : {true, false}) {
      std::vector<double> g = randn<double>(size_t(rows * cols), seed++);
      std::vector<double> gs = g;
      double norm = 0;
      for (double v : g) norm += v * v;
      for (double& v : gs) v /= std::sqrt(norm) + 1e-7;
      const std::vector<double> s_in = singular_values(gs, rows, cols);
      ASSERT_GT(s_in.front(), 0.0045) << rows << "x" << cols;
      std::vector<double> want;
      for (double s : s_in) want.push_back(phi5(s));
      std::sort(want.begin(), want.end());
      const std::vector<float> gf(g.begin(), g.end());
      const std::vector<float> of = run(gf, rows, cols, symmetric);
      const std::vector<double> od = run(g, rows, cols, symmetric);
      for (const auto& [out, tol] :
           {std::pair{std::vector<double>(of.begin(), of.end()), 1e-4}, std::pair{od, 1e-9}}) {
        const std::vector<double> s_out = singular_values(out, rows, cols);
        ASSERT_EQ(s_out.size(), want.size());
        for (size_t i = 0; i < s_out.size(); ++i) {
          EXPECT_NEAR(s_out[i], want[i], tol) << rows << "x" << cols << " σ" << i;
          EXPECT_GE(s_out[i], 0.68);
          EXPECT_LE(s_out[i], 1.21);
        }
      }
    }
}

TEST(NewtonSchulz, SymmetricEqualsPlain) {
  const int shapes[][2] = {{1, 7},    {7, 1},     {31, 33},  {33, 257},
                           {257, 33}, {128, 128}, {200, 64}, {1, 1}};
  uint64_t seed = 100;
  for (auto [rows, cols] : shapes) {
    const std::vector<float> gf = randn<float>(size_t(rows * cols), seed);
    const std::vector<double> gd = randn<double>(size_t(rows * cols), seed++);
    const std::vector<float> sf = run(gf, rows, cols, true), pf = run(gf, rows, cols, false);
    expect_close(sf, pf, 1e-5, 0.0, "f32 symmetric vs plain");
    const std::vector<double> sd = run(gd, rows, cols, true), pd = run(gd, rows, cols, false);
    expect_close(sd, pd, 1e-12, 0.0, "f64 symmetric vs plain");
  }
}

TEST(NewtonSchulz, MatchesTheScalarReference) {
  const int shapes[][2] = {{7, 31}, {33, 17}, {1, 5}, {16, 16}};
  uint64_t seed = 200;
  for (auto [rows, cols] : shapes)
    for (int steps : {0, 1, 5}) {
      const std::vector<double> g = randn<double>(size_t(rows * cols), seed++);
      const std::vector<double> want = reference(g, rows, cols, steps);
      for (bool symmetric : {true, false}) {
        const std::vector<float> gf(g.begin(), g.end());
        expect_close(run(gf, rows, cols, symmetric, steps), want, kOpAbs, kOpRel, "f32");
        expect_close(run(g, rows, cols, symmetric, steps), want, 1e-12, 1e-12, "f64");
      }
    }
}

TEST(NewtonSchulz, ZeroInputGivesZeroAndRunsAreDeterministic) {
  std::vector<float> z(6 * 9, 0.0f);
  for (float v : run(z, 6, 9, true)) EXPECT_EQ(v, 0.0f);
  const std::vector<float> g = randn<float>(64 * 48, 9);
  EXPECT_EQ(run(g, 64, 48, true), run(g, 64, 48, true));
  // in place (out aliases g)
  std::vector<float> inplace = g;
  Tensor t(inplace.data(), {64, 48});
  ops::newton_schulz(t, t, 5, true);
  EXPECT_EQ(inplace, run(g, 64, 48, true));
}

// Shapes whose short side exceeds one tile of the symmetric product (ops/cpu/syrk.h, 512) and
// does not divide it, wide and tall, plus a short side under a tile with a long depth.
TEST(NewtonSchulz, SymmetricEqualsPlainAcrossTiles) {
  const int shapes[][2] = {{600, 700}, {700, 600}, {300, 1100}, {1100, 300}};
  uint64_t seed = 300;
  for (auto [rows, cols] : shapes) {
    const std::vector<float> g = randn<float>(size_t(rows * cols), seed++);
    expect_close(run(g, rows, cols, true), run(g, rows, cols, false), 1e-5, 0.0,
                 "f32 symmetric vs plain");
  }
}

TEST(NewtonSchulz, BitsDoNotDependOnTheThreadCount) {
  const int threads = omp_get_max_threads();
  const int shapes[][2] = {{600, 700}, {700, 600}, {64, 300}, {300, 200}, {512, 1100}, {1100, 512}};
  uint64_t seed = 400;
  for (auto [rows, cols] : shapes) {
    const std::vector<float> g = randn<float>(size_t(rows * cols), seed++);
    for (bool symmetric : {true, false}) {
      omp_set_num_threads(1);
      const std::vector<float> one = run(g, rows, cols, symmetric);
      omp_set_num_threads(std::max(2, threads));
      EXPECT_EQ(one, run(g, rows, cols, symmetric)) << rows << "x" << cols << " " << symmetric;
    }
  }
  omp_set_num_threads(threads);
}

// The f32 symmetric path (the Gram-space iteration where n ≥ 1.5·m, the tiled one elsewhere)
// against the double plain path, next to the f32 plain path's own error, on random and
// ill-conditioned matrices. Stated bounds, each with a margin over the worst case seen: max
// |f32 symmetric − double| ≤ 3e-5 and ≤ 4x the f32 plain path's error + 1e-6 (Gram stages of 5
// steps instead of 3 break the latter). On the bench shapes symmetric and plain agree ≤ 1e-5.
TEST(NewtonSchulz, F32ErrorAgainstDoubleOnRandomAndIllConditionedMatrices) {
  struct Input {
    const char* what;
    int rows, cols;
    std::vector<double> g;
  };
  std::vector<Input> inputs;
  uint64_t seed = 600;
  const std::vector<std::pair<int, int>> gaussian = {
      {1024, 1024}, {2048, 512}, {512, 2048}, {37, 129},  {129, 37},
      {1, 64},      {64, 1},     {96, 96},    {100, 150}, {150, 100}};
  for (auto [rows, cols] : gaussian)
    inputs.push_back({"gaussian", rows, cols, randn<double>(size_t(rows * cols), seed++)});
  for (auto [rows, cols] : std::vector<std::pair<int, int>>{{64, 256}, {256, 64}, {96, 96}}) {
    const int k = std::min(rows, cols);
    std::vector<double> s(static_cast<size_t>(k), 0.0);
    for (int i = 0; i < k; ++i) s[size_t(i)] = std::pow(1e-7, double(i) / (k - 1));  // 1 … 1e-7
    inputs.push_back({"spread 1e-7..1", rows, cols, with_singular_values(rows, cols, s, seed++)});
    inputs.push_back(
        {"rank 3", rows, cols, with_singular_values(rows, cols, {1.0, 0.3, 1e-3}, seed++)});
    std::vector<double> huge = randn<double>(size_t(rows * cols), seed++);
    huge[size_t(rows * cols / 3)] = 1e6;
    inputs.push_back({"one huge entry", rows, cols, huge});
    inputs.push_back({"zero", rows, cols, std::vector<double>(size_t(rows * cols), 0.0)});
  }
  for (const Input& in : inputs) {
    const Errors e = f32_errors(in.g, in.rows, in.cols);
    std::printf("%-16s %5d x %-5d f32 error: symmetric %.2e plain %.2e\n", in.what, in.rows,
                in.cols, e.sym, e.plain);
    EXPECT_LE(e.sym, 3e-5) << in.what << " " << in.rows << "x" << in.cols;
    EXPECT_LE(e.sym, 4 * e.plain + 1e-6) << in.what << " " << in.rows << "x" << in.cols;
  }
  for (int i = 0; i < 3; ++i) {  // the bench shapes
    const auto [rows, cols] = gaussian[size_t(i)];
    const std::vector<float> g(inputs[size_t(i)].g.begin(), inputs[size_t(i)].g.end());
    expect_close(run(g, rows, cols, true), run(g, rows, cols, false), 1e-5, 0.0,
                 "f32 symmetric vs plain");
  }
}

// The zero matrix gives exact zeros on both paths (the Gram-space one included: Q = B₀·… is a
// multiple of I, X₀ = 0).
TEST(NewtonSchulz, ZeroInputGivesZeroOnEveryPath) {
  for (auto [rows, cols] : std::vector<std::pair<int, int>>{{6, 9}, {9, 6}, {16, 64}, {64, 16}})
    for (bool symmetric : {true, false})
      for (float v : run(std::vector<float>(size_t(rows * cols), 0.0f), rows, cols, symmetric))
        ASSERT_EQ(v, 0.0f) << rows << "x" << cols << " " << symmetric;
}
