// residual_merge_forward/backward and the fused merge_rmsnorm_forward/backward on the GPU against
// the CPU backend (label gpu; skips without a device); the fused ops also against the unfused ops
// in sequence on the GPU (same bits). Covers the first sub-layer (hp, ar, br undefined), every
// optional output undefined, do_ aliasing dh, += of the parameter gradients and of dhp.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

struct Shape {
  int64_t N, D;
};
const std::vector<Shape> kShapes = {{1, 1},     {7, 7},    {31, 33},   {33, 31},
                                    {257, 257}, {3, 2048}, {33, 2048}, {600, 64}};

const Tensor& side(const DevicePair& p, bool gpu) {
  return gpu ? p.gpu : p.cpu;
}

// The merge's inputs (hp, ar, br used only when with_hp).
struct Inputs {
  int64_t N, D;
  bool with_hp;
  DevicePair o, hp, ao, bo, ar, br, w;
  Inputs(int64_t n, int64_t d, bool hp_, uint64_t seed)
      : N(n),
        D(d),
        with_hp(hp_),
        o(random_pair(DType::F32, {n, d}, seed)),
        hp(random_pair(DType::F32, {n, d}, seed + 1)),
        ao(random_pair(DType::F32, {d}, seed + 2)),
        bo(random_pair(DType::F32, {d}, seed + 3, 0.1)),
        ar(random_pair(DType::F32, {d}, seed + 4)),
        br(random_pair(DType::F32, {d}, seed + 5, 0.1)),
        w(random_pair(DType::F32, {d}, seed + 6)) {}
  Tensor HP(bool g) const { return with_hp ? side(hp, g) : Tensor{}; }
  Tensor AR(bool g) const { return with_hp ? side(ar, g) : Tensor{}; }
  Tensor BR(bool g) const { return with_hp ? side(br, g) : Tensor{}; }
};

std::string label(const Inputs& in) {
  return "N " + std::to_string(in.N) + " D " + std::to_string(in.D) + (in.with_hp ? "" : " no hp");
}

void expect_same_gpu(const DevicePair& a, const DevicePair& b, const char* what) {
  const std::vector<double> x = a.gpu_values(), y = b.gpu_values();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i]) {
      ADD_FAILURE() << what << ": fused " << x[i] << " unfused " << y[i] << " at " << i;
      return;
    }
}

TEST(GpuResidual, MergeForward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 10;
  for (const Shape& s : kShapes)
    for (bool with_hp : {true, false}) {
      Inputs in(s.N, s.D, with_hp, seed += 10);
      SCOPED_TRACE(label(in));
      DevicePair h(DType::F32, {s.N, s.D});
      for (bool g : {false, true})
        ops::residual_merge_forward(side(h, g), side(in.o, g), in.HP(g), side(in.ao, g),
                                    side(in.bo, g), in.AR(g), in.BR(g));
      expect_nmse(h, kGpuF32Nmse, "h");
    }
}

TEST(GpuResidual, FusedForwardMatchesCpuAndUnfused) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const Shape& s : kShapes)
    for (bool with_hp : {true, false}) {
      Inputs in(s.N, s.D, with_hp, seed += 10);
      SCOPED_TRACE(label(in));
      DevicePair h(DType::F32, {s.N, s.D}), x(DType::F32, {s.N, s.D}), rstd(DType::F32, {s.N});
      for (bool g : {false, true})
        ops::merge_rmsnorm_forward(side(h, g), side(x, g), side(rstd, g), side(in.o, g), in.HP(g),
                                   side(in.ao, g), side(in.bo, g), in.AR(g), in.BR(g),
                                   side(in.w, g), 1e-5f);
      expect_nmse(h, kGpuF32Nmse, "h");
      expect_nmse(x, kGpuF32Nmse, "x");
      expect_nmse(rstd, kGpuF32Nmse, "rstd");
      // The unfused sequence on the GPU gives the same bits.
      DevicePair h2(DType::F32, {s.N, s.D}), x2(DType::F32, {s.N, s.D}), rstd2(DType::F32, {s.N});
      ops::residual_merge_forward(h2.gpu, in.o.gpu, in.HP(true), in.ao.gpu, in.bo.gpu, in.AR(true),
                                  in.BR(true));
      ops::rmsnorm_forward(x2.gpu, rstd2.gpu, h2.gpu, in.w.gpu, 1e-5f);
      expect_same_gpu(h, h2, "h");
      expect_same_gpu(x, x2, "x");
      expect_same_gpu(rstd, rstd2, "rstd");
    }
}

