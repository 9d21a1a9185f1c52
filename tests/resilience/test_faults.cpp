// The pieces of fault handling on their own: the ZAYA_FAULT grammar (train/faults.h), the z-score
// spike detector (train/anomaly.h) and the straggler tracker (train/straggler.h).
#include <cmath>
#include <vector>

#include "test_util.h"
#include "train/anomaly.h"
#include "resilience/faults.h"
#include "train/straggler.h"

using namespace zaya;
using namespace zaya::test;

TEST(FaultSpecs, ParsesEveryKindWithItsDefaults) {
  const auto f = faults::parse_fault_specs(
      "kill@step:7:rank:1, hang@step:5:section:collective,exit@setup:always,"
      "slow@step:3:rank:1:seconds:0.5,nan@step:30,spike@step:31:factor:50,"
      "corrupt-checkpoint@step:10,kill@step:15:section:checkpoint,slow@preflight:rank:2");
  ASSERT_EQ(f.size(), 9u);
  EXPECT_EQ(f[0].kind, faults::Kind::Kill);
  EXPECT_EQ(f[0].step, 7);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[0].section, "forward-backward");
  EXPECT_EQ(f[0].text, "kill@step:7:rank:1");
  EXPECT_EQ(f[1].kind, faults::Kind::Hang);
  EXPECT_EQ(f[1].section, "collective");
  EXPECT_LT(f[1].seconds, 0);  // forever
  EXPECT_EQ(f[2].when, faults::When::Setup);
  EXPECT_TRUE(f[2].always);
  EXPECT_EQ(f[2].code, 1);
  EXPECT_DOUBLE_EQ(f[3].seconds, 0.5);
  EXPECT_EQ(f[4].kind, faults::Kind::Nan);
  EXPECT_EQ(f[4].rank, 0);
  EXPECT_DOUBLE_EQ(f[5].factor, 50);
  EXPECT_EQ(f[6].kind, faults::Kind::CorruptCheckpoint);
  EXPECT_EQ(f[7].section, "checkpoint");
  EXPECT_EQ(f[8].when, faults::When::Preflight);
  EXPECT_DOUBLE_EQ(f[8].seconds, 1);  // slow's default
}

TEST(FaultSpecs, BadSpecsAreClearErrors) {
  const auto bad = [](const std::string& spec, const std::string& why) {
    expect_error([&] { faults::parse_fault_specs(spec); }, {why});
  };
  bad("explode@step:3", "unknown fault kind 'explode'");
  bad("kill", "expected KIND@WHEN");
  bad("kill@step", "step needs a number");
  bad("kill@step:0", "step must be a whole number");
  bad("kill@step:2.5", "step must be a whole number");
  bad("kill@tuesday", "unknown time 'tuesday'");
  bad("kill@step:3:rank", "'rank' needs a value");
  bad("kill@step:3:rank:-1", "rank must be a whole number");
  bad("kill@step:3:colour:red", "unknown key 'colour'");
  bad("hang@step:3:section:lunch", "unknown section 'lunch'");
  bad("slow@step:3:seconds:-1", "seconds must be >= 0");
  bad("spike@step:3:factor:0", "factor must be > 0");
  bad("exit@step:3:code:256", "code must be a whole number");
  bad("kill@preflight", "only nan and slow faults can happen at preflight");
  bad("corrupt-checkpoint@setup", "corrupt-checkpoint needs the checkpoint's step");
  bad("kill@step:3,,nan@step:4", "an empty fault spec");
}

TEST(AnomalyDetector, JudgesSpikesOnceTheWindowIsFull) {
  AnomalyDetector d({.window = 8, .z = 6});
  // A falling, slightly noisy loss: never an anomaly, however it falls.
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(d.observe(5.0 - 0.1 * i + 0.01 * (i % 2), 1.0).anomaly);
  EXPECT_TRUE(d.judging());
  EXPECT_FALSE(d.observe(3.0, 1.0).anomaly);  // a drop is no spike
  const AnomalyVerdict spike = d.observe(50.0, 1.0);
  EXPECT_TRUE(spike.anomaly);
  EXPECT_EQ(spike.kind, "loss_spike");
  EXPECT_GT(spike.z, 6);
  const AnomalyVerdict grad = d.observe(4.3, 1e3);
  EXPECT_TRUE(grad.anomaly);
  EXPECT_EQ(grad.kind, "grad_spike");
  EXPECT_FALSE(d.observe(4.3, 1.0).anomaly);  // the spikes did not enter the window
}

TEST(AnomalyDetector, NonFiniteIsAlwaysAnAnomalyAndZeroZJudgesNothingElse) {
  AnomalyDetector off({.window = 2, .z = 0});
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(off.observe(1.0, 1.0).anomaly);
  EXPECT_FALSE(off.observe(1e9, 1e9).anomaly);
  EXPECT_EQ(off.observe(NAN, 1.0).kind, "nonfinite");
  EXPECT_EQ(off.observe(1.0, INFINITY).kind, "nonfinite");
  AnomalyDetector fresh({.window = 4, .z = 6});
  EXPECT_EQ(fresh.observe(NAN, 1.0).kind, "nonfinite");  // before the window is full too
}

TEST(AnomalyDetector, AFlatLossDoesNotTurnNoiseIntoSpikes) {
  AnomalyDetector d({.window = 4, .z = 6});
  for (int i = 0; i < 4; ++i) d.observe(2.0, 1.0);
  EXPECT_FALSE(d.observe(2.0 + 1e-7, 1.0).anomaly);  // within 1e-6 of the mean's magnitude
  EXPECT_TRUE(d.observe(2.1, 1.0).anomaly);
}

TEST(AnomalyDetector, TheWindowRoundTripsExactly) {
  AnomalyDetector a({.window = 4, .z = 6}), b({.window = 4, .z = 6});
  for (int i = 0; i < 6; ++i) a.observe(1.0 / (i + 3), 0.1 * std::sqrt(i + 1.0));
  b.from_json(nlohmann::json::parse(a.to_json().dump()));
  EXPECT_EQ(a.to_json(), b.to_json());
  for (double x : {0.2, 9.0}) {
    const AnomalyVerdict va = a.observe(x, 0.2), vb = b.observe(x, 0.2);
    EXPECT_EQ(va.anomaly, vb.anomaly);
    EXPECT_EQ(va.z, vb.z);
  }
  expect_error([&] { b.from_json({{"loss", {1.0}}}); }, {"'anomaly.grad_norm'"});
  expect_error(
      [&] {
        b.from_json({{"loss", {1.0, 2.0}}, {"grad_norm", {1.0}}});
      },
      {"2 losses but 1 gradient norms"});
  expect_error(
      [&] {
        b.from_json({{"loss", {"x"}}, {"grad_norm", {1.0}}});
      },
      {"not a finite number"});
}

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
