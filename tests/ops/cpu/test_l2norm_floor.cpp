// l2norm_scale with a floor (transformers' native ZAYA: ‖x‖ clamped below at float32's epsilon):
// a head vector far above the floor gives exactly the floor-0 result; a zero vector gives 0 instead
// of NaN; below the floor the map is linear, x·s/floor, and its backward is (s/floor)·dy, with
// dtemp = Σ⟨√d·x/floor, dy⟩.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "test_util.h"

namespace zaya {
namespace {

constexpr float kFloor = 1.1920929e-07f;

TEST(L2NormFloor, AboveTheFloorIsUnchangedAndBelowIsLinear) {
  const int64_t H = 2, d = 4;
  // Head 0 is ordinary; head 1 is tiny (norm 2e-8, below the floor); then one zero head pair.
  std::vector<float> x = {0.5f, -1.f, 2.f, 0.25f, 1e-8f, -1e-8f, 1e-8f, 1e-8f,
                          0.f,  0.f,  0.f, 0.f,   0.f,   0.f,    0.f,   0.f};
  std::vector<float> temp = {1.5f, 0.75f};
  const Tensor X(x.data(), {1, 2, H, d}), Temp(temp.data(), {H});
  std::vector<float> y0(16), n0(4), y1(16), n1(4);
  ops::l2norm_scale_forward(Tensor(y0.data(), {1, 2, H, d}), Tensor(n0.data(), {1, 2, H}), X, Temp);
  ops::l2norm_scale_forward(Tensor(y1.data(), {1, 2, H, d}), Tensor(n1.data(), {1, 2, H}), X, Temp,
                            kFloor);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y1[size_t(i)], y0[size_t(i)]) << i;
  EXPECT_EQ(n1[1], kFloor);
  const double s1 = std::sqrt(double(d)) * temp[1];
  for (int i = 4; i < 8; ++i) EXPECT_NEAR(y1[size_t(i)], s1 * x[size_t(i)] / kFloor, 1e-6) << i;
  for (int i = 8; i < 16; ++i) {
    EXPECT_EQ(y1[size_t(i)], 0.0f) << i;
    EXPECT_TRUE(std::isnan(y0[size_t(i)])) << "without a floor a zero head is 0/0";
  }

  std::vector<float> dy(16), dx(16), dtemp(2, 0.f);
  for (int i = 0; i < 16; ++i) dy[size_t(i)] = 0.1f * float(i + 1);
  ops::l2norm_scale_backward(Tensor(dx.data(), {1, 2, H, d}), Tensor(dtemp.data(), {H}),
                             Tensor(dy.data(), {1, 2, H, d}), X, Tensor(n1.data(), {1, 2, H}), Temp,
                             kFloor);
  for (int i : {4, 5, 6, 7, 12, 13, 14, 15}) {
    const double want_dx = s1 / kFloor * dy[size_t(i)];
    EXPECT_NEAR(dx[size_t(i)], want_dx, 1e-6 * std::fabs(want_dx)) << i;
  }
  // Head 1's dtemp: Σ over tokens of ⟨√d x/floor, dy⟩ (the zero token adds nothing).
  double want = 0;
  for (int i = 4; i < 8; ++i) want += std::sqrt(double(d)) * x[size_t(i)] / kFloor * dy[size_t(i)];
  EXPECT_NEAR(dtemp[1], want, 1e-4 * std::fabs(want));
}

}  // namespace
}  // namespace zaya
