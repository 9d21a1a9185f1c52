// The GPU GEMM layer (ops/gpu/gemm.h) against a double reference computed here: the tiled kernel
// on every transpose combination, F32 and BF16 operands, odd sizes and a model shape, alpha/beta
// (beta 0 must not read C: it starts NaN), K = 0, padded row strides (the padding must stay
// untouched); cuBLASLt against the tiled kernel; ZAYA_GPU_GEMM (the symmetric products of
// Newton–Schulz: tests/ops/gpu/test_muon.cpp).
// The GEMM kernels exist only in a GPU build: in the CPU build one test checks that the entry
// points say so.
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"

#include "ops/gpu/gemm.h"

using namespace zaya;
using namespace zaya::test;

#if defined(ZAYA_HAS_GPU_BACKEND)

namespace {

using gpu::Gemm;
using gpu::GemmEngine;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A stored [rows, cols] matrix with row stride cols + pad, random values.
struct Mat {
  DevicePair p;
  int64_t rows, cols, ld;
  std::vector<double> v;  // host values (bf16 widened), stored layout
  double at(int64_t r, int64_t c) const { return v[size_t(r * ld + c)]; }
};

Mat make_mat(DType dt, int64_t rows, int64_t cols, int64_t pad, uint64_t seed) {
  Mat m{random_pair(dt, {rows, cols + pad}, seed), rows, cols, cols + pad, {}};
  m.v = m.p.cpu_values();
  return m;
}

// C [M, N + pad] F32 filled with `fill` (NaN for beta 0) or random values.
Mat make_c(int64_t M, int64_t N, int64_t pad, bool random, double fill, uint64_t seed) {
  Mat c = make_mat(DType::F32, M, N, pad, seed);
  if (!random) {
    float* h = c.p.cpu.ptr<float>();
    for (int64_t i = 0; i < M * (N + pad); ++i) h[i] = float(fill);
    c.p.upload();
  }
  c.v = c.p.cpu_values();
  return c;
}

struct Case {
  int64_t M, N, K;
  bool ta, tb;
  DType da = DType::F32, db = DType::F32;
  float alpha = 1, beta = 0;
  int64_t pad = 0;
};

std::string describe(const Case& c) {
  return "M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K) +
         (c.ta ? " At" : " A") + (c.tb ? " Bt" : " B") + " " + std::string(dtype_name(c.da)) + "/" +
         std::string(dtype_name(c.db)) + " alpha " + std::to_string(c.alpha) + " beta " +
         std::to_string(c.beta) + " pad " + std::to_string(c.pad);
}

struct Problem {
  Mat a, b, c;
  Gemm g;
};

Problem make_problem(const Case& k, uint64_t seed) {
  Problem s{make_mat(k.da, k.ta ? k.K : k.M, k.ta ? k.M : k.K, k.pad, seed),
            make_mat(k.db, k.tb ? k.N : k.K, k.tb ? k.K : k.N, k.pad, seed + 1),
            make_c(k.M, k.N, k.pad, k.beta != 0, kNaN, seed + 2),
            {}};
  s.g.M = k.M, s.g.N = k.N, s.g.K = k.K;
  s.g.a = gpu::GemmOperand{s.a.p.gpu.data, k.da, s.a.ld, k.ta};
  s.g.b = gpu::GemmOperand{s.b.p.gpu.data, k.db, s.b.ld, k.tb};
  s.g.c = s.c.p.gpu.ptr<float>(), s.g.ldc = s.c.ld;
  s.g.alpha = k.alpha, s.g.beta = k.beta;
  return s;
}

// alpha · op(A)·op(B) + beta · C0 in double.
std::vector<double> reference(const Case& k, const Problem& s) {
  std::vector<double> r(size_t(k.M * k.N));
  for (int64_t m = 0; m < k.M; ++m)
    for (int64_t n = 0; n < k.N; ++n) {
      double acc = 0;
      for (int64_t q = 0; q < k.K; ++q)
        acc += (k.ta ? s.a.at(q, m) : s.a.at(m, q)) * (k.tb ? s.b.at(n, q) : s.b.at(q, n));
      r[size_t(m * k.N + n)] = k.alpha * acc + (k.beta != 0 ? k.beta * s.c.at(m, n) : 0.0);
    }
  return r;
}

// The [M,N] block of C on the GPU vs `ref` (NMSE), the padding columns unchanged.
void expect_result(const Mat& c, const std::vector<double>& ref, int64_t M, int64_t N, double tol,
                   const std::string& what) {
  const std::vector<double> got = c.p.gpu_values();
  double num = 0, den = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      const double d = got[size_t(m * c.ld + n)] - ref[size_t(m * N + n)];
      num += d * d;
      den += ref[size_t(m * N + n)] * ref[size_t(m * N + n)];
    }
    for (int64_t n = N; n < c.ld; ++n) {
      const double before = c.at(m, n), after = got[size_t(m * c.ld + n)];
      if (!(before == after || (std::isnan(before) && std::isnan(after)))) {
        ADD_FAILURE() << what << ": padding of row " << m << " changed";
        return;
      }
    }
  }
  EXPECT_TRUE(std::isfinite(num) && (num <= tol * den || (num == 0 && den == 0)))
      << what << ": NMSE " << num / den;
}

