// residual_merge and merge_rmsnorm: forward against a double reference on odd sizes, with hp
// undefined (sub-layer 0) and defined; backward of every input and parameter against numerical
// gradients in double (with prefilled buffers for the += outputs); the fused ops bitwise equal to
// merge then RMSNorm called in sequence.
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr float kEps = 1e-5f;

template <class T>
Tensor vec(std::vector<T>& v, std::initializer_list<int64_t> dims) {
  return v.empty() ? Tensor{} : Tensor(v.data(), dims);
}

// All inputs of one merge (+ RMSNorm) call; hp, ar, br empty for sub-layer 0.
template <class T>
struct Inputs {
  int64_t N, D;
  std::vector<T> o, hp, ao, bo, ar, br, w;

  template <class U>
  Inputs<U> as() const {
    return {N,           D,           cast<U>(o),  cast<U>(hp), cast<U>(ao),
            cast<U>(bo), cast<U>(ar), cast<U>(br), cast<U>(w)};
  }
  Tensor to(std::vector<T>& v) { return vec(v, {N, D}); }
  Tensor vd(std::vector<T>& v) { return vec(v, {D}); }
};

Inputs<double> make_inputs(int64_t N, int64_t D, bool with_hp, uint64_t seed) {
  Inputs<double> in;
  in.N = N, in.D = D;
  in.o = randn_f32(N * D, seed + 1);
  in.ao = randn_f32(D, seed + 2, 0.5, 1.0);
  in.bo = randn_f32(D, seed + 3, 0.3);
  in.w = randn_f32(D, seed + 4, 0.5, 1.0);
  if (with_hp) {
    in.hp = randn_f32(N * D, seed + 5, 2.0);
    in.ar = randn_f32(D, seed + 6, 0.5, 1.0);
    in.br = randn_f32(D, seed + 7, 0.3);
  }
  return in;
}

std::vector<double> merge_reference(const Inputs<double>& in) {
  const int64_t N = in.N, D = in.D;
  std::vector<double> h(N * D);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < D; ++j) {
      double v = (in.o[n * D + j] + in.bo[j]) * in.ao[j];
      if (!in.hp.empty()) v += (in.hp[n * D + j] + in.br[j]) * in.ar[j];
      h[n * D + j] = v;
    }
  return h;
}

template <class T>
std::vector<T> merge(Inputs<T>& in) {
  std::vector<T> h(in.N * in.D);
  ops::residual_merge_forward(in.to(h), in.to(in.o), in.to(in.hp), in.vd(in.ao), in.vd(in.bo),
                              in.vd(in.ar), in.vd(in.br));
  return h;
}

// Gradient buffers of one backward call, prefilled with nonzero values.
template <class T>
struct Grads {
  std::vector<T> do_, dhp, dao, dbo, dar, dbr, dw;
};
Grads<double> prefilled_grads(const Inputs<double>& in, uint64_t seed) {
  const int64_t N = in.N, D = in.D;
  const bool hp = !in.hp.empty();
  Grads<double> g;
  g.do_ = randn<double>(N * D, seed + 1);  // overwritten
  g.dao = randn<double>(D, seed + 2), g.dbo = randn<double>(D, seed + 3);
  g.dw = randn<double>(D, seed + 4);
  if (hp) {
    g.dhp = randn<double>(N * D, seed + 5);
    g.dar = randn<double>(D, seed + 6), g.dbr = randn<double>(D, seed + 7);
  }
  return g;
}
std::vector<double> minus(std::vector<double> a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
  return a;
}

}  // namespace

TEST(ResidualMerge, ForwardF32MatchesReferenceOnOddSizes) {
  for (bool with_hp : {false, true})
    for (int64_t N : kOddSizes)
      for (int64_t D : kOddSizes) {
        auto in = make_inputs(N, D, with_hp, 10);
        auto ref = merge_reference(in);
        auto in32 = in.as<float>();
        expect_close(merge(in32), ref, kOpAbs, kOpRel, with_hp ? "merge f32" : "merge f32 (i=0)");
      }
}

TEST(ResidualMerge, BackwardMatchesNumericalGradient) {
  for (bool with_hp : {false, true}) {
    const int64_t N = 7, D = 5;
    auto in = make_inputs(N, D, with_hp, 20);
    const auto dh = randn<double>(N * D, 30);
    auto loss = [&] { return dot(merge(in), dh); };
    const auto g0 = prefilled_grads(in, 40);
    auto g = g0;
    auto dhv = dh;
    ops::residual_merge_backward(in.to(g.do_), in.to(g.dhp), in.vd(g.dao), in.vd(g.dbo),
                                 in.vd(g.dar), in.vd(g.dbr), in.to(dhv), in.to(in.o), in.to(in.hp),
                                 in.vd(in.ao), in.vd(in.bo), in.vd(in.ar), in.vd(in.br));
    EXPECT_EQ(dhv, dh) << "dh is an input";
    expect_grad_close(g.do_, numerical_grad(loss, in.o.data(), in.o.size()), kGradRelDouble, "do");
    expect_grad_close(minus(g.dao, g0.dao), numerical_grad(loss, in.ao.data(), D), kGradRelDouble,
                      "dao");
    expect_grad_close(minus(g.dbo, g0.dbo), numerical_grad(loss, in.bo.data(), D), kGradRelDouble,
                      "dbo");
    if (!with_hp) continue;
    expect_grad_close(minus(g.dhp, g0.dhp), numerical_grad(loss, in.hp.data(), in.hp.size()),
                      kGradRelDouble, "dhp");
    expect_grad_close(minus(g.dar, g0.dar), numerical_grad(loss, in.ar.data(), D), kGradRelDouble,
                      "dar");
    expect_grad_close(minus(g.dbr, g0.dbr), numerical_grad(loss, in.br.data(), D), kGradRelDouble,
                      "dbr");
  }
}

