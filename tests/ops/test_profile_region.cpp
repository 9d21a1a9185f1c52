// ops/profile.h's regions (ZAYA_PROFILE_REGION): inside a timed op a region is counted under
// "OP/REGION" and its time taken out of the op's own entry (the entries do not overlap and add up
// to the op's wall time); a region outside any op, inside another region, or with profiling off
// counts nothing. Times are only bounded below by the sleeps and above by the wall clock.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "core/timer.h"
#include "ops/profile.h"

namespace zaya {
namespace {

std::map<std::string, ops::profile::OpTime> entries() {
  std::map<std::string, ops::profile::OpTime> m;
  for (const auto& o : ops::profile::snapshot()) m[o.op] = o;
  return m;
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A stand-in for gemm(): the region marker as a GPU op's helper would use it.
void fake_gemm(int ms) {
  ZAYA_PROFILE_REGION("test_gemm");
  sleep_ms(ms);
}

TEST(OpProfileRegion, SplitsTheOpsTime) {
  const int op = ops::profile::detail::slot("test_region_op");
  ops::profile::reset();
  ops::profile::enable(true);
  Timer wall;
  {
    ops::profile::Scope s(op);
    sleep_ms(3);
    fake_gemm(5);
    fake_gemm(5);
  }
  const double total = wall.seconds();
  ops::profile::enable(false);
  const auto e = entries();
  ASSERT_TRUE(e.count("test_region_op")) << "the op";
  ASSERT_TRUE(e.count("test_region_op/test_gemm")) << "the op's region";
  const auto& own = e.at("test_region_op");
  const auto& gemm = e.at("test_region_op/test_gemm");
  EXPECT_EQ(own.calls, 1);
  EXPECT_EQ(gemm.calls, 2);
  EXPECT_GE(gemm.seconds, 0.010);  // both sleeps of the region
  EXPECT_GE(own.seconds, 0.003);   // the op's own sleep, the region's taken out
  EXPECT_LE(own.seconds + gemm.seconds, total);
  EXPECT_LT(own.seconds, total - 0.010 + 1e-9);
}

TEST(OpProfileRegion, CountsNothingOutsideAnOpOrWhenOff) {
  const int op = ops::profile::detail::slot("test_region_op2");
  ops::profile::reset();
  fake_gemm(0);  // off
  {
    ops::profile::Scope s(op);  // off: not timed, so its region is not either
    fake_gemm(0);
  }
  ops::profile::enable(true);
  fake_gemm(0);  // on, but outside any op
  {
    ops::profile::Scope s(op);
    ZAYA_PROFILE_REGION("test_outer_region");
    fake_gemm(0);  // inside another region: the outer one counts
  }
  ops::profile::enable(false);
  const auto e = entries();
  EXPECT_FALSE(e.count("test_gemm"));
  EXPECT_FALSE(e.count("test_region_op2/test_gemm"));
  EXPECT_EQ(e.at("test_region_op2").calls, 1);
  EXPECT_EQ(e.at("test_region_op2/test_outer_region").calls, 1);
}

}  // namespace
}  // namespace zaya