void check_tiled(const Case& k, uint64_t seed, double tol = kGpuF32Nmse) {
  Problem s = make_problem(k, seed);
  gpu::gemm_tiled(s.g);
  expect_result(s.c, reference(k, s), k.M, k.N, tol, "tiled " + describe(k));
}

const DType kF32 = DType::F32, kBF16 = DType::BF16;

// Sets ZAYA_GPU_GEMM for a scope (unset with nullptr), restoring the previous value.

}  // namespace

TEST(GpuGemm, TiledF32EveryTransposeOnOddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : odd_sizes())
        for (int64_t N : odd_sizes())
          for (int64_t K : odd_sizes()) check_tiled({M, N, K, ta, tb}, seed += 3);
}

TEST(GpuGemm, TiledBf16OperandsEveryTranspose) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 200;
  for (auto [da, db] : {std::pair{kBF16, kF32}, std::pair{kF32, kBF16}, std::pair{kBF16, kBF16}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t M : {1, 33, 257})
          for (int64_t N : {7, 257})
            for (int64_t K : {1, 31, 257}) {
              Case k{M, N, K, ta, tb, da, db};
              check_tiled(k, seed += 3);
            }
}

TEST(GpuGemm, TiledAlphaBetaStridesAndEmptyK) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 300;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_tiled({33, 257, 31, ta, tb, kF32, kF32, 0.5f, -1.25f, 0}, seed += 3);
      check_tiled({257, 33, 7, ta, tb, kF32, kF32, 2.0f, 1.0f, 3}, seed += 3);
      check_tiled({130, 129, 65, ta, tb, kF32, kBF16, -1.0f, 0.0f, 5}, seed += 3);  // NaN C
      check_tiled({7, 33, 0, ta, tb, kF32, kF32, 1.0f, 0.5f, 1}, seed += 3);        // C = βC
      check_tiled({7, 33, 0, ta, tb, kF32, kF32, 1.0f, 0.0f, 0}, seed += 3);        // C = 0
    }
  // M or N = 0: nothing to do.
  Gemm g;
  g.M = 0, g.N = 5, g.K = 3;
  gpu::gemm_tiled(g);
  gpu::gemm(g);
}