// The model may reuse dh's buffer for do_ (do_ is written after dh is last read).
TEST(ResidualMerge, BackwardDoMayAliasDh) {
  const int64_t N = 33, D = 257;
  auto in = make_inputs(N, D, true, 120).as<float>();
  const auto dh = cast<float>(randn<double>(N * D, 130));
  const auto g64 = prefilled_grads(in.as<double>(), 140);
  Grads<float> a{cast<float>(g64.do_),
                 cast<float>(g64.dhp),
                 cast<float>(g64.dao),
                 cast<float>(g64.dbo),
                 cast<float>(g64.dar),
                 cast<float>(g64.dbr),
                 {}};
  auto b = a;
  auto dha = dh, dhb = dh;
  ops::residual_merge_backward(in.to(a.do_), in.to(a.dhp), in.vd(a.dao), in.vd(a.dbo), in.vd(a.dar),
                               in.vd(a.dbr), in.to(dha), in.to(in.o), in.to(in.hp), in.vd(in.ao),
                               in.vd(in.bo), in.vd(in.ar), in.vd(in.br));
  ops::residual_merge_backward(in.to(dhb), in.to(b.dhp), in.vd(b.dao), in.vd(b.dbo), in.vd(b.dar),
                               in.vd(b.dbr), in.to(dhb), in.to(in.o), in.to(in.hp), in.vd(in.ao),
                               in.vd(in.bo), in.vd(in.ar), in.vd(in.br));
  EXPECT_EQ(dhb, a.do_);
  EXPECT_EQ(b.dhp, a.dhp);
  EXPECT_EQ(b.dao, a.dao);
  EXPECT_EQ(b.dbo, a.dbo);
  EXPECT_EQ(b.dar, a.dar);
  EXPECT_EQ(b.dbr, a.dbr);
}

// merge then RMSNorm (the unfused sequence) and the fused op, forward and backward.
template <class T>
struct MergeNormResult {
  std::vector<T> h, x, rstd, dh;
  Grads<T> g;
};

template <class T>
MergeNormResult<T> merge_norm(Inputs<T>& in, const std::vector<T>& dx, const std::vector<T>& dh,
                              Grads<T> g, bool fused) {
  const int64_t N = in.N, D = in.D;
  MergeNormResult<T> r{std::vector<T>(N * D), std::vector<T>(N * D), std::vector<T>(N), dh, g};
  auto dxv = dx;
  if (fused) {
    ops::merge_rmsnorm_forward(in.to(r.h), in.to(r.x), vec(r.rstd, {N}), in.to(in.o), in.to(in.hp),
                               in.vd(in.ao), in.vd(in.bo), in.vd(in.ar), in.vd(in.br), in.vd(in.w),
                               kEps);
    ops::merge_rmsnorm_backward(in.to(r.g.do_), in.to(r.g.dhp), in.vd(r.g.dao), in.vd(r.g.dbo),
                                in.vd(r.g.dar), in.vd(r.g.dbr), in.vd(r.g.dw), in.to(r.dh),
                                in.to(dxv), in.to(r.h), in.to(in.o), in.to(in.hp), in.vd(in.ao),
                                in.vd(in.bo), in.vd(in.ar), in.vd(in.br), in.vd(in.w),
                                vec(r.rstd, {N}));
  } else {
    ops::residual_merge_forward(in.to(r.h), in.to(in.o), in.to(in.hp), in.vd(in.ao), in.vd(in.bo),
                                in.vd(in.ar), in.vd(in.br));
    ops::rmsnorm_forward(in.to(r.x), vec(r.rstd, {N}), in.to(r.h), in.vd(in.w), kEps);
    ops::rmsnorm_backward(in.to(r.dh), in.vd(r.g.dw), in.to(dxv), in.to(r.h), in.vd(in.w),
                          vec(r.rstd, {N}), /*accumulate_dx=*/true);
    ops::residual_merge_backward(in.to(r.g.do_), in.to(r.g.dhp), in.vd(r.g.dao), in.vd(r.g.dbo),
                                 in.vd(r.g.dar), in.vd(r.g.dbr), in.to(r.dh), in.to(in.o),
                                 in.to(in.hp), in.vd(in.ao), in.vd(in.bo), in.vd(in.ar),
                                 in.vd(in.br));
  }
  EXPECT_EQ(dxv, dx) << "dx is an input";
  return r;
}

