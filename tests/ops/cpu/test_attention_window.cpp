// Sliding-window attention (ops::attention_forward / attention_backward with window W > 0,
// ops/ops.h: query t sees keys t − W + 1 … t): forward and backward against a double reference that
// applies the window literally, for windows smaller and larger than T, W = 1, windows at and around
// the 64-row tile, odd sizes and GQA, in f64 and f32; central-difference gradients; W ≥ T equal to
// the plain causal op bitwise; keys before a query's window have no effect on it; bitwise
// determinism across thread counts. attention_cached_forward with a window equals the windowed full
// op's last rows, and a cache holding only the window's positions gives the same result.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Shape {
  int64_t B, T, Hq, Hk, d, W;
  size_t nq() const { return size_t(B * T * Hq * d); }
  size_t nk() const { return size_t(B * T * Hk * d); }
  size_t nlse() const { return size_t(B * Hq * T); }
  // The first key query t sees.
  int64_t lo(int64_t t) const { return W == 0 ? 0 : std::max<int64_t>(0, t - W + 1); }
  std::string str() const {
    return "B" + std::to_string(B) + " T" + std::to_string(T) + " Hq" + std::to_string(Hq) + " Hk" +
           std::to_string(Hk) + " d" + std::to_string(d) + " W" + std::to_string(W);
  }
};

struct Inputs {
  std::vector<double> q, k, v, dout;
};
Inputs make_inputs(const Shape& s, uint64_t seed, bool f32) {
  Inputs in{randn<double>(s.nq(), seed), randn<double>(s.nk(), seed + 1),
            randn<double>(s.nk(), seed + 2), randn<double>(s.nq(), seed + 3)};
  if (f32)  // the reference then sees exactly the values the f32 op sees
    for (auto* x : {&in.q, &in.k, &in.v, &in.dout})
      for (auto& e : *x) e = double(float(e));
  return in;
}
template <class T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

// Softmax over the keys lo(t) … t of query (b, t, h) in double: a[τ − lo], returns lse.
double reference_probs(const Shape& s, const Inputs& in, int64_t b, int64_t t, int64_t h,
                       std::vector<double>& a) {
  const int64_t g = h / (s.Hq / s.Hk), lo = s.lo(t);
  const double scale = 1.0 / std::sqrt(double(s.d));
  const double* qt = &in.q[((b * s.T + t) * s.Hq + h) * s.d];
  double mx = -std::numeric_limits<double>::infinity();
  a.assign(size_t(t - lo + 1), 0.0);
  for (int64_t tau = lo; tau <= t; ++tau) {
    const double* kt = &in.k[((b * s.T + tau) * s.Hk + g) * s.d];
    double dot = 0;
    for (int64_t e = 0; e < s.d; ++e) dot += qt[e] * kt[e];
    a[tau - lo] = dot * scale;
    mx = std::max(mx, a[tau - lo]);
  }
  double sum = 0;
  for (auto& x : a) sum += (x = std::exp(x - mx));
  for (auto& x : a) x /= sum;
  return mx + std::log(sum);
}

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};
Reference reference(const Shape& s, const Inputs& in) {
  Reference r{std::vector<double>(s.nq()), std::vector<double>(s.nlse()),
              std::vector<double>(s.nq()), std::vector<double>(s.nk()),
              std::vector<double>(s.nk())};
  const double scale = 1.0 / std::sqrt(double(s.d));
  std::vector<double> a, ga;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.Hq; ++h) {
        const int64_t g = h / (s.Hq / s.Hk), qi = ((b * s.T + t) * s.Hq + h) * s.d, lo = s.lo(t);
        r.lse[(b * s.Hq + h) * s.T + t] = reference_probs(s, in, b, t, h, a);
        ga.assign(a.size(), 0.0);
        double row = 0;
        for (int64_t tau = lo; tau <= t; ++tau) {
          const int64_t ki = ((b * s.T + tau) * s.Hk + g) * s.d;
          for (int64_t e = 0; e < s.d; ++e) {
            r.o[qi + e] += a[tau - lo] * in.v[ki + e];
            ga[tau - lo] += in.dout[qi + e] * in.v[ki + e];
          }
          row += a[tau - lo] * ga[tau - lo];
        }
        for (int64_t tau = lo; tau <= t; ++tau) {
          const int64_t ki = ((b * s.T + tau) * s.Hk + g) * s.d;
          const double p = a[tau - lo], gs = p * (ga[tau - lo] - row);
          for (int64_t e = 0; e < s.d; ++e) {
            r.dq[qi + e] += gs * in.k[ki + e] * scale;
            r.dk[ki + e] += gs * in.q[qi + e] * scale;
            r.dv[ki + e] += p * in.dout[qi + e];
          }
        }
      }
  return r;
}