TEST(GpuGemm, TiledSplitK) {
  ZAYA_REQUIRE_GPU();
  // Few tiles and a long K: the k range is split and the partials summed in a second pass.
  uint64_t seed = 350;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_tiled({33, 70, 5000, ta, tb, kF32, kF32, 0.5f, 0.0f, 1}, seed += 3);  // NaN C
      check_tiled({64, 64, 1024, ta, tb, kF32, kF32, 1.0f, 1.0f, 0}, seed += 3);
      check_tiled({65, 9, 1031, ta, tb, kBF16, kF32, -2.0f, 0.5f, 2}, seed += 3);
    }
  // The same inputs give the same bits.
  const Case k{100, 100, 4096, false, false};
  Problem p1 = make_problem(k, 360), p2 = make_problem(k, 360);
  gpu::gemm_tiled(p1.g);
  gpu::gemm_tiled(p2.g);
  EXPECT_EQ(p1.c.p.gpu_values(), p2.c.p.gpu_values());
}

TEST(GpuGemm, TiledModelShape) {
  ZAYA_REQUIRE_GPU();
  // An expert's projection: 2048 tokens × 4096 outputs from 64 inputs (x · wᵀ), F32 and BF16 w.
  check_tiled({2048, 4096, 64, false, true}, 400);
  check_tiled({2048, 4096, 64, false, true, kF32, kBF16}, 401);
  // A weight gradient (dyᵀ · x) with a long K.
  check_tiled({64, 96, 2048, true, false}, 402);
  // Decode: few rows of x · wᵀ (the warp-per-column kernel up to 8 rows, its vector loads where
  // K and the strides are multiples of 4; pad 3 takes its scalar loads), then 9 rows (tiles).
  uint64_t seed = 410;
  for (int64_t M : {1, 5, 8, 9})
    for (DType db : {kF32, kBF16})
      for (int64_t pad : {0, 3, 4})
        check_tiled({M, 4096, 2048, false, true, kF32, db, 1.0f, pad == 4 ? 1.0f : 0.0f, pad},
                    seed += 3);
  check_tiled({3, 257, 33, false, true, kBF16, kBF16, -0.5f, 2.0f, 0}, seed += 3);
}

TEST(GpuGemm, BlasLtMatchesTiled) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 600;
  int ran = 0;
  for (DType dt : {kF32, kBF16})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{
                 {1, 7, 33}, {7, 1, 31}, {33, 257, 7}, {257, 33, 257}, {512, 2048, 96}})
          for (float beta : {0.0f, 1.0f}) {
            Case k{M, N, K, ta, tb, dt, dt, 1.5f, beta};
            Problem lt = make_problem(k, seed += 3);
            if (!gpu::gemm_blaslt(lt.g)) continue;
            ++ran;
            Problem tiled = make_problem(k, seed);  // the same inputs
            gpu::gemm_tiled(tiled.g);
            const std::vector<double> ref = reference(k, lt);
            expect_result(lt.c, ref, M, N, kGpuF32Nmse, "cuBLASLt " + describe(k));
            expect_result(tiled.c, ref, M, N, kGpuF32Nmse, "tiled " + describe(k));
            std::vector<double> t = tiled.c.p.gpu_values(), l = lt.c.p.gpu_values();
            double num = 0, den = 0;
            for (size_t i = 0; i < t.size(); ++i)
              num += (t[i] - l[i]) * (t[i] - l[i]), den += t[i] * t[i];
            EXPECT_LE(num, kGpuF32Nmse * den) << "cuBLASLt vs tiled " << describe(k);
          }
#if defined(ZAYA_GPU_CUDA)
  EXPECT_GT(ran, 0) << "cuBLASLt took no call in the CUDA build";
#else
  EXPECT_EQ(ran, 0);
#endif
  // Mixed operand dtypes: the library declines.
  Problem mixed = make_problem({7, 7, 7, false, true, kF32, kBF16}, 700);
  EXPECT_FALSE(gpu::gemm_blaslt(mixed.g));
}