template <class T>
void expect_fused_equals_unfused(int64_t N, int64_t D, bool with_hp) {
  auto in64 = make_inputs(N, D, with_hp, 50);
  auto in = in64.template as<T>();
  const auto dx = cast<T>(randn<double>(N * D, 60)), dh = cast<T>(randn<double>(N * D, 61));
  const auto g64 = prefilled_grads(in64, 70);
  Grads<T> g{cast<T>(g64.do_), cast<T>(g64.dhp), cast<T>(g64.dao), cast<T>(g64.dbo),
             cast<T>(g64.dar), cast<T>(g64.dbr), cast<T>(g64.dw)};
  auto a = merge_norm(in, dx, dh, g, false), b = merge_norm(in, dx, dh, g, true);
  const std::string at = std::to_string(N) + "x" + std::to_string(D) + (with_hp ? "" : " (i=0)");
  EXPECT_EQ(a.h, b.h) << at;
  EXPECT_EQ(a.x, b.x) << at;
  EXPECT_EQ(a.rstd, b.rstd) << at;
  EXPECT_EQ(a.dh, b.dh) << at;
  EXPECT_EQ(a.g.do_, b.g.do_) << at;
  EXPECT_EQ(a.g.dhp, b.g.dhp) << at;
  EXPECT_EQ(a.g.dao, b.g.dao) << at;
  EXPECT_EQ(a.g.dbo, b.g.dbo) << at;
  EXPECT_EQ(a.g.dar, b.g.dar) << at;
  EXPECT_EQ(a.g.dbr, b.g.dbr) << at;
  EXPECT_EQ(a.g.dw, b.g.dw) << at;
}

TEST(MergeRmsNorm, FusedBitwiseEqualsUnfusedOnOddSizes) {
  for (bool with_hp : {false, true})
    for (int64_t N : kOddSizes)
      for (int64_t D : kOddSizes) {
        expect_fused_equals_unfused<float>(N, D, with_hp);
        expect_fused_equals_unfused<double>(N, D, with_hp);
      }
}

TEST(MergeRmsNorm, ForwardF32MatchesReference) {
  for (bool with_hp : {false, true}) {
    const int64_t N = 33, D = 257;
    auto in = make_inputs(N, D, with_hp, 80);
    const auto h = merge_reference(in);
    std::vector<double> x(N * D);
    for (int64_t n = 0; n < N; ++n) {
      double ss = 0;
      for (int64_t j = 0; j < D; ++j) ss += h[n * D + j] * h[n * D + j];
      const double r = 1.0 / std::sqrt(ss / D + double(kEps));
      for (int64_t j = 0; j < D; ++j) x[n * D + j] = in.w[j] * r * h[n * D + j];
    }
    auto in32 = in.as<float>();
    auto out = merge_norm(in32, std::vector<float>(N * D), std::vector<float>(N * D),
                          Grads<float>{}, true);
    expect_close(out.h, h, kOpAbs, kOpRel, "fused h f32");
    expect_close(out.x, x, kOpAbs, kOpRel, "fused x f32");
  }
}

// h feeds both the RMSNorm (gradient dx of its output) and the next merge (gradient dh_next), so
// L = ⟨x, dx⟩ + ⟨h, dh_next⟩; every input and parameter gradient of the fused op is checked.
TEST(MergeRmsNorm, FusedBackwardMatchesNumericalGradient) {
  for (bool with_hp : {false, true}) {
    const int64_t N = 7, D = 6;
    auto in = make_inputs(N, D, with_hp, 90);
    const auto dx = randn<double>(N * D, 100), dh_next = randn<double>(N * D, 101);
    auto loss = [&] {
      auto r = merge_norm(in, dx, dh_next, prefilled_grads(in, 0), true);
      return dot(r.x, dx) + dot(r.h, dh_next);
    };
    const auto g0 = prefilled_grads(in, 110);
    auto r = merge_norm(in, dx, dh_next, g0, true);
    expect_grad_close(r.g.do_, numerical_grad(loss, in.o.data(), in.o.size()), kGradRelDouble,
                      "do");
    expect_grad_close(minus(r.g.dao, g0.dao), numerical_grad(loss, in.ao.data(), D), kGradRelDouble,
                      "dao");
    expect_grad_close(minus(r.g.dbo, g0.dbo), numerical_grad(loss, in.bo.data(), D), kGradRelDouble,
                      "dbo");
    expect_grad_close(minus(r.g.dw, g0.dw), numerical_grad(loss, in.w.data(), D), kGradRelDouble,
                      "dw");
    if (!with_hp) continue;
    expect_grad_close(minus(r.g.dhp, g0.dhp), numerical_grad(loss, in.hp.data(), in.hp.size()),
                      kGradRelDouble, "dhp");
    expect_grad_close(minus(r.g.dar, g0.dar), numerical_grad(loss, in.ar.data(), D), kGradRelDouble,
                      "dar");
    expect_grad_close(minus(r.g.dbr, g0.dbr), numerical_grad(loss, in.br.data(), D), kGradRelDouble,
                      "dbr");
  }
}
