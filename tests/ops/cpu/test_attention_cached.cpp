// Decoding ops: cca_conv_step_forward continued over random chunkings equals cca_conv_forward (and
// the double reference of docs/model.md §4.2) row for row, including chunks of 1 and 2 and the zero
// start state; attention_cached_forward equals attention_forward's last L rows and a double softmax
// reference for several S, L and GQA ratios; both are thread-count independent bitwise; BF16 conv
// weights give the F32 result on the same values.
#include <omp.h>

#include <cmath>
#include <string>

#include "core/dtype.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// ------------------------------------------------------------------ conv step
struct ConvCase {
  int64_t T, groups, d, C;
  std::vector<float> u, w0, b0, w1, b1;
  ConvCase(int64_t T_, int64_t groups_, int64_t d_, uint64_t seed)
      : T(T_), groups(groups_), d(d_), C(groups_ * d_) {
    u = randn<float>(T * C, seed);
    w0 = randn<float>(2 * C, seed + 1, 0.7);
    b0 = randn<float>(C, seed + 2, 0.5);
    w1 = randn<float>(C * d * 2, seed + 3, 1.0 / std::sqrt(2.0 * d));
    b1 = randn<float>(C, seed + 4, 0.5);
  }
  // With `bf16`, the conv weights are passed as BF16 copies (see use_bf16_weights).
  bool bf16 = false;
  std::vector<uint16_t> w0h, w1h;
  Tensor w0_t() {
    return bf16 ? Tensor(w0h.data(), DType::BF16, {C, 1, 2}) : Tensor(w0.data(), {C, 1, 2});
  }
  Tensor b0_t() { return Tensor(b0.data(), {C}); }
  Tensor w1_t() {
    return bf16 ? Tensor(w1h.data(), DType::BF16, {C, d, 2}) : Tensor(w1.data(), {C, d, 2});
  }
  // Rounds w0 and w1 to bf16 in place (so the F32 case holds the same values) and keeps the bf16.
  void round_weights_to_bf16() {
    for (auto [f, h] : {std::pair{&w0, &w0h}, std::pair{&w1, &w1h}}) {
      h->resize(f->size());
      for (size_t i = 0; i < f->size(); ++i) (*f)[i] = bf16_to_f32((*h)[i] = f32_to_bf16((*f)[i]));
    }
  }
  Tensor b1_t() { return Tensor(b1.data(), {C}); }
};

// Spec §4.2 in double, one sequence: z[T,C] with u_{t<0} = 0 and y_{−1} = b0.
std::vector<double> conv_reference(const ConvCase& p) {
  auto u = [&](int64_t t, int64_t c) { return t < 0 ? 0.0 : double(p.u[t * p.C + c]); };
  auto y = [&](int64_t j, int64_t c) {
    return double(p.b0[c]) + double(p.w0[2 * c]) * u(j - 1, c) + double(p.w0[2 * c + 1]) * u(j, c);
  };
  std::vector<double> z(p.T * p.C);
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t g = c / p.d;
      double s = p.b1[c];
      for (int64_t i = 0; i < p.d; ++i)
        s += double(p.w1[(c * p.d + i) * 2]) * y(t - 1, g * p.d + i) +
             double(p.w1[(c * p.d + i) * 2 + 1]) * y(t, g * p.d + i);
      z[t * p.C + c] = s;
    }
  return z;
}

std::vector<float> conv_whole(ConvCase& p) {
  std::vector<float> z(p.T * p.C, NAN), y((p.T + 1) * p.C);
  ops::cca_conv_forward(Tensor(z.data(), {1, p.T, p.C}), Tensor(y.data(), {1, p.T + 1, p.C}),
                        Tensor(p.u.data(), {1, p.T, p.C}), p.w0_t(), p.b0_t(), p.w1_t(), p.b1_t());
  return z;
}

// Runs the sequence through cca_conv_step_forward in chunks of the given lengths (summing to T),
// from a zero state; returns z[T,C] and the final state.
std::vector<float> conv_chunked(ConvCase& p, const std::vector<int64_t>& lengths,
                                std::vector<float>* final_state = nullptr) {
  std::vector<float> z(p.T * p.C, NAN), state(2 * p.C, 0.0f);
  int64_t t0 = 0;
  for (int64_t len : lengths) {
    ops::cca_conv_step_forward(
        Tensor(z.data() + t0 * p.C, {len, p.C}), Tensor(state.data(), {2, p.C}),
        Tensor(p.u.data() + t0 * p.C, {len, p.C}), p.w0_t(), p.b0_t(), p.w1_t(), p.b1_t());
    t0 += len;
  }
  EXPECT_EQ(t0, p.T);
  if (final_state) *final_state = state;
  return z;
}

