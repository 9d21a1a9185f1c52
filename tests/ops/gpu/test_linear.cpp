// linear_forward / linear_backward on the GPU against the CPU op (ops.h "linear"): odd sizes in
// N, I and O, bias or none, accumulate onto prefilled outputs, a BF16 weight (inference), the
// ZAYA1-base projection D 2048 → 4096 with few tokens, undefined dx / dw / db, and a long N that
// takes the multi-chunk path of the bias-gradient column sum.
#include <cstdlib>
#include <string>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Shape {
  int64_t N, I, O;
};

std::string name(const char* what, const Shape& s) {
  return std::string(what) + " N " + std::to_string(s.N) + " I " + std::to_string(s.I) + " O " +
         std::to_string(s.O);
}

std::string name(const char* what, const Shape& s, const char* engine) {
  return name(what, s) + " engine " + engine;
}

void check_forward_once(const Shape& s, DType wdt, bool bias, bool accumulate, uint64_t seed,
                        const char* engine) {
  DevicePair x = random_pair(DType::F32, {s.N, s.I}, seed);
  DevicePair w = random_pair(wdt, {s.O, s.I}, seed + 1, 0.1);
  DevicePair b = random_pair(DType::F32, {s.O}, seed + 2);
  DevicePair y = random_pair(DType::F32, {s.N, s.O}, seed + 3);  // prefilled (accumulate)
  const Tensor none;
  ops::linear_forward(y.cpu, x.cpu, w.cpu, bias ? b.cpu : none, accumulate);
  ops::linear_forward(y.gpu, x.gpu, w.gpu, bias ? b.gpu : none, accumulate);
  expect_nmse(y, kGpuF32Nmse,
              name(wdt == DType::BF16 ? "forward bf16 w" : "forward", s, engine).c_str());
}

void check_backward_once(const Shape& s, bool with_dx, bool with_dw, bool with_db,
                         bool accumulate_dx, uint64_t seed, const char* engine) {
  DevicePair x = random_pair(DType::F32, {s.N, s.I}, seed);
  DevicePair w = random_pair(DType::F32, {s.O, s.I}, seed + 1, 0.1);
  DevicePair dy = random_pair(DType::F32, {s.N, s.O}, seed + 2);
  DevicePair dx = random_pair(DType::F32, {s.N, s.I}, seed + 3);  // prefilled: += or =
  DevicePair dw = random_pair(DType::F32, {s.O, s.I}, seed + 4);  // prefilled: +=
  DevicePair db = random_pair(DType::F32, {s.O}, seed + 5);
  const Tensor none;
  ops::linear_backward(with_dx ? dx.cpu : none, with_dw ? dw.cpu : none, with_db ? db.cpu : none,
                       dy.cpu, x.cpu, w.cpu, accumulate_dx);
  ops::linear_backward(with_dx ? dx.gpu : none, with_dw ? dw.gpu : none, with_db ? db.gpu : none,
                       dy.gpu, x.gpu, w.gpu, accumulate_dx);
  // Outputs not asked for keep their prefilled values on both sides.
  expect_nmse(dx, kGpuF32Nmse, name("dx", s, engine).c_str());
  expect_nmse(dw, kGpuF32Nmse, name("dw", s, engine).c_str());
  expect_nmse(db, kGpuF32Nmse, name("db", s, engine).c_str());
}

// Each check runs with the default GEMM engine (cuBLASLt on NVIDIA) and with the tiled kernel.
const char* const kEngines[] = {"auto", "tiled"};

void check_forward(const Shape& s, DType wdt, bool bias, bool accumulate, uint64_t seed) {
  for (const char* engine : kEngines) {
    const ScopedEnv e("ZAYA_GPU_GEMM", engine);
    check_forward_once(s, wdt, bias, accumulate, seed, engine);
  }
}

void check_backward(const Shape& s, bool with_dx, bool with_dw, bool with_db, bool accumulate_dx,
                    uint64_t seed) {
  for (const char* engine : kEngines) {
    const ScopedEnv e("ZAYA_GPU_GEMM", engine);
    check_backward_once(s, with_dx, with_dw, with_db, accumulate_dx, seed, engine);
  }
}

}  // namespace

TEST(GpuLinear, ForwardOddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int64_t n : odd_sizes()) {
    for (bool bias : {false, true})
      for (bool acc : {false, true}) {
        check_forward({n, 33, 31}, DType::F32, bias, acc, seed += 4);
        check_forward({7, n, 33}, DType::F32, bias, acc, seed += 4);
        check_forward({31, 7, n}, DType::F32, bias, acc, seed += 4);
      }
  }
}

TEST(GpuLinear, ForwardBf16Weight) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (int64_t n : odd_sizes())
    for (bool bias : {false, true})
      for (bool acc : {false, true}) {
        check_forward({n, 257, 33}, DType::BF16, bias, acc, seed += 4);
        check_forward({3, 31, n}, DType::BF16, bias, acc, seed += 4);
      }
}

TEST(GpuLinear, ForwardModelShape) {
  ZAYA_REQUIRE_GPU();
  // ZAYA1-base: D 2048 → 4096 (the expert's gate ‖ up), few tokens (decode and a short prefill).
  for (int64_t n : {1, 5, 64}) {
    check_forward({n, 2048, 4096}, DType::F32, false, false, 2000 + uint64_t(n));
    check_forward({n, 2048, 4096}, DType::BF16, true, false, 3000 + uint64_t(n));
    check_forward({n, 4096, 2048}, DType::F32, true, true, 4000 + uint64_t(n));
  }
}

TEST(GpuLinear, BackwardOddSizesAndAccumulate) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 5000;
  for (int64_t n : odd_sizes())
    for (bool acc : {false, true}) {
      check_backward({n, 33, 31}, true, true, true, acc, seed += 6);
      check_backward({7, n, 33}, true, true, true, acc, seed += 6);
      check_backward({31, 7, n}, true, true, true, acc, seed += 6);
    }
}

TEST(GpuLinear, BackwardUndefinedOutputs) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 6000;
  for (bool dx : {false, true})
    for (bool dw : {false, true})
      for (bool db : {false, true}) check_backward({33, 31, 7}, dx, dw, db, false, seed += 6);
}

TEST(GpuLinear, BackwardModelShapeAndLongN) {
  ZAYA_REQUIRE_GPU();
  check_backward({5, 2048, 4096}, true, true, true, false, 7000);
  check_backward({3, 4096, 2048}, true, true, true, true, 7100);
  // Many tokens: the column sum of db runs in several chunks (deterministic second pass).
  check_backward({1000, 64, 96}, true, true, true, false, 7200);
  check_backward({40000, 8, 33}, false, true, true, false, 7300);
}

TEST(GpuLinear, BiasGradientIsDeterministic) {
  ZAYA_REQUIRE_GPU();
  DevicePair x = random_pair(DType::F32, {20000, 4}, 1);
  DevicePair w = random_pair(DType::F32, {257, 4}, 2);
  DevicePair dy = random_pair(DType::F32, {20000, 257}, 3);
  DevicePair db1(DType::F32, {257}), db2(DType::F32, {257});
  const Tensor none;
  ops::linear_backward(none, none, db1.gpu, dy.gpu, x.gpu, w.gpu);
  ops::linear_backward(none, none, db2.gpu, dy.gpu, x.gpu, w.gpu);
  EXPECT_EQ(db1.gpu_values(), db2.gpu_values());
}
