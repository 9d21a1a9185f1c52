// The GPU backend's declared support (ops/gpu/support.h): a call that ops.cpp admits but the GPU
// does not compute is a zaya::Error naming the op and the limit, raised before any kernel runs,
// for every entry with a limit (each reads its tensors by position, so each is called here); a
// call at the limit computes as the CPU does.
#include <cstdlib>
#include <string>

#include "gpu_test_util.h"
#include "ops/gpu/attention.h"
#include "ops/gpu/support.h"

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr DType kF32 = DType::F32;

}  // namespace

TEST(GpuSupport, F64IsAnErrorForTheModelsOps) {
  ZAYA_REQUIRE_GPU();
  DevicePair x(DType::F64, {2, 3}), y(DType::F64, {2, 3});
  expect_error([&] { ops::gelu_forward(y.gpu, x.gpu); },
               {"gelu_forward: the GPU computes in F32, not F64"});
  ops::gelu_forward(y.cpu, x.cpu);  // the CPU computes in F64
}

TEST(GpuSupport, RowsWiderThanTheRowKernelsAreAnError) {
  ZAYA_REQUIRE_GPU();
  const int64_t D = ops::gpu::kMaxRowWidth + 1;
  DevicePair a(kF32, {1, D}), b(kF32, {1, D}), c(kF32, {1, D}), d(kF32, {1, D});
  DevicePair w(kF32, {D}), p(kF32, {D}), q(kF32, {D}), r(kF32, {1});
  const Tensor none;
  const std::string rows = "rows of " + std::to_string(D) + " elements";
  expect_error([&] { ops::rmsnorm_forward(a.gpu, r.gpu, b.gpu, w.gpu, 1e-6f); },
               {"rmsnorm_forward: " + rows, "at most 16384"});
  expect_error([&] { ops::rmsnorm_backward(a.gpu, w.gpu, b.gpu, c.gpu, p.gpu, r.gpu, false); },
               {"rmsnorm_backward: " + rows});
  expect_error([&] { ops::eda_forward(a.gpu, w.gpu, b.gpu); }, {"eda_forward: " + rows});
  expect_error([&] { ops::eda_backward(a.gpu, w.gpu, b.gpu, c.gpu, p.gpu); },
               {"eda_backward: " + rows});
  expect_error([&] { ops::residual_merge_forward(a.gpu, b.gpu, none, w.gpu, p.gpu, none, none); },
               {"residual_merge_forward: " + rows});
  expect_error(
      [&] {
        ops::residual_merge_backward(a.gpu, none, w.gpu, p.gpu, none, none, b.gpu, c.gpu, none,
                                     q.gpu, w.gpu, none, none);
      },
      {"residual_merge_backward: " + rows});
  expect_error(
      [&] {
        ops::merge_rmsnorm_forward(a.gpu, b.gpu, r.gpu, c.gpu, none, w.gpu, p.gpu, none, none,
                                   q.gpu, 1e-6f);
      },
      {"merge_rmsnorm_forward: " + rows});
  DevicePair e(kF32, {1, D}), dw(kF32, {D});
  expect_error(
      [&] {
        ops::merge_rmsnorm_backward(a.gpu, none, w.gpu, p.gpu, none, none, dw.gpu, b.gpu, c.gpu,
                                    d.gpu, e.gpu, none, q.gpu, w.gpu, none, none, p.gpu, r.gpu);
      },
      {"merge_rmsnorm_backward: " + rows});
}

TEST(GpuSupport, RowsAtTheLimitCompute) {
  ZAYA_REQUIRE_GPU();
  const int64_t D = ops::gpu::kMaxRowWidth;
  DevicePair x = random_pair(kF32, {1, D}, 1), w = random_pair(kF32, {D}, 2);
  DevicePair y(kF32, {1, D}), rstd(kF32, {1});
  ops::rmsnorm_forward(y.cpu, rstd.cpu, x.cpu, w.cpu, 1e-6f);
  ops::rmsnorm_forward(y.gpu, rstd.gpu, x.gpu, w.gpu, 1e-6f);
  expect_nmse(y, kGpuF32Nmse, "y");
  expect_nmse(rstd, kGpuF32Nmse, "rstd");
}