// Outputs of a merge backward; bit i of `mask` defines output i (do_, dhp, dao, dbo, dar, dbr,
// dw). Prefilled with random values (dhp and the parameter gradients accumulate).
struct Grads {
  DevicePair do_, dhp, dao, dbo, dar, dbr, dw;
  unsigned mask;
  Grads(int64_t N, int64_t D, unsigned m, uint64_t seed)
      : do_(random_pair(DType::F32, {N, D}, seed)),
        dhp(random_pair(DType::F32, {N, D}, seed + 1)),
        dao(random_pair(DType::F32, {D}, seed + 2)),
        dbo(random_pair(DType::F32, {D}, seed + 3)),
        dar(random_pair(DType::F32, {D}, seed + 4)),
        dbr(random_pair(DType::F32, {D}, seed + 5)),
        dw(random_pair(DType::F32, {D}, seed + 6)),
        mask(m) {}
  Tensor get(int i, bool g) const {
    const DevicePair* p[] = {&do_, &dhp, &dao, &dbo, &dar, &dbr, &dw};
    return (mask >> i) & 1 ? side(*p[i], g) : Tensor{};
  }
  void expect(const char* what) const {
    const DevicePair* p[] = {&do_, &dhp, &dao, &dbo, &dar, &dbr, &dw};
    const char* names[] = {"do_", "dhp", "dao", "dbo", "dar", "dbr", "dw"};
    for (int i = 0; i < 7; ++i)
      if ((mask >> i) & 1) expect_nmse(*p[i], kGpuF32Nmse, (std::string(what) + names[i]).c_str());
  }
};

// The masks every backward test runs: all, none, each output alone missing.
std::vector<unsigned> masks() {
  std::vector<unsigned> m{0x7f, 0};
  for (int i = 0; i < 7; ++i) m.push_back(0x7f & ~(1u << i));
  return m;
}

TEST(GpuResidual, MergeBackward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 2000;
  for (const Shape& s : kShapes)
    for (bool with_hp : {true, false})
      for (unsigned mask : masks()) {
        Inputs in(s.N, s.D, with_hp, seed += 10);
        SCOPED_TRACE(label(in) + " mask " + std::to_string(mask));
        DevicePair dh = random_pair(DType::F32, {s.N, s.D}, seed + 7);
        Grads gr(s.N, s.D, mask, seed + 8);
        for (bool g : {false, true})
          ops::residual_merge_backward(gr.get(0, g), gr.get(1, g), gr.get(2, g), gr.get(3, g),
                                       gr.get(4, g), gr.get(5, g), side(dh, g), side(in.o, g),
                                       in.HP(g), side(in.ao, g), side(in.bo, g), in.AR(g),
                                       in.BR(g));
        gr.mask &= 0x3f;  // no dw here
        gr.expect("");
      }
}

TEST(GpuResidual, MergeBackwardDoAliasesDh) {
  ZAYA_REQUIRE_GPU();
  for (const Shape& s : kShapes) {
    Inputs in(s.N, s.D, true, 3000 + uint64_t(s.N));
    SCOPED_TRACE(label(in));
    DevicePair dh = random_pair(DType::F32, {s.N, s.D}, 7);
    Grads gr(s.N, s.D, 0x3f, 8);
    for (bool g : {false, true})
      ops::residual_merge_backward(side(dh, g), gr.get(1, g), gr.get(2, g), gr.get(3, g),
                                   gr.get(4, g), gr.get(5, g), side(dh, g), side(in.o, g), in.HP(g),
                                   side(in.ao, g), side(in.bo, g), in.AR(g), in.BR(g));
    expect_nmse(dh, kGpuF32Nmse, "do_ = dh");
    gr.mask = 0x3e;
    gr.expect("");
  }
}