// The op under test (outputs start as NaN so a missed write shows).
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
  ops::attention_forward(o, lse, q, k, v, s.W);
  if (backward)
    ops::attention_backward(Tensor(r.dq.data(), {s.B, s.T, s.Hq, s.d}),
                            Tensor(r.dk.data(), {s.B, s.T, s.Hk, s.d}),
                            Tensor(r.dv.data(), {s.B, s.T, s.Hk, s.d}),
                            Tensor(r.dout.data(), {s.B, s.T, s.Hq, s.d}), q, k, v, o, lse, s.W);
  return r;
}

template <class T>
void expect_matches_reference(const Shape& s, uint64_t seed, double abs_tol, double rel_tol) {
  SCOPED_TRACE(s.str());
  const Inputs in = make_inputs(s, seed, sizeof(T) == 4);
  const auto r = run_op<T>(s, in);
  const Reference want = reference(s, in);
  expect_close(r.o, want.o, abs_tol, rel_tol, "o");
  expect_close(r.lse, want.lse, abs_tol, rel_tol, "lse");
  expect_close(r.dq, want.dq, abs_tol, rel_tol, "dq");
  expect_close(r.dk, want.dk, abs_tol, rel_tol, "dk");
  expect_close(r.dv, want.dv, abs_tol, rel_tol, "dv");
}

// Windows of 1, 2, odd sizes, around the 64-row tile (63, 64, 65), about two tiles, T − 1, T and
// past T, on T that cross the tiles, with GQA ratios 1, 2, 2 and d not a SIMD multiple.
std::vector<Shape> window_shapes() {
  std::vector<Shape> shapes;
  const int64_t heads[][2] = {{1, 1}, {4, 2}, {6, 3}};
  for (int64_t T : {1, 7, 65, 130, 259})
    for (int64_t W : {int64_t(1), int64_t(2), int64_t(5), int64_t(63), int64_t(64), int64_t(65),
                      int64_t(129), T - 1, T, T + 3}) {
      if (W < 1) continue;
      for (auto& hh : heads) shapes.push_back({1 + (T % 2), T, hh[0], hh[1], T % 3 ? 6 : 16, W});
    }
  return shapes;
}

}  // namespace

TEST(AttentionWindow, F64MatchesReference) {
  uint64_t seed = 5000;
  for (const Shape& s : window_shapes())
    expect_matches_reference<double>(s, seed += 4, 1e-12, 1e-12);
}

TEST(AttentionWindow, F32MatchesReference) {
  uint64_t seed = 6000;
  for (const Shape& s : window_shapes())
    expect_matches_reference<float>(s, seed += 4, kOpAbs, kOpRel);
}

// A head size with no column padding (64) and a realistic one (128), G = 4, a window that is not a
// multiple of the tile, several query tiles.
TEST(AttentionWindow, WideHeadsF32) {
  expect_matches_reference<float>({1, 300, 4, 1, 64, 97}, 6500, kOpAbs, kOpRel);
  expect_matches_reference<float>({1, 200, 8, 2, 128, 70}, 6600, kOpAbs, kOpRel);
}