// Random chunk lengths in 1…max_len summing to T (deterministic per seed).
std::vector<int64_t> random_chunks(int64_t T, int64_t max_len, uint64_t seed) {
  CounterRng rng{seed, 0};
  std::vector<int64_t> out;
  for (int64_t t = 0, i = 0; t < T; ++i) {
    int64_t len = 1 + int64_t(rng.uniform(i) * double(max_len));
    len = std::min(len, T - t);
    out.push_back(len);
    t += len;
  }
  return out;
}

// ------------------------------------------------------------------ cached attention
struct AttnCase {
  int64_t S, Hq, Hk, d;
  std::vector<float> q, k, v;  // q[S,Hq,d] for all positions; the cached op takes the last L
  AttnCase(int64_t S_, int64_t Hq_, int64_t Hk_, int64_t d_, uint64_t seed)
      : S(S_), Hq(Hq_), Hk(Hk_), d(d_) {
    q = randn<float>(S * Hq * d, seed, 1.5);
    k = randn<float>(S * Hk * d, seed + 1, 1.5);
    v = randn<float>(S * Hk * d, seed + 2);
  }
  std::string str(int64_t L) const {
    return "S" + std::to_string(S) + " L" + std::to_string(L) + " Hq" + std::to_string(Hq) + " Hk" +
           std::to_string(Hk) + " d" + std::to_string(d);
  }
};

std::vector<float> attn_cached(AttnCase& p, int64_t L) {
  std::vector<float> o(L * p.Hq * p.d, NAN);
  ops::attention_cached_forward(
      Tensor(o.data(), {L, p.Hq, p.d}), Tensor(p.q.data() + (p.S - L) * p.Hq * p.d, {L, p.Hq, p.d}),
      Tensor(p.k.data(), {p.S, p.Hk, p.d}), Tensor(p.v.data(), {p.S, p.Hk, p.d}));
  return o;
}

// Full softmax in double for the last L positions.
std::vector<double> attn_reference(const AttnCase& p, int64_t L) {
  const int64_t G = p.Hq / p.Hk;
  std::vector<double> o(L * p.Hq * p.d), s;
  for (int64_t i = 0; i < L; ++i)
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t t = p.S - L + i, g = h / G;
      const float* qr = p.q.data() + (t * p.Hq + h) * p.d;
      s.assign(t + 1, 0.0);
      double m = -INFINITY;
      for (int64_t tau = 0; tau <= t; ++tau) {
        const float* kr = p.k.data() + (tau * p.Hk + g) * p.d;
        double acc = 0;
        for (int64_t e = 0; e < p.d; ++e) acc += double(qr[e]) * double(kr[e]);
        s[tau] = acc / std::sqrt(double(p.d));
        m = std::max(m, s[tau]);
      }
      double l = 0;
      for (double& x : s) l += (x = std::exp(x - m));
      for (int64_t e = 0; e < p.d; ++e) {
        double acc = 0;
        for (int64_t tau = 0; tau <= t; ++tau)
          acc += s[tau] * double(p.v[(tau * p.Hk + g) * p.d + e]);
        o[(i * p.Hq + h) * p.d + e] = acc / l;
      }
    }
  return o;
}

}  // namespace

TEST(CcaConvStep, ChunkedMatchesWholeSequenceAndReference) {
  struct Size {
    int64_t T, groups, d;
  };
  for (Size s : {Size{1, 3, 7}, Size{2, 2, 5}, Size{7, 3, 7}, Size{33, 2, 31}, Size{33, 5, 1},
                 Size{7, 1, 33}}) {
    ConvCase p(s.T, s.groups, s.d, 10 + s.T * 3 + s.d);
    const auto whole = conv_whole(p);
    const auto ref = conv_reference(p);
    expect_close(whole, ref, kOpAbs, kOpRel, "cca_conv_forward vs reference");
    std::vector<std::vector<int64_t>> chunkings = {{s.T}, std::vector<int64_t>(s.T, 1)};
    if (s.T >= 2) {
      chunkings.push_back(std::vector<int64_t>(s.T / 2, 2));
      if (s.T % 2) chunkings.back().push_back(1);
    }
    for (uint64_t seed = 0; seed < 4; ++seed) chunkings.push_back(random_chunks(s.T, 5, seed));
    for (const auto& chunks : chunkings) {
      std::vector<float> state;
      const auto z = conv_chunked(p, chunks, &state);
      const std::string what = "T" + std::to_string(s.T) + " d" + std::to_string(s.d) + " chunks " +
                               std::to_string(chunks.size());
      expect_close(z, ref, kOpAbs, kOpRel, (what + " vs reference").c_str());
      expect_close(z, whole, kOpAbs, kOpRel, (what + " vs cca_conv_forward").c_str());
      // The state ends as the last two raw columns (u_{T−2} is zero padding when T = 1).
      for (int64_t c = 0; c < p.C; ++c) {
        EXPECT_EQ(state[p.C + c], p.u[(s.T - 1) * p.C + c]);
        EXPECT_EQ(state[c], s.T >= 2 ? p.u[(s.T - 2) * p.C + c] : 0.0f);
      }
    }
  }
}