// h and rstd of a forward, the same values on both sides (the CPU's).
void fused_forward(const Inputs& in, DevicePair& h, DevicePair& rstd) {
  DevicePair x(DType::F32, {in.N, in.D});
  ops::merge_rmsnorm_forward(h.cpu, x.cpu, rstd.cpu, in.o.cpu, in.HP(false), in.ao.cpu, in.bo.cpu,
                             in.AR(false), in.BR(false), in.w.cpu, 1e-5f);
  h.upload();
  rstd.upload();
}

TEST(GpuResidual, FusedBackwardMatchesCpu) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 4000;
  for (const Shape& s : kShapes)
    for (bool with_hp : {true, false})
      for (unsigned mask : masks())
        for (bool alias : {false, true}) {
          if (alias && !(mask & 1)) continue;
          Inputs in(s.N, s.D, with_hp, seed += 10);
          SCOPED_TRACE(label(in) + " mask " + std::to_string(mask) + (alias ? " do_ = dh" : ""));
          DevicePair h(DType::F32, {s.N, s.D}), rstd(DType::F32, {s.N});
          fused_forward(in, h, rstd);
          DevicePair dx = random_pair(DType::F32, {s.N, s.D}, seed + 7);
          DevicePair dh = random_pair(DType::F32, {s.N, s.D}, seed + 8);
          Grads gr(s.N, s.D, mask, seed + 9);
          for (bool g : {false, true})
            ops::merge_rmsnorm_backward(alias ? side(dh, g) : gr.get(0, g), gr.get(1, g),
                                        gr.get(2, g), gr.get(3, g), gr.get(4, g), gr.get(5, g),
                                        gr.get(6, g), side(dh, g), side(dx, g), side(h, g),
                                        side(in.o, g), in.HP(g), side(in.ao, g), side(in.bo, g),
                                        in.AR(g), in.BR(g), side(in.w, g), side(rstd, g));
          expect_nmse(dh, kGpuF32Nmse, "dh");
          if (alias) gr.mask &= ~1u;
          gr.expect("");
        }
}

TEST(GpuResidual, FusedBackwardEqualsUnfusedOnGpu) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 5000;
  for (const Shape& s : kShapes)
    for (bool with_hp : {true, false}) {
      Inputs in(s.N, s.D, with_hp, seed += 10);
      SCOPED_TRACE(label(in));
      DevicePair h(DType::F32, {s.N, s.D}), rstd(DType::F32, {s.N});
      fused_forward(in, h, rstd);
      DevicePair dx = random_pair(DType::F32, {s.N, s.D}, seed + 7);
      DevicePair dh1 = random_pair(DType::F32, {s.N, s.D}, seed + 8);
      DevicePair dh2 = random_pair(DType::F32, {s.N, s.D}, seed + 8);
      Grads g1(s.N, s.D, 0x7f, seed + 9), g2(s.N, s.D, 0x7f, seed + 9);
      const bool G = true;
      ops::merge_rmsnorm_backward(g1.get(0, G), g1.get(1, G), g1.get(2, G), g1.get(3, G),
                                  g1.get(4, G), g1.get(5, G), g1.get(6, G), dh1.gpu, dx.gpu, h.gpu,
                                  in.o.gpu, in.HP(G), in.ao.gpu, in.bo.gpu, in.AR(G), in.BR(G),
                                  in.w.gpu, rstd.gpu);
      ops::rmsnorm_backward(dh2.gpu, g2.dw.gpu, dx.gpu, h.gpu, in.w.gpu, rstd.gpu, true);
      ops::residual_merge_backward(g2.get(0, G), g2.get(1, G), g2.get(2, G), g2.get(3, G),
                                   g2.get(4, G), g2.get(5, G), dh2.gpu, in.o.gpu, in.HP(G),
                                   in.ao.gpu, in.bo.gpu, in.AR(G), in.BR(G));
      expect_same_gpu(dh1, dh2, "dh");
      expect_same_gpu(g1.do_, g2.do_, "do_");
      expect_same_gpu(g1.dhp, g2.dhp, "dhp");
      expect_same_gpu(g1.dao, g2.dao, "dao");
      expect_same_gpu(g1.dbo, g2.dbo, "dbo");
      expect_same_gpu(g1.dar, g2.dar, "dar");
      expect_same_gpu(g1.dbr, g2.dbr, "dbr");
      expect_same_gpu(g1.dw, g2.dw, "dw");
    }
}

}  // namespace
}  // namespace zaya::test
