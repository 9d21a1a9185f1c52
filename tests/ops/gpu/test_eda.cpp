// eda_forward / eda_backward on the GPU against the CPU backend (label gpu; skips without a
// device): odd widths (scalar path), 2048 (float4 path), more rows than the column-sum grid,
// += of drprev and dgamma, either output undefined.
#include "gpu_test_util.h"

namespace zaya::test {
namespace {

struct Shape {
  int64_t N, R;
};
const std::vector<Shape> kShapes = {{1, 1},     {7, 7},    {31, 33}, {33, 31},
                                    {257, 257}, {3, 2048}, {600, 64}};

TEST(GpuEda, Forward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("N " + std::to_string(s.N) + " R " + std::to_string(s.R));
    DevicePair r = random_pair(DType::F32, {s.N, s.R}, seed += 10);
    DevicePair gamma = random_pair(DType::F32, {s.R}, seed + 1);
    DevicePair rprev = random_pair(DType::F32, {s.N, s.R}, seed + 2);
    ops::eda_forward(r.cpu, gamma.cpu, rprev.cpu);
    ops::eda_forward(r.gpu, gamma.gpu, rprev.gpu);
    expect_nmse(r, kGpuF32Nmse, "r");
  }
}

TEST(GpuEda, Backward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 100;
  for (const Shape& s : kShapes)
    for (int which = 0; which < 3; ++which) {  // both, drprev only, dgamma only
      SCOPED_TRACE("N " + std::to_string(s.N) + " R " + std::to_string(s.R) + " which " +
                   std::to_string(which));
      DevicePair dr = random_pair(DType::F32, {s.N, s.R}, seed += 10);
      DevicePair gamma = random_pair(DType::F32, {s.R}, seed + 1);
      DevicePair rprev = random_pair(DType::F32, {s.N, s.R}, seed + 2);
      DevicePair drprev = random_pair(DType::F32, {s.N, s.R}, seed + 3);
      DevicePair dgamma = random_pair(DType::F32, {s.R}, seed + 4);
      for (bool g : {false, true}) {
        const Tensor drp = which == 2 ? Tensor{} : (g ? drprev.gpu : drprev.cpu);
        const Tensor dgm = which == 1 ? Tensor{} : (g ? dgamma.gpu : dgamma.cpu);
        ops::eda_backward(drp, dgm, g ? dr.gpu : dr.cpu, g ? rprev.gpu : rprev.cpu,
                          g ? gamma.gpu : gamma.cpu);
      }
      expect_nmse(drprev, kGpuF32Nmse, "drprev");
      expect_nmse(dgamma, kGpuF32Nmse, "dgamma");
    }
}

}  // namespace
}  // namespace zaya::test
