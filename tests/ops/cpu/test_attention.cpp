// attention: forward (o, lse) against a full-softmax double reference; backward against the
// analytic double reference (docs/model.md §8.5 step 1) and central-difference gradients; odd sizes
// that cross the 64-row tiles; head sizes around the SIMD width; causality; bitwise determinism
// across thread counts.
#include <omp.h>

#include <cstring>
#include <limits>
#include <string>

#include "ops/cpu/attention_simd.h"
#include "ops/cpu/exp_vec.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Shape {
  int64_t B, T, Hq, Hk, d;
  size_t nq() const { return size_t(B * T * Hq * d); }
  size_t nk() const { return size_t(B * T * Hk * d); }
  size_t nlse() const { return size_t(B * Hq * T); }
  std::string str() const {
    return "B" + std::to_string(B) + " T" + std::to_string(T) + " Hq" + std::to_string(Hq) + " Hk" +
           std::to_string(Hk) + " d" + std::to_string(d);
  }
};

// The inputs of one case, drawn in double (F32 runs use them rounded to float, and the
// reference then sees the same rounded values).
struct Inputs {
  std::vector<double> q, k, v, dout;
};
Inputs make_inputs(const Shape& s, uint64_t seed, double qk_scale = 1.0) {
  return {randn<double>(s.nq(), seed, qk_scale), randn<double>(s.nk(), seed + 1, qk_scale),
          randn<double>(s.nk(), seed + 2), randn<double>(s.nq(), seed + 3)};
}
template <class T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}
std::vector<double> round_trip_f32(const std::vector<double>& x) {
  auto f = cast<float>(x);
  return std::vector<double>(f.begin(), f.end());
}

// Scores of query (b, t, h) against keys τ ≤ t, softmax in double: fills a[0..t], returns lse.
double reference_probs(const Shape& s, const std::vector<double>& q, const std::vector<double>& k,
                       int64_t b, int64_t t, int64_t h, std::vector<double>& a) {
  const int64_t g = h / (s.Hq / s.Hk);
  const double scale = 1.0 / std::sqrt(double(s.d));
  const double* qt = &q[((b * s.T + t) * s.Hq + h) * s.d];
  double mx = -std::numeric_limits<double>::infinity();
  a.resize(t + 1);
  for (int64_t tau = 0; tau <= t; ++tau) {
    const double* kt = &k[((b * s.T + tau) * s.Hk + g) * s.d];
    double dot = 0;
    for (int64_t e = 0; e < s.d; ++e) dot += qt[e] * kt[e];
    a[tau] = dot * scale;
    mx = std::max(mx, a[tau]);
  }
  double sum = 0;
  for (auto& x : a) sum += (x = std::exp(x - mx));
  for (auto& x : a) x /= sum;
  return mx + std::log(sum);
}

void reference_forward(const Shape& s, const Inputs& in, std::vector<double>& o,
                       std::vector<double>& lse) {
  o.assign(s.nq(), 0.0);
  lse.assign(s.nlse(), 0.0);
  std::vector<double> a;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.Hq; ++h) {
        const int64_t g = h / (s.Hq / s.Hk);
        lse[(b * s.Hq + h) * s.T + t] = reference_probs(s, in.q, in.k, b, t, h, a);
        double* ot = &o[((b * s.T + t) * s.Hq + h) * s.d];
        for (int64_t tau = 0; tau <= t; ++tau)
          for (int64_t e = 0; e < s.d; ++e)
            ot[e] += a[tau] * in.v[((b * s.T + tau) * s.Hk + g) * s.d + e];
      }
}

// Spec §8.5 step 1, literally: ḡa = ⟨ḡō_t, V_τ⟩, ḡs = a(ḡa − Σ a ḡa), then dq, dk, dv.
void reference_backward(const Shape& s, const Inputs& in, std::vector<double>& dq,
                        std::vector<double>& dk, std::vector<double>& dv) {
  dq.assign(s.nq(), 0.0);
  dk.assign(s.nk(), 0.0);
  dv.assign(s.nk(), 0.0);
  const double scale = 1.0 / std::sqrt(double(s.d));
  std::vector<double> a, ga;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.Hq; ++h) {
        const int64_t g = h / (s.Hq / s.Hk), qi = ((b * s.T + t) * s.Hq + h) * s.d;
        reference_probs(s, in.q, in.k, b, t, h, a);
        ga.assign(t + 1, 0.0);
        double row = 0;
        for (int64_t tau = 0; tau <= t; ++tau) {
          for (int64_t e = 0; e < s.d; ++e)
            ga[tau] += in.dout[qi + e] * in.v[((b * s.T + tau) * s.Hk + g) * s.d + e];
          row += a[tau] * ga[tau];
        }
        for (int64_t tau = 0; tau <= t; ++tau) {
          const int64_t ki = ((b * s.T + tau) * s.Hk + g) * s.d;
          const double gs = a[tau] * (ga[tau] - row);
          for (int64_t e = 0; e < s.d; ++e) {
            dq[qi + e] += gs * in.k[ki + e] * scale;
            dk[ki + e] += gs * in.q[qi + e] * scale;
            dv[ki + e] += a[tau] * in.dout[qi + e];
          }
        }
      }
}

