// The GPU caching allocator's size classes (src/ops/gpu/size_class.h), checked on the CPU: every
// class holds its request, the slack stays within each range's bound, classes never shrink as
// requests grow, and gpu-step-bench's big buffers no longer lose a quarter.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/gpu/size_class.h"

using zaya::gpu::size_class;

namespace {

constexpr size_t kMiB = size_t(1) << 20, kGiB = size_t(1) << 30;

// Requests around every power of two from 1 byte to 64 GiB, and a few in between.
std::vector<size_t> requests() {
  std::vector<size_t> r = {0, 1, 511, 512, 513, 1000, 4097};
  for (size_t p = 1024; p <= 64 * kGiB; p <<= 1)
    for (size_t q : {p - 1, p, p + 1, p + p / 3, p + p / 2 + 7}) r.push_back(q);
  return r;
}

}  // namespace

TEST(GpuSizeClass, HoldsTheRequestWithBoundedSlack) {
  for (size_t b : requests()) {
    const size_t c = size_class(b);
    ASSERT_GE(c, b) << b;
    if (b <= kMiB) {
      EXPECT_LT(c - b, 512u) << b;
      EXPECT_EQ(c % 512, 0u) << b;
    } else if (b <= kGiB) {  // under a quarter of the next power of two, so under half of b
      EXPECT_LT(double(c - b), 0.5 * double(b)) << b;
    } else {
      EXPECT_LE(double(c - b), 0.0625 * double(b)) << b;
    }
  }
}

TEST(GpuSizeClass, ClassesGrowWithTheRequestAndAreStable) {
  size_t last = 0;
  for (size_t b = 0; b <= 8 * kMiB; b += 4093) {
    const size_t c = size_class(b);
    EXPECT_GE(c, last) << b;
    EXPECT_EQ(size_class(c), c) << b;  // a class is its own class: a cached block fits exactly
    last = c;
  }
  for (size_t b = kGiB - 3 * kMiB; b <= kGiB + 300 * kMiB; b += 7 * kMiB + 1) {
    const size_t c = size_class(b);
    EXPECT_GE(c, last) << b;
    EXPECT_EQ(size_class(c), c) << b;
    last = c;
  }
}

// Sizes that vary from step to step (MoE scratch) below 1 GiB share classes: 25% of spread.
TEST(GpuSizeClass, NearbyMidSizesShareAClass) {
  const size_t base = 100 * kMiB;  // [rows, 4096] f32 scratch for ~6400 routed rows
  EXPECT_EQ(size_class(base), size_class(base + 20 * kMiB));
}

// gpu-step-bench (configs/models/gpu-step-bench.md): 4.27e9 parameters at 36 sub-layers, 4.48e9
// at 38; 4-byte buffers of each.
TEST(GpuSizeClass, GpuStepBenchBuffers) {
  const double gib = double(kGiB);
  EXPECT_EQ(size_class(4 * size_t(4273646372u)), 16 * kGiB);         // 15.9 GiB
  EXPECT_EQ(size_class(4 * size_t(4481226372u)), 17 * kGiB);         // 16.7 GiB: quarters gave 24
  EXPECT_LE(double(size_class(8 * size_t(4481226372u))), 34 * gib);  // AdamW m + v: was 48
}
