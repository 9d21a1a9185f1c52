// linear_forward with BF16 weights (all regimes: the one-input GEMV, the streaming GEMV for
// 1 < N ≤ 128 and widened tiles + sgemm above) against a double reference of the bf16 weights, and
// against the F32 linear on the widened weights; bias and accumulate; weights at a 2-byte offset;
// thread-count independent bits; a row's bits the same alone (N = 1) as in a batch;
// embedding_forward with a BF16 table.
//
// Tolerance: the op sums I products in f32, whose rounding error grows with Σ_e |x_e||w_e| rather
// than with |y| (cancelling sums have a small |y| but not a small error). Each element is checked
// as |got − ref| ≤ kOpAbs + kOpRel · (Σ_e |x_e w_e| + |b| + |y_prefill|), the table's abs 1e-5 +
// rel 1e-5 with the relative part taken of that magnitude; since |ref| ≤ the magnitude it is never
// looser than the sum of terms allows, and f32 accumulation over I up to a few thousand stays
// ~10× inside it.
#include <omp.h>

#include <cstring>
#include <string>

#include "core/dtype.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

// |got − ref| ≤ kOpAbs + kOpRel · scale, element-wise.
void expect_close_scaled(const std::vector<float>& got, const std::vector<double>& ref,
                         const std::vector<double>& scale, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ratio = std::fabs(double(got[i]) - ref[i]) / (kOpAbs + kOpRel * scale[i]);
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;  // NaN-safe
  }
  EXPECT_LE(worst_ratio, 1.0) << what << ": element " << worst << " got " << got[worst] << " want "
                              << ref[worst];
}

// One problem: x[N,I], bf16 w[O,I] stored at a 2-byte offset when `offset` (mmap'd safetensors
// give no better alignment), b[O], y prefill[N,O].
struct Case {
  int64_t N, O, I;
  std::vector<float> x, b, y0;
  std::vector<uint16_t> w_store;  // [offset + O·I]
  int offset;
  Case(int64_t N_, int64_t O_, int64_t I_, uint64_t seed, int offset_ = 1)
      : N(N_), O(O_), I(I_), offset(offset_) {
    x = randn<float>(N * I, seed);
    b = randn<float>(O, seed + 1);
    y0 = randn<float>(N * O, seed + 2);
    w_store.assign(offset, 0);
    const auto w = to_bf16(randn<float>(O * I, seed + 3, 1.0 / std::sqrt(double(I))));
    w_store.insert(w_store.end(), w.begin(), w.end());
  }
  uint16_t* w() { return w_store.data() + offset; }
  float wf(int64_t i) const { return bf16_to_f32(w_store[offset + i]); }

  // y = (accumulate ? y0 : 0) + b + x·wᵀ through the op.
  std::vector<float> run(bool bias, bool accumulate) {
    std::vector<float> y = accumulate ? y0 : std::vector<float>(N * O, NAN);
    ops::linear_forward(Tensor(y.data(), {N, O}), Tensor(x.data(), {N, I}),
                        Tensor((void*)w(), DType::BF16, {O, I}),
                        bias ? Tensor(b.data(), {O}) : Tensor{}, accumulate);
    return y;
  }
  // The double reference and its error scale Σ|x w| + |b| + |y0|.
  void reference(bool bias, bool accumulate, std::vector<double>& ref,
                 std::vector<double>& scale) const {
    ref.assign(N * O, 0.0);
    scale.assign(N * O, 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        double s = 0, mag = 0;
        for (int64_t e = 0; e < I; ++e) {
          const double p = double(x[n * I + e]) * double(wf(o * I + e));
          s += p, mag += std::fabs(p);
        }
        if (bias) s += b[o], mag += std::fabs(b[o]);
        if (accumulate) s += y0[n * O + o], mag += std::fabs(y0[n * O + o]);
        ref[n * O + o] = s;
        scale[n * O + o] = mag;
      }
  }
  std::string str(bool bias, bool accumulate) const {
    return "N" + std::to_string(N) + " O" + std::to_string(O) + " I" + std::to_string(I) +
           (bias ? " bias" : "") + (accumulate ? " accumulate" : "");
  }
};

}  // namespace

