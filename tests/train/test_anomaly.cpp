// The z-score spike detector on its own (train/anomaly.h): spikes judged once the window is
// full and the warm-up is over, non-finite values always, a flat loss never, and the window
// round-trips exactly.
#include <cmath>
#include <vector>

#include "test_util.h"
#include "train/anomaly.h"

using namespace zaya;
using namespace zaya::test;

TEST(AnomalyDetector, JudgesSpikesOnceTheWindowIsFull) {
  AnomalyDetector d({.window = 8, .z = 6});
  // A falling, slightly noisy loss: never an anomaly, however it falls.
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(d.observe(5.0 - 0.1 * i + 0.01 * (i % 2), 1.0).anomaly);
  EXPECT_TRUE(d.judging());
  EXPECT_FALSE(d.observe(3.0, 1.0).anomaly);  // a drop is no spike
  const AnomalyVerdict spike = d.observe(50.0, 1.0);
  EXPECT_TRUE(spike.anomaly);
  EXPECT_EQ(spike.kind, AnomalyKind::LossSpike);
  EXPECT_GT(spike.z, 6);
  const AnomalyVerdict grad = d.observe(4.3, 1e3);
  EXPECT_TRUE(grad.anomaly);
  EXPECT_EQ(grad.kind, AnomalyKind::GradSpike);
  EXPECT_FALSE(d.observe(4.3, 1.0).anomaly);  // the spikes did not enter the window
}

// During the warm-up (judge_spikes = false) values only fill the window; a NaN is still judged.
TEST(AnomalyDetector, TheWarmUpFillsTheWindowWithoutJudgingSpikes) {
  AnomalyDetector d({.window = 4, .z = 6});
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(d.observe(2.0 + 0.01 * i, 1.0, false).anomaly);
  EXPECT_FALSE(d.observe(50.0, 1e3, /*judge_spikes=*/false).anomaly);  // taken in
  EXPECT_EQ(d.observe(NAN, 1.0, false).kind, AnomalyKind::NonFinite);
  EXPECT_EQ(d.to_json()["loss"].back(), 50.0);
  EXPECT_FALSE(d.observe(50.0, 1e3).anomaly) << "the warm-up's values are the window";
}

// A healthy run's gradient norm jumps 2–5× over a calm window (z far above 6): not a spike unless
// it is also grad_ratio (10) × the window's mean.
TEST(AnomalyDetector, AGradientNormSpikeMustAlsoBeSeveralTimesTheMean) {
  AnomalyDetector d({.window = 8, .z = 6});
  for (int i = 0; i < 8; ++i) d.observe(4.0, 0.9 + 0.01 * (i % 3));
  const AnomalyVerdict jump = d.observe(4.0, 2.6);  // 2.9×
  EXPECT_FALSE(jump.anomaly);
  EXPECT_GT(jump.z, 12);
  EXPECT_FALSE(d.observe(4.0, 4.5).anomaly);                     // 5×
  EXPECT_EQ(d.observe(4.0, 30.0).kind, AnomalyKind::GradSpike);  // 19×
  AnomalyDetector z_only({.window = 8, .z = 6, .grad_ratio = 0});
  for (int i = 0; i < 8; ++i) z_only.observe(4.0, 0.9 + 0.01 * (i % 3));
  EXPECT_TRUE(z_only.observe(4.0, 2.6).anomaly);
}

TEST(AnomalyDetector, NonFiniteIsAlwaysAnAnomalyAndZeroZJudgesNothingElse) {
  AnomalyDetector off({.window = 2, .z = 0});
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(off.observe(1.0, 1.0).anomaly);
  EXPECT_FALSE(off.observe(1e9, 1e9).anomaly);
  EXPECT_EQ(off.observe(NAN, 1.0).kind, AnomalyKind::NonFinite);
  EXPECT_EQ(off.observe(1.0, INFINITY).kind, AnomalyKind::NonFinite);
  AnomalyDetector fresh({.window = 4, .z = 6});
  EXPECT_EQ(fresh.observe(NAN, 1.0).kind, AnomalyKind::NonFinite);  // before the window is full too
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
