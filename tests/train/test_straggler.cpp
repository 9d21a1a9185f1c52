// The straggler tracker on its own (train/straggler.h): a rank slow for enough steps is named
// once, two ranks compare with each other, milliseconds of noise are not a straggler.
#include <vector>

#include "test_util.h"
#include "train/straggler.h"

using namespace zaya;
using namespace zaya::test;

TEST(StragglerTracker, NamesARankSlowForEnoughStepsOnce) {
  StragglerTracker t(3, {.factor = 1.5, .steps = 3});
  const std::vector<double> even = {1.0, 1.1, 0.9}, slow = {1.0, 2.0, 1.0};
  EXPECT_TRUE(t.observe(even).empty());
  EXPECT_TRUE(t.observe(slow).empty());
  EXPECT_TRUE(t.observe(slow).empty());
  EXPECT_EQ(t.observe(slow), std::vector<int>{1});
  EXPECT_NEAR(t.ratios()[1], 2.0, 1e-12);
  EXPECT_TRUE(t.observe(slow).empty());  // named once
  EXPECT_EQ(t.current(), std::vector<int>{1});
  EXPECT_TRUE(t.observe(even).empty());  // recovered
  EXPECT_TRUE(t.current().empty());
}

TEST(StragglerTracker, TwoRanksCompareWithEachOtherAndOneRankNever) {
  StragglerTracker two(2, {.factor = 1.5, .steps = 1});
  EXPECT_EQ(two.observe(std::vector<double>{0.1, 0.4}), std::vector<int>{1});
  StragglerTracker one(1, {.factor = 1.5, .steps = 1});
  EXPECT_TRUE(one.observe(std::vector<double>{5.0}).empty());
}

TEST(StragglerTracker, MillisecondsOfNoiseAreNotAStraggler) {
  StragglerTracker t(2, {.factor = 1.5, .steps = 1});
  EXPECT_TRUE(t.observe(std::vector<double>{0.0055, 0.00087}).empty());  // 6x, but 5 ms
  EXPECT_NEAR(t.ratios()[0], 0.0055 / 0.00087, 1e-9);
  EXPECT_EQ(t.observe(std::vector<double>{0.0055, 0.30087}), std::vector<int>{1});
}