TEST(LinearBf16, MatchesDoubleReferenceOnOddSizes) {
  for (int64_t N : {1, 2, 3, 5, 16, 17, 64, 300})
    for (int64_t O : kOddSizes)
      for (int64_t I : kOddSizes) {
        if (N * O * I > 2'000'000 && !(O == 257 && I == 257)) continue;  // keep the big N quick
        Case c(N, O, I, uint64_t(N * 1000 + O * 10 + I));
        for (bool bias : {false, true})
          for (bool accumulate : {false, true}) {
            std::vector<double> ref, scale;
            c.reference(bias, accumulate, ref, scale);
            expect_close_scaled(c.run(bias, accumulate), ref, scale, c.str(bias, accumulate));
          }
      }
}

// Long rows: f32 accumulation over a few thousand products, both regimes.
TEST(LinearBf16, LongRows) {
  for (int64_t N : {1, 4, 17}) {
    Case c(N, 33, 3001, 5 + N);
    std::vector<double> ref, scale;
    c.reference(true, false, ref, scale);
    expect_close_scaled(c.run(true, false), ref, scale, c.str(true, false));
  }
}

// Against the F32 op on the widened weights (same contract, sgemm on f32 weights).
TEST(LinearBf16, MatchesF32LinearOnWidenedWeights) {
  for (int64_t N : {1, 3, 16, 17, 64, 128, 129}) {
    Case c(N, 257, 31, 77 + N);
    std::vector<float> wf(c.O * c.I);
    for (int64_t i = 0; i < c.O * c.I; ++i) wf[i] = c.wf(i);
    std::vector<float> y = c.y0;
    ops::linear_forward(Tensor(y.data(), {N, c.O}), Tensor(c.x.data(), {N, c.I}),
                        Tensor(wf.data(), {c.O, c.I}), Tensor(c.b.data(), {c.O}), true);
    std::vector<double> ref, scale;
    c.reference(true, true, ref, scale);
    expect_close_scaled(c.run(true, true), cast<double>(y), scale, c.str(true, true));
  }
}

// The weight pointer's alignment does not change the result.
TEST(LinearBf16, UnalignedWeightsGiveTheSameBits) {
  for (int64_t N : {1, 4, 17}) {
    Case aligned(N, 33, 257, 3, 0), shifted(N, 33, 257, 3, 1);
    EXPECT_EQ(aligned.run(true, false), shifted.run(true, false)) << "N" << N;
  }
}

TEST(LinearBf16, ThreadCountDoesNotChangeBits) {
  for (int64_t N : {1, 3, 64}) {
    Case c(N, 257, 257, 11);
    omp_set_num_threads(1);
    const auto one = c.run(true, true);
    omp_set_num_threads(3);
    const auto three = c.run(true, true);
    omp_set_num_threads(omp_get_num_procs());
    EXPECT_EQ(one, three) << "N" << N;
  }
}

// Each row of a batched GEMV (N ≤ 16, the row-block kernel) has the bits of the same input run
// alone (N = 1, the single-stream kernel): a sequence's logits do not depend on its batch. Row
// lengths cover the SIMD tails (multiples of 8, 16 and 32 and neither).
TEST(LinearBf16, OneInputGivesTheBitsOfItsRowInABatch) {
  for (int64_t I : {1, 15, 16, 31, 32, 40, 48, 257, 1000})
    for (int64_t N : {2, 5, 16}) {
      Case batch(N, 37, I, 900 + I);
      const auto all = batch.run(true, true);
      for (int64_t n = 0; n < N; ++n) {
        Case one(1, 37, I, 900 + I);
        one.x.assign(batch.x.begin() + n * I, batch.x.begin() + (n + 1) * I);
        one.y0.assign(batch.y0.begin() + n * 37, batch.y0.begin() + (n + 1) * 37);
        const std::vector<float> row(all.begin() + n * 37, all.begin() + (n + 1) * 37);
        EXPECT_EQ(one.run(true, true), row) << "I" << I << " N" << N << " row " << n;
      }
    }
}

TEST(EmbeddingBf16, GathersWidenedRows) {
  for (int64_t D : kOddSizes) {
    const int64_t V = 37, N = 9;
    const auto table = to_bf16(randn<float>(V * D, 5 + D));
    std::vector<uint16_t> store(1, 0);  // 2-byte offset
    store.insert(store.end(), table.begin(), table.end());
    std::vector<int32_t> ids = {0, 36, 5, 5, 17, 1, 36, 2, 0};
    std::vector<float> out(N * D, NAN);
    ops::embedding_forward(Tensor(out.data(), {N, D}), Tensor(ids.data(), {N}),
                           Tensor((void*)(store.data() + 1), DType::BF16, {V, D}));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < D; ++j)
        ASSERT_EQ(out[n * D + j], bf16_to_f32(table[ids[n] * D + j])) << "n" << n << " j" << j;
  }
}