TEST(GpuGemm, DispatchRunsEitherEngine) {
  ZAYA_REQUIRE_GPU();
  const Case k{257, 129, 65, false, true, kF32, kF32, 1.0f, 1.0f};
  for (const char* env : {static_cast<const char*>(nullptr), "tiled", "auto"}) {
    ScopedEnv e("ZAYA_GPU_GEMM", env);
    Problem s = make_problem(k, 800);
    gpu::gemm(s.g);
    expect_result(s.c, reference(k, s), k.M, k.N, kGpuF32Nmse, "gemm() " + describe(k));
  }
  // Mixed dtypes under Auto go to the tiled kernel.
  ScopedEnv e("ZAYA_GPU_GEMM", nullptr);
  const Case mixed{33, 257, 31, false, true, kF32, kBF16};
  Problem s = make_problem(mixed, 801);
  gpu::gemm(s.g);
  expect_result(s.c, reference(mixed, s), mixed.M, mixed.N, kGpuF32Nmse, "gemm() mixed");
}

TEST(GpuGemm, EngineChoiceFollowsEnvironment) {
  ZAYA_REQUIRE_GPU();
  Gemm same, mixed;
  same.M = mixed.M = 4, same.N = mixed.N = 4, same.K = mixed.K = 4;
  mixed.b.dtype = DType::BF16;
#if defined(ZAYA_GPU_CUDA)
  const GemmEngine lib = GemmEngine::BlasLt;
#else
  const GemmEngine lib = GemmEngine::Tiled;
#endif
  {
    ScopedEnv e("ZAYA_GPU_GEMM", nullptr);
    EXPECT_EQ(gpu::gemm_engine_for(same), lib);
    EXPECT_EQ(gpu::gemm_engine_for(mixed), GemmEngine::Tiled);
  }
  {
    ScopedEnv e("ZAYA_GPU_GEMM", "");
    EXPECT_EQ(gpu::gemm_engine_for(same), lib);
  }
  {
    ScopedEnv e("ZAYA_GPU_GEMM", "auto");
    EXPECT_EQ(gpu::gemm_engine_for(same), lib);
  }
  {
    ScopedEnv e("ZAYA_GPU_GEMM", "tiled");
    EXPECT_EQ(gpu::gemm_engine_for(same), GemmEngine::Tiled);
    EXPECT_EQ(gpu::gemm_engine_for(mixed), GemmEngine::Tiled);
  }
  {
    ScopedEnv e("ZAYA_GPU_GEMM", "blaslt");
#if defined(ZAYA_GPU_CUDA)
    expect_error([&] { gpu::gemm_engine_for(mixed); }, {"ZAYA_GPU_GEMM", "dtypes"});
    EXPECT_EQ(gpu::gemm_engine_for(same), GemmEngine::BlasLt);
#else  // no cuBLASLt at all (HIP, the emulator): that is the error, whatever the dtypes
    expect_error([&] { gpu::gemm_engine_for(mixed); }, {"ZAYA_GPU_GEMM", "cuBLASLt"});
    expect_error([&] { gpu::gemm_engine_for(same); }, {"ZAYA_GPU_GEMM", "cuBLASLt"});
#endif
  }
  {
    ScopedEnv e("ZAYA_GPU_GEMM", "cublas");
    expect_error([&] { gpu::gemm_engine_for(same); }, {"ZAYA_GPU_GEMM=cublas", "tiled"});
  }
}

#else  // the CPU build: the GEMM entry points are there, and each says a GPU build is needed

TEST(GpuGemm, NeedsAGpuBuild) {
  EXPECT_FALSE(gpu::available());
  const gpu::Gemm g{};
  expect_error([&] { gpu::gemm(g, gpu::GemmEngine::Tiled); },
               {"GPU GEMM", "this build has no GPU backend", "ZAYA_GPU=CUDA or HIP"});
  expect_error([&] { gpu::gemm_engine_for(g); }, {"GPU GEMM", "this build has no GPU backend"});
  EXPECT_FALSE(gpu::gemm_blaslt(g));
}

#endif
