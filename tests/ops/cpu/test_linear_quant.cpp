// linear_forward with block-quantized (Q8_0 … IQ4_XS) and F16 weights, and embedding_forward with
// such tables, against references built from quant::dequantize_row (the formats' exact values).
//
// Bound. The kernels quantize x to 8 bits per block (quant/dot.h: step d = max|x| / 127, rounded
// to nearest) and then compute exactly up to f32 rounding. So against the double reference
// Σ_e x_e·w_e (w the dequantized weights) each output may differ by at most
//   Σ_e |w_e| · d(e) / 2 · (1 + 1e-5)          (the activation's rounding, d(e) its block's step)
//   + kOpAbs + kOpRel · (Σ_e |x_e w_e| + |b| + |y0|)   (f32 arithmetic, as the f32 linear's test)
// which is a few percent of Σ|x w| — while a wrong offset, scale or value layout errs by the
// size of Σ|x w| itself. F16 weights are not quantized: only the second term applies.
// Also: every regime (N = 1, few, many inputs), bias and accumulate, the same bits on 1 and 2
// threads, in a batch or alone, and on every ISA this CPU runs (quant::set_isa).
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/ops.h"
#include "quant/dot.h"
#include "quant/formats.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

const DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q5_0,   DType::Q4_K,
                        DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::F16};

struct Case {
  DType t;
  int64_t N, O, I;
  std::vector<float> x, b, y0, wf;  // wf: the dequantized weights
  std::vector<uint8_t> w;
  Case(DType t_, int64_t N_, int64_t O_, int64_t I_, uint64_t seed) : t(t_), N(N_), O(O_), I(I_) {
    x = randn<float>(size_t(N * I), seed);
    b = randn<float>(size_t(O), seed + 1);
    y0 = randn<float>(size_t(N * O), seed + 2);
    const auto src = randn<float>(size_t(O * I), seed + 3, 1.0 / std::sqrt(double(I)));
    w.resize(size_t(O) * dtype_bytes(t, I) + 1);  // + 1: the weights at an odd address
    quant::quantize_matrix(t, src.data(), w.data() + 1, O, I);
    wf.resize(size_t(O * I));
    quant::dequantize_matrix(t, w.data() + 1, wf.data(), O, I);
  }
  std::vector<float> run(bool bias, bool accumulate) {
    std::vector<float> y = accumulate ? y0 : std::vector<float>(size_t(N * O), NAN);
    ops::linear_forward(Tensor(y.data(), {N, O}), Tensor(x.data(), {N, I}),
                        Tensor(w.data() + 1, t, {O, I}), bias ? Tensor(b.data(), {O}) : Tensor{},
                        accumulate);
    return y;
  }
  std::string str(bool bias, bool accumulate) const {
    return std::string(dtype_name(t)) + " N" + std::to_string(N) + " O" + std::to_string(O) + " I" +
           std::to_string(I) + (bias ? " bias" : "") + (accumulate ? " accumulate" : "");
  }
  // x·wᵀ in double, Σ|x w| and the activation rounding's bound (the header's), per output.
  struct Ref {
    std::vector<double> dot, mag, quant;
  };
  Ref reference() const {
    const int64_t B = dtype_is_quantized(t) ? quant::act_block(t) : 0;
    std::vector<double> step(size_t(N * I), 0.0);  // d(e) / 2 of each activation
    if (B)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b0 = 0; b0 < I; b0 += B) {
          float amax = 0;
          for (int64_t e = b0; e < b0 + B; ++e) amax = std::max(amax, std::fabs(x[n * I + e]));
          for (int64_t e = b0; e < b0 + B; ++e) step[n * I + e] = double(amax) / 127.0 / 2.0;
        }
    Ref r{std::vector<double>(size_t(N * O)), std::vector<double>(size_t(N * O)),
          std::vector<double>(size_t(N * O))};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        double s = 0, mag = 0, quant = 0;
        for (int64_t e = 0; e < I; ++e) {
          const double xv = x[n * I + e], wv = wf[o * I + e];
          s += xv * wv, mag += std::fabs(xv * wv), quant += std::fabs(wv) * step[n * I + e];
        }
        r.dot[n * O + o] = s, r.mag[n * O + o] = mag, r.quant[n * O + o] = quant;
      }
    return r;
  }
  // got against (accumulate ? y0 : 0) + b + x·wᵀ within the header's bound.
  void check(const Ref& r, bool bias, bool accumulate, const std::vector<float>& got) const {
    double worst = 0;
    int64_t at = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        const int64_t i = n * O + o;
        double s = r.dot[i], mag = r.mag[i];
        if (bias) s += b[o], mag += std::fabs(b[o]);
        if (accumulate) s += y0[i], mag += std::fabs(y0[i]);
        const double tol = r.quant[i] * (1 + 1e-5) + kOpAbs + kOpRel * mag;
        const double ratio = std::fabs(double(got[i]) - s) / tol;
        if (!(ratio <= worst)) worst = ratio, at = i;  // NaN-safe
      }
    EXPECT_LE(worst, 1.0) << str(bias, accumulate) << ": output " << at << " = " << got[at];
  }
};

}  // namespace