// A zero state reproduces the padding row y_{−1} = b0: with u ≡ 0 every step gives
// z = b1 + Σ_i (w1[c,i,0] + w1[c,i,1])·b0[g·d+i], the first one included.
TEST(CcaConvStep, ZeroStateCarriesStageZeroBias) {
  ConvCase p(3, 2, 5, 77);
  std::fill(p.u.begin(), p.u.end(), 0.0f);
  const auto z = conv_chunked(p, {1, 1, 1});
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t g = c / p.d;
      double want = p.b1[c];
      for (int64_t i = 0; i < p.d; ++i)
        want += (double(p.w1[(c * p.d + i) * 2]) + double(p.w1[(c * p.d + i) * 2 + 1])) *
                double(p.b0[g * p.d + i]);
      EXPECT_NEAR(z[t * p.C + c], want, 1e-5);
    }
}

TEST(CcaConvStep, ThreadCountDoesNotChangeBits) {
  ConvCase p(5, 10, 64, 5);  // L·C·d above kParallelMin
  omp_set_num_threads(1);
  const auto one = conv_chunked(p, {2, 1, 2});
  omp_set_num_threads(3);
  const auto three = conv_chunked(p, {2, 1, 2});
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_EQ(one, three);
}

// BF16 conv weights (a bf16 model's, kept as stored) give the F32 op's result on the same values,
// for single steps, short chunks and a prefill chunk above 16 positions (the widened-tile path).
TEST(CcaConvStep, Bf16WeightsMatchF32OnTheSameValues) {
  for (auto [groups, d] : {std::pair<int64_t, int64_t>{3, 16}, {2, 40}, {10, 128}}) {
    ConvCase p(41, groups, d, 123 + d);
    p.round_weights_to_bf16();
    for (const std::vector<int64_t>& chunks :
         {std::vector<int64_t>(41, 1), std::vector<int64_t>{2, 1, 17, 21},
          std::vector<int64_t>{41}}) {
      p.bf16 = false;
      const auto f32 = conv_chunked(p, chunks);
      p.bf16 = true;
      const auto bf16 = conv_chunked(p, chunks);
      expect_close(bf16, f32, kOpAbs, kOpRel,
                   ("d" + std::to_string(d) + " chunks " + std::to_string(chunks.size())).c_str());
    }
    p.bf16 = true;  // thread-count independent bits with BF16 weights too
    omp_set_num_threads(1);
    const auto one = conv_chunked(p, {1, 2, 38});
    omp_set_num_threads(3);
    const auto three = conv_chunked(p, {1, 2, 38});
    omp_set_num_threads(omp_get_num_procs());
    EXPECT_EQ(one, three) << "d" << d;
  }
}

TEST(AttentionCached, MatchesAttentionForwardRowsAndReference) {
  for (int64_t S : {1, 2, 7, 33, 257}) {
    for (auto [Hq, Hk] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {4, 1}}) {
      for (int64_t d : {7, 16}) {
        AttnCase p(S, Hq, Hk, d, 1000 + S * 7 + Hq + d);
        std::vector<float> o_full(S * Hq * d), lse(Hq * S);
        ops::attention_forward(Tensor(o_full.data(), {1, S, Hq, d}), Tensor(lse.data(), {1, Hq, S}),
                               Tensor(p.q.data(), {1, S, Hq, d}), Tensor(p.k.data(), {1, S, Hk, d}),
                               Tensor(p.v.data(), {1, S, Hk, d}));
        for (int64_t L : {int64_t(1), int64_t(3), S}) {
          if (L > S) continue;
          const auto o = attn_cached(p, L);
          const std::string what = p.str(L);
          expect_close(o, attn_reference(p, L), kOpAbs, kOpRel, (what + " vs reference").c_str());
          expect_close(o.data(), o_full.data() + (S - L) * Hq * d, o.size(), kOpAbs, kOpRel,
                       (what + " vs attention_forward").c_str());
        }
      }
    }
  }
}

// Long caches cross many key chunks; decode (L = 1) and a short chunk (L = 3) against the double
// reference, at the model's head size.
TEST(AttentionCached, LongCacheDecode) {
  AttnCase p(1500, 8, 2, 128, 31);
  for (int64_t L : {1, 3})
    expect_close(attn_cached(p, L), attn_reference(p, L), kOpAbs, kOpRel, p.str(L).c_str());
}

TEST(AttentionCached, ThreadCountDoesNotChangeBits) {
  AttnCase p(700, 4, 2, 32, 9);
  for (int64_t L : {1, 40}) {
    omp_set_num_threads(1);
    const auto one = attn_cached(p, L);
    omp_set_num_threads(3);
    const auto three = attn_cached(p, L);
    omp_set_num_threads(omp_get_num_procs());
    EXPECT_EQ(one, three) << p.str(L);
  }
}