TEST(AttentionWindow, BackwardMatchesNumericalGradient) {
  for (const Shape& s : {Shape{2, 9, 4, 2, 6, 3}, Shape{1, 70, 2, 1, 4, 1},
                         Shape{1, 70, 2, 1, 4, 20}, Shape{1, 140, 2, 1, 4, 66}}) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(s, 7000, false);
    auto loss = [&] {
      auto r = run_op<double>(s, in, false);
      return dot(r.o, in.dout);
    };
    auto r = run_op<double>(s, in);
    expect_grad_close(r.dv, numerical_grad(loss, in.v.data(), in.v.size()), kGradRelDouble, "dv");
    if (s.W == 1) {  // each query sees only itself: o_t = v_t, q and k have no effect at all
      for (double g : r.dq) EXPECT_LE(std::abs(g), 1e-12);
      for (double g : r.dk) EXPECT_LE(std::abs(g), 1e-12);
      continue;
    }
    expect_grad_close(r.dq, numerical_grad(loss, in.q.data(), in.q.size()), kGradRelDouble, "dq");
    expect_grad_close(r.dk, numerical_grad(loss, in.k.data(), in.k.size()), kGradRelDouble, "dk");
  }
}

// A window of T keys or more hides nothing: the same bits as the plain causal op (window 0).
TEST(AttentionWindow, WindowOfTIsCausal) {
  for (int64_t W : {200, 201, 1000}) {
    const Shape s{2, 200, 4, 2, 16, W}, full{2, 200, 4, 2, 16, 0};
    const Inputs in = make_inputs(s, 7100, true);
    const auto a = run_op<float>(s, in), b = run_op<float>(full, in);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.lse, b.lse);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
  }
  // And a window smaller than T does change the result (the check above can fail).
  const Shape s{1, 200, 4, 2, 16, 199}, full{1, 200, 4, 2, 16, 0};
  const Inputs in = make_inputs(s, 7150, true);
  EXPECT_NE(run_op<float>(s, in, false).o, run_op<float>(full, in, false).o);
}

// Changing keys and values at positions < t0 leaves the outputs of queries whose window starts at
// or after t0 bitwise unchanged, and changes those that see one of them.
TEST(AttentionWindow, KeysBeforeTheWindowHaveNoEffect) {
  const Shape s{2, 300, 4, 2, 8, 50};
  const int64_t t0 = 100;
  const Inputs in = make_inputs(s, 7200, true);
  const auto base = run_op<float>(s, in, false);
  Inputs past = in;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < t0; ++t)
      for (int64_t i = 0; i < s.Hk * s.d; ++i) {
        past.k[(b * s.T + t) * s.Hk * s.d + i] += 1.0;
        past.v[(b * s.T + t) * s.Hk * s.d + i] -= 2.0;
      }
  const auto moved = run_op<float>(s, past, false);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.Hq; ++h) {
        const float* x = &base.o[((b * s.T + t) * s.Hq + h) * s.d];
        const float* y = &moved.o[((b * s.T + t) * s.Hq + h) * s.d];
        const bool same = std::memcmp(x, y, s.d * sizeof(float)) == 0;
        EXPECT_EQ(same, s.lo(t) >= t0) << "b " << b << " t " << t << " h " << h;
      }
}