// The op under test on the inputs cast to T. Outputs start as NaN so a missed write shows.
template <class T>
struct OpRun {
  std::vector<T> q, k, v, dout, o, lse, dq, dk, dv;
};
template <class T>
OpRun<T> run_op(const Shape& s, const Inputs& in, bool backward = true) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  OpRun<T> r{cast<T>(in.q),
             cast<T>(in.k),
             cast<T>(in.v),
             cast<T>(in.dout),
             std::vector<T>(s.nq(), nan),
             std::vector<T>(s.nlse(), nan),
             std::vector<T>(s.nq(), nan),
             std::vector<T>(s.nk(), nan),
             std::vector<T>(s.nk(), nan)};
  Tensor q(r.q.data(), {s.B, s.T, s.Hq, s.d}), k(r.k.data(), {s.B, s.T, s.Hk, s.d}),
      v(r.v.data(), {s.B, s.T, s.Hk, s.d}), o(r.o.data(), {s.B, s.T, s.Hq, s.d}),
      lse(r.lse.data(), {s.B, s.Hq, s.T});
  ops::attention_forward(o, lse, q, k, v);
  if (backward)
    ops::attention_backward(Tensor(r.dq.data(), {s.B, s.T, s.Hq, s.d}),
                            Tensor(r.dk.data(), {s.B, s.T, s.Hk, s.d}),
                            Tensor(r.dv.data(), {s.B, s.T, s.Hk, s.d}),
                            Tensor(r.dout.data(), {s.B, s.T, s.Hq, s.d}), q, k, v, o, lse);
  return r;
}

// The odd-size grid: T crosses the 64-row tiles; GQA ratios 1, 2, 2, 4; d not a SIMD multiple.
std::vector<Shape> odd_shapes() {
  std::vector<Shape> shapes;
  const int64_t heads[][2] = {{1, 1}, {4, 2}, {6, 3}, {8, 2}};
  for (int64_t T : {1, 2, 7, 31, 33, 65, 257})
    for (auto& hh : heads)
      for (int64_t d : {8, 6})
        for (int64_t B : {1, 2}) shapes.push_back({B, T, hh[0], hh[1], d});
  return shapes;
}

}  // namespace

// Forward (o, lse) and backward (dq, dk, dv) on the whole grid, in f32 and in f64. F32 runs see
// inputs rounded to float and are compared with the reference on the same rounded inputs; the
// f32 gradients meet the plain op tolerance (the worst cases here use about half of it).
template <class T>
void check_odd_sizes(uint64_t seed, double abs_tol, double rel_tol) {
  for (const Shape& s : odd_shapes()) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(s, seed += 4);
    if (sizeof(T) == 4)
      in = {round_trip_f32(in.q), round_trip_f32(in.k), round_trip_f32(in.v),
            round_trip_f32(in.dout)};
    auto r = run_op<T>(s, in);
    std::vector<double> o, lse, dq, dk, dv;
    reference_forward(s, in, o, lse);
    reference_backward(s, in, dq, dk, dv);
    expect_close(r.o, o, abs_tol, rel_tol, "o");
    expect_close(r.lse, lse, abs_tol, rel_tol, "lse");
    expect_close(r.dq, dq, abs_tol, rel_tol, "dq");
    expect_close(r.dk, dk, abs_tol, rel_tol, "dk");
    expect_close(r.dv, dv, abs_tol, rel_tol, "dv");
  }
}