// Every type against the dequantized double reference on odd sizes: N ∈ {1, 3, 17, 130, 600}
// covers the one-input GEMV, few inputs and the blocked GEMM (partial register tiles and input
// tiles), O ∈ {37, 300} partial row tiles and several tasks, I one, three and eight blocks.
TEST(LinearQuant, MatchesDequantizedReference) {
  for (DType t : kTypes)
    for (int64_t O : {37, 300})
      for (int64_t blocks : {1, 3, 8}) {
        const int64_t I = blocks * (t == DType::F16 ? 32 : dtype_block_elems(t));
        const Case weights(t, 1, O, I, uint64_t(O * 3 + blocks + int(t) * 1000));
        for (int64_t N : {1, 3, 17, 130, 600}) {
          if (N * O * I > 4'000'000) continue;  // keep the double reference quick
          Case c = weights;
          c.N = N;
          c.x = randn<float>(size_t(N * I), uint64_t(N));
          c.y0 = randn<float>(size_t(N * O), uint64_t(N + 1));
          const Case::Ref ref = c.reference();
          for (bool bias : {false, true})
            for (bool accumulate : {false, true})
              c.check(ref, bias, accumulate, c.run(bias, accumulate));
        }
      }
}

TEST(LinearQuant, ThreadCountDoesNotChangeBits) {
  for (DType t : kTypes) {
    const Case weights(t, 1, 301, 3 * (t == DType::F16 ? 32 : dtype_block_elems(t)), 40);
    for (int64_t N : {1, 5, 130}) {
      Case c = weights;
      c.N = N;
      c.x = randn<float>(size_t(N * c.I), uint64_t(N));
      c.y0 = randn<float>(size_t(N * c.O), uint64_t(N + 1));
      omp_set_num_threads(1);
      const auto one = c.run(true, true);
      omp_set_num_threads(2);
      const auto two = c.run(true, true);
      omp_set_num_threads(omp_get_num_procs());
      EXPECT_EQ(one, two) << c.str(true, true);
    }
  }
}

// Each row of a batch has the bits of the same input run alone (N = 1 takes the GEMV, the batch
// the blocked GEMM): a sequence's logits do not depend on its batch.
TEST(LinearQuant, OneInputGivesTheBitsOfItsRowInABatch) {
  for (DType t : kTypes) {
    if (t == DType::F16) continue;  // its GEMM is sgemm on widened tiles (linear_bf16.cpp)
    const int64_t I = 3 * dtype_block_elems(t), O = 37, N = 9;
    Case batch(t, N, O, I, 77);
    const auto all = batch.run(true, false);
    for (int64_t n = 0; n < N; ++n) {
      Case one = batch;
      one.N = 1;
      one.x.assign(batch.x.begin() + n * I, batch.x.begin() + (n + 1) * I);
      const std::vector<float> row(all.begin() + n * O, all.begin() + (n + 1) * O);
      EXPECT_EQ(one.run(true, false), row) << dtype_name(t) << " row " << n;
    }
  }
}

// The op gives the same bits on every ISA this CPU runs (quant/dot.h defines each dot exactly).
TEST(LinearQuant, EveryIsaGivesTheSameBits) {
  const quant::Isa best = quant::active_isa();
  for (DType t : kTypes) {
    if (t == DType::F16) continue;
    for (int64_t N : {1, 6}) {
      Case c(t, N, 37, 3 * dtype_block_elems(t), 5 + N);
      quant::set_isa(quant::Isa::Scalar);
      const auto ref = c.run(true, false);
      for (quant::Isa isa : {quant::Isa::Avx2, quant::Isa::Avx512Vnni}) {
        if (!quant::isa_supported(isa)) continue;
        quant::set_isa(isa);
        EXPECT_EQ(c.run(true, false), ref) << c.str(true, false) << " " << quant::isa_name(isa);
      }
      quant::set_isa(best);
    }
  }
}

// Caller bugs abort (partial blocks, a backward); a quantized weight on the GPU is a user's error.
TEST(LinearQuant, RejectsPartialBlocksBackwardAndTheGpu) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the stealing team's threads are running
  std::vector<uint8_t> w(dtype_bytes(DType::Q4_K, 512));
  std::vector<float> x(256), y(2);
  EXPECT_DEATH(ops::linear_forward(Tensor(y.data(), {1, 1}), Tensor(x.data(), {1, 40}),
                                   Tensor(w.data(), DType::Q4_K, {1, 40}), {}),
               "whole blocks of 256");
  EXPECT_DEATH(
      ops::linear_backward(Tensor(x.data(), {1, 256}), {}, {}, Tensor(y.data(), {1, 2}),
                           Tensor(x.data(), {1, 256}), Tensor(w.data(), DType::Q4_K, {2, 256})),
      "no backward");
  expect_contains(error_of([&] {
                    ops::linear_forward(Tensor(y.data(), {1, 1}).on(Device::Gpu),
                                        Tensor(x.data(), {1, 256}).on(Device::Gpu),
                                        Tensor(w.data(), DType::Q4_K, {1, 256}).on(Device::Gpu),
                                        {});
                  }),
                  "has no kernel");
}

// embedding_forward gathers rows dequantized exactly as quant::dequantize_row gives them.
TEST(EmbeddingQuant, GathersDequantizedRows) {
  for (DType t : kTypes) {
    const int64_t V = 37, N = 9, D = 3 * (t == DType::F16 ? 32 : dtype_block_elems(t));
    Case c(t, 1, V, D, 3);
    std::vector<int32_t> ids = {0, 36, 5, 5, 17, 1, 36, 2, 0};
    std::vector<float> out(size_t(N * D), NAN);
    ops::embedding_forward(Tensor(out.data(), {N, D}), Tensor(ids.data(), {N}),
                           Tensor(c.w.data() + 1, t, {V, D}));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < D; ++j)
        ASSERT_EQ(out[n * D + j], c.wf[ids[n] * D + j]) << dtype_name(t) << " n" << n << " j" << j;
  }
}
