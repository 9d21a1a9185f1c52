// ops/profile.h: op calls are counted and timed at the dispatch seam only while profiling is on;
// nested scopes count once (the outermost); reset() zeroes the counters.
#include "ops/profile.h"

#include <gtest/gtest.h>

#include <vector>

#include "ops/ops.h"

namespace zaya {
namespace {

int64_t calls_of(const std::string& op) {
  for (const auto& o : ops::profile::snapshot())
    if (o.op == op) return o.calls;
  return 0;
}

TEST(OpProfile, CountsCallsOnlyWhileEnabled) {
  std::vector<float> x(12, 1.0f), w(6, 0.5f), y(8);
  const Tensor tx(x.data(), {3, 4}), tw(w.data(), {2, 3}), ty(y.data(), {4, 2});
  ops::profile::reset();
  ops::linear_forward(ty, Tensor(x.data(), {4, 3}), tw, {});
  EXPECT_EQ(calls_of("linear_forward"), 0);  // off by default
  ops::profile::enable(true);
  for (int i = 0; i < 3; ++i) ops::linear_forward(ty, Tensor(x.data(), {4, 3}), tw, {});
  ops::fill_zero(tx);
  ops::profile::enable(false);
  ops::fill_zero(tx);
  EXPECT_EQ(calls_of("linear_forward"), 3);
  EXPECT_EQ(calls_of("fill_zero"), 1);
  for (const auto& o : ops::profile::snapshot()) EXPECT_GE(o.seconds, 0.0) << o.op;
  ops::profile::reset();
  EXPECT_TRUE(ops::profile::snapshot().empty());
}

TEST(OpProfile, NestedScopesCountOnce) {
  const int outer = ops::profile::detail::slot("test_outer"),
            inner = ops::profile::detail::slot("test_inner");
  EXPECT_EQ(ops::profile::detail::slot("test_outer"), outer);  // one slot per name
  ops::profile::reset();
  ops::profile::enable(true);
  {
    ops::profile::Scope a(outer);
    ops::profile::Scope b(inner);
  }
  { ops::profile::Scope b(inner); }
  ops::profile::enable(false);
  EXPECT_EQ(calls_of("test_outer"), 1);
  EXPECT_EQ(calls_of("test_inner"), 1);  // only the call that was not inside another op
}

}  // namespace
}  // namespace zaya