// f32 forward and backward against the double reference on the same f32-rounded inputs.
void expect_f32_forward_backward_match_reference(const Shape& s, uint64_t seed) {
  Inputs in = make_inputs(s, seed);
  auto r = run_op<float>(s, in);
  Inputs rounded{round_trip_f32(in.q), round_trip_f32(in.k), round_trip_f32(in.v),
                 round_trip_f32(in.dout)};
  std::vector<double> o, lse, dq, dk, dv;
  reference_forward(s, rounded, o, lse);
  reference_backward(s, rounded, dq, dk, dv);
  expect_close(r.o, o, kOpAbs, kOpRel, "o");
  expect_close(r.lse, lse, kOpAbs, kOpRel, "lse");
  expect_close(r.dq, dq, kOpAbs, kOpRel, "dq");
  expect_close(r.dk, dk, kOpAbs, kOpRel, "dk");
  expect_close(r.dv, dv, kOpAbs, kOpRel, "dv");
}

TEST(Attention, F32MatchesReferenceOnOddSizes) {
  check_odd_sizes<float>(100, kOpAbs, kOpRel);
}

TEST(Attention, F64MatchesReferenceOnOddSizes) {
  check_odd_sizes<double>(200, 1e-12, 1e-12);
}

// Scores with standard deviation ~16: later tiles often raise the running max, so the rescaling
// of the online softmax is exercised. Relative error of p grows with |s|·ε_f32, so lse and o
// stay within the op tolerance.
TEST(Attention, ForwardF32PeakedScores) {
  const Shape s{2, 257, 4, 2, 8};
  Inputs in = make_inputs(s, 300, 4.0);
  auto r = run_op<float>(s, in, false);
  Inputs rounded{round_trip_f32(in.q), round_trip_f32(in.k), round_trip_f32(in.v), {}};
  std::vector<double> o, lse;
  reference_forward(s, rounded, o, lse);
  expect_close(r.o, o, kOpAbs, kOpRel, "o");
  expect_close(r.lse, lse, kOpAbs, kOpRel, "lse");
}

TEST(Attention, BackwardMatchesNumericalGradient) {
  // The second shape crosses a tile boundary (T = 70 > 64) with GQA.
  for (const Shape& s : {Shape{2, 5, 4, 2, 6}, Shape{1, 70, 2, 1, 4}}) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(s, 400);
    auto loss = [&] {
      auto r = run_op<double>(s, in, false);
      return dot(r.o, in.dout);
    };
    auto r = run_op<double>(s, in);
    expect_grad_close(r.dq, numerical_grad(loss, in.q.data(), in.q.size()), kGradRelDouble, "dq");
    expect_grad_close(r.dk, numerical_grad(loss, in.k.data(), in.k.size()), kGradRelDouble, "dk");
    expect_grad_close(r.dv, numerical_grad(loss, in.v.data(), in.v.size()), kGradRelDouble, "dv");
  }
}

// 16 query tiles: forward and backward in f32 against the double reference at scale.
TEST(Attention, LongContextF32) {
  const Shape s{1, 1024, 4, 2, 8};
  expect_f32_forward_backward_match_reference(s, 700);
}

// A realistic head size (d = 64: no column padding, two GEMM column blocks) with G = 4.
TEST(Attention, WideHeadsF32) {
  const Shape s{1, 200, 4, 1, 64};
  expect_f32_forward_backward_match_reference(s, 750);
}

// The tile kernels' edge cases: T around the 64-row tile (1, 63, 65, 130) and head sizes that are
// (16, 128) and are not (24, 80) a multiple of the SIMD width, with GQA; f32 and f64.
TEST(Attention, TileAndHeadSizeEdges) {
  uint64_t seed = 1100;
  for (int64_t d : {16, 24, 80, 128})
    for (int64_t T : {1, 63, 65, 130}) {
      const Shape s{1, T, 4, 2, d};
      SCOPED_TRACE(s.str());
      expect_f32_forward_backward_match_reference(s, seed += 4);
      const Inputs in = make_inputs(s, seed + 2);
      auto r = run_op<double>(s, in);
      std::vector<double> o, lse, dq, dk, dv;
      reference_forward(s, in, o, lse);
      reference_backward(s, in, dq, dk, dv);
      expect_close(r.o, o, 1e-12, 1e-12, "o");
      expect_close(r.lse, lse, 1e-12, 1e-12, "lse");
      expect_close(r.dq, dq, 1e-12, 1e-12, "dq");
      expect_close(r.dk, dk, 1e-12, 1e-12, "dk");
      expect_close(r.dv, dv, 1e-12, 1e-12, "dv");
    }
}