TEST(GpuSupport, HeadsLargerThanTheFlashKernelsAreAnErrorUnlessTheGemmPath) {
  ZAYA_REQUIRE_GPU();
  const ScopedEnv flash("ZAYA_GPU_ATTENTION", "flash");
  const int64_t d = zaya::gpu::kFlashMaxHead + 1;
  DevicePair q = random_pair(kF32, {1, 3, 1, d}, 1), k = random_pair(kF32, {1, 3, 1, d}, 2);
  DevicePair v = random_pair(kF32, {1, 3, 1, d}, 3), o(kF32, {1, 3, 1, d}), lse(kF32, {1, 1, 3});
  const std::string head = "head size " + std::to_string(d);
  expect_error([&] { ops::attention_forward(o.gpu, lse.gpu, q.gpu, k.gpu, v.gpu); },
               {"attention_forward: " + head, "ZAYA_GPU_ATTENTION=gemm"});
  DevicePair dq(kF32, {1, 3, 1, d}), dk(kF32, {1, 3, 1, d}), dv(kF32, {1, 3, 1, d});
  expect_error(
      [&] {
        ops::attention_backward(dq.gpu, dk.gpu, dv.gpu, o.gpu, q.gpu, k.gpu, v.gpu, o.gpu, lse.gpu);
      },
      {"attention_backward: " + head});

  const ScopedEnv gemm("ZAYA_GPU_ATTENTION", "gemm");
  ops::attention_forward(o.cpu, lse.cpu, q.cpu, k.cpu, v.cpu);
  ops::attention_forward(o.gpu, lse.gpu, q.gpu, k.gpu, v.gpu);
  expect_nmse(o, kGpuF32Nmse, "o");
  expect_nmse(lse, kGpuF32Nmse, "lse");
}

TEST(GpuSupport, CachedAttentionBeyondItsKernelsIsAnError) {
  ZAYA_REQUIRE_GPU();
  {  // decode: 48 query heads of one kv head at d = 16 need 48 · 272 floats of shared memory
    DevicePair q(kF32, {1, 48, 16}), k(kF32, {4, 1, 16}), v(kF32, {4, 1, 16}), o(kF32, {1, 48, 16});
    expect_error(
        [&] { ops::attention_cached_forward(o.gpu, q.gpu, k.gpu, v.gpu); },
        {"attention_cached_forward: 48 query heads per kv head at head size 16", "52224 bytes"});
  }
  {  // prefill over the cache (more new queries than the decode path takes): the flash kernels
    const int64_t L = zaya::gpu::kDecodeMaxL + 1, d = zaya::gpu::kFlashMaxHead + 1;
    DevicePair q(kF32, {L, 1, d}), k(kF32, {L, 1, d}), v(kF32, {L, 1, d}), o(kF32, {L, 1, d});
    expect_error([&] { ops::attention_cached_forward(o.gpu, q.gpu, k.gpu, v.gpu); },
                 {"attention_cached_forward: head size " + std::to_string(d)});
  }
}

TEST(GpuSupport, WeightedScatterIsF32AndTheUnweightedOneTakesF64) {
  ZAYA_REQUIRE_GPU();
  DevicePair dst(DType::F64, {2, 3}), src(DType::F64, {2, 3}), weight(DType::F64, {2});
  DevicePair ids = i32_pair({1, 0});
  expect_error([&] { ops::scatter_rows(dst.gpu, ids.gpu, src.gpu, weight.gpu); },
               {"scatter_rows: the GPU's weighted scatter computes in F32, not F64"});
  for (int i = 0; i < 6; ++i) static_cast<double*>(src.cpu.data)[i] = 0.5 * i;
  src.upload();
  ops::scatter_rows(dst.cpu, ids.cpu, src.cpu, Tensor{});
  ops::scatter_rows(dst.gpu, ids.gpu, src.gpu, Tensor{});
  expect_equal(dst, "dst");
}