// Same bits for 1, 2 and 3 threads; the second shape has few heads, so the backward splits the key
// tiles into chunks whose dq partials cover only the query tiles their windows reach.
TEST(AttentionWindow, DeterministicAcrossThreadCounts) {
  for (const Shape& s : {Shape{2, 200, 8, 2, 16, 37}, Shape{1, 1000, 2, 1, 24, 150}}) {
    SCOPED_TRACE(s.str());
    const Inputs in = make_inputs(s, 7300, true);
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

// Many query tiles with a small window, in f32 against the reference (the chunked dq partials of
// a long sequence with few heads).
TEST(AttentionWindow, LongSequenceF32) {
  expect_matches_reference<float>({1, 1100, 2, 1, 8, 100}, 7400, kOpAbs, kOpRel);
}

// attention_cached_forward with a window: its L queries are the last L positions of the cache, and
// their outputs equal the windowed full op's last L rows; a cache that keeps only the positions
// the queries can see (the last W + L − 1) gives the same outputs.
TEST(AttentionWindow, CachedEqualsFullOpLastRows) {
  struct Case {
    int64_t S, L, Hq, Hk, d, W;
  };
  uint64_t seed = 7500;
  for (const Case& c :
       {Case{40, 1, 4, 2, 8, 1}, Case{40, 1, 4, 2, 8, 7}, Case{300, 1, 8, 2, 16, 97},
        Case{700, 1, 4, 1, 32, 300}, Case{700, 3, 4, 2, 16, 257}, Case{600, 40, 6, 3, 8, 100},
        Case{100, 100, 2, 1, 8, 9}, Case{50, 5, 4, 2, 8, 80}}) {
    const Shape s{1, c.S, c.Hq, c.Hk, c.d, c.W};
    SCOPED_TRACE(s.str() + " L" + std::to_string(c.L));
    const Inputs in = make_inputs(s, seed += 4, true);
    const auto full = run_op<float>(s, in, false);
    auto q = cast<float>(in.q), k = cast<float>(in.k), v = cast<float>(in.v);
    const float* q_last = q.data() + (c.S - c.L) * c.Hq * c.d;
    std::vector<float> q_l(q_last, q_last + c.L * c.Hq * c.d);
    std::vector<float> want(full.o.end() - c.L * c.Hq * c.d, full.o.end());
    std::vector<float> o(q_l.size(), NAN);
    ops::attention_cached_forward(
        Tensor(o.data(), {c.L, c.Hq, c.d}), Tensor(q_l.data(), {c.L, c.Hq, c.d}),
        Tensor(k.data(), {c.S, c.Hk, c.d}), Tensor(v.data(), {c.S, c.Hk, c.d}), c.W);
    expect_close(o, want, kOpAbs, kOpRel, "cached vs full");
    // Only the last W + L − 1 positions.
    const int64_t keep = std::min(c.S, c.W + c.L - 1), off = (c.S - keep) * c.Hk * c.d;
    std::vector<float> o2(q_l.size(), NAN);
    ops::attention_cached_forward(
        Tensor(o2.data(), {c.L, c.Hq, c.d}), Tensor(q_l.data(), {c.L, c.Hq, c.d}),
        Tensor(k.data() + off, {keep, c.Hk, c.d}), Tensor(v.data() + off, {keep, c.Hk, c.d}), c.W);
    expect_close(o2, want, kOpAbs, kOpRel, "window-only cache vs full");
  }
}

// The cached op's result does not depend on the thread count with a window either.
TEST(AttentionWindow, CachedDeterministicAcrossThreadCounts) {
  const int64_t S = 2000, Hq = 8, Hk = 2, d = 16, W = 600;
  for (int64_t L : {1, 24}) {
    auto q = randn<float>(L * Hq * d, 7600), k = randn<float>(S * Hk * d, 7601),
         v = randn<float>(S * Hk * d, 7602);
    const int keep = omp_get_max_threads();
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> o(q.size(), NAN);
      ops::attention_cached_forward(Tensor(o.data(), {L, Hq, d}), Tensor(q.data(), {L, Hq, d}),
                                    Tensor(k.data(), {S, Hk, d}), Tensor(v.data(), {S, Hk, d}), W);
      outs.push_back(o);
    }
    omp_set_num_threads(keep);
    EXPECT_EQ(outs[1], outs[0]);
    EXPECT_EQ(outs[2], outs[0]);
  }
}