// Changing keys and values after position t0 leaves outputs (and lse) at positions ≤ t0 bitwise
// unchanged; the values at ≤ t0 do change when perturbed (sanity of the check).
TEST(Attention, Causal) {
  const Shape s{2, 150, 4, 2, 8};
  const int64_t t0 = 70;
  Inputs in = make_inputs(s, 800);
  auto base = run_op<float>(s, in, false);
  Inputs future = in;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = t0 + 1; t < s.T; ++t)
      for (int64_t i = 0; i < s.Hk * s.d; ++i) {
        future.k[(b * s.T + t) * s.Hk * s.d + i] += 1.0;
        future.v[(b * s.T + t) * s.Hk * s.d + i] -= 2.0;
      }
  auto moved = run_op<float>(s, future, false);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.Hq; ++h) {
        const float* x = &base.o[((b * s.T + t) * s.Hq + h) * s.d];
        const float* y = &moved.o[((b * s.T + t) * s.Hq + h) * s.d];
        const bool same = std::memcmp(x, y, s.d * sizeof(float)) == 0;
        EXPECT_EQ(same, t <= t0) << "b " << b << " t " << t << " h " << h;
        const int64_t li = (b * s.Hq + h) * s.T + t;
        if (t <= t0) {
          EXPECT_EQ(base.lse[li], moved.lse[li]);
        }
      }
}

// Same bits for 1, 2 and 3 threads (each output is written by one task in a fixed order). The
// second shape has few heads, so the backward splits each head's key tiles into chunks whose dq
// partials are summed afterwards.
TEST(Attention, DeterministicAcrossThreadCounts) {
  for (const Shape& s : {Shape{2, 200, 8, 2, 16}, Shape{1, 700, 2, 1, 24}}) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(s, 900);
    const int keep = omp_get_max_threads();
    std::vector<OpRun<float>> runs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      runs.push_back(run_op<float>(s, in));
    }
    omp_set_num_threads(keep);
    for (size_t i = 1; i < runs.size(); ++i) {
      EXPECT_EQ(runs[i].o, runs[0].o);
      EXPECT_EQ(runs[i].lse, runs[0].lse);
      EXPECT_EQ(runs[i].dq, runs[0].dq);
      EXPECT_EQ(runs[i].dk, runs[0].dk);
      EXPECT_EQ(runs[i].dv, runs[0].dv);
    }
  }
}

// A NaN query poisons its own output row (training must see divergence), and only that row.
TEST(Attention, NanPropagates) {
  const Shape s{1, 9, 2, 1, 8};
  Inputs in = make_inputs(s, 1000);
  const int64_t t = 4, h = 1;
  in.q[(t * s.Hq + h) * s.d + 3] = std::numeric_limits<double>::quiet_NaN();
  auto r = run_op<float>(s, in, false);
  for (int64_t tt = 0; tt < s.T; ++tt)
    for (int64_t hh = 0; hh < s.Hq; ++hh) {
      const bool poisoned = tt == t && hh == h;
      EXPECT_EQ(std::isnan(r.o[(tt * s.Hq + hh) * s.d]), poisoned) << "t " << tt << " h " << hh;
    }
}

// The softmax's vector e^x gives exp_vec's bits lane by lane, edge values included (−inf and
// x < −87 → 0, the clamp at 88, NaN), and stays within 2 ulp of libm on the working range.
TEST(Attention, ExpSimdMatchesExpVec) {
  using V = ops::cpu::attn::Simd<float>::vec;
  constexpr int W = ops::cpu::attn::Simd<float>::kLanes;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {
      -inf,  -1e30f, -88.0f, -87.0f, -86.99f, -1.0f,
      -0.0f, 0.0f,   1e-8f,  0.5f,   1.0f,    10.0f,
      87.9f, 88.0f,  88.5f,  1e30f,  inf,     std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i <= 4000; ++i) xs.push_back(-87.0f + 0.04375f * float(i));
  while (xs.size() % W) xs.push_back(0.25f);
  for (size_t i = 0; i < xs.size(); i += W) {
    V x;
    std::memcpy(&x, &xs[i], sizeof(V));
    const V y = ops::cpu::attn::exp_simd<float>(x);
    for (int l = 0; l < W; ++l) {
      const float want = ops::cpu::exp_vec(xs[i + l]);
      EXPECT_EQ(std::memcmp(&y[l], &want, sizeof(float)), 0) << "x " << xs[i + l];
      if (xs[i + l] >= -87.0f && xs[i + l] <= 88.0f) {
        const double ref = std::exp(double(xs[i + l]));
        EXPECT_LE(std::abs(double(y[l]) - ref), 2 * ref * std::numeric_limits<float>::epsilon())
            << "x " << xs[i + l];
      }
    }
  }
}
