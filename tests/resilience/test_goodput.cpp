// The goodput report (resilience/goodput.h): events parsing (torn lines), the parts summing to the
// wall time (never negative), recomputed steps attributed to the failure that lost them, rollback
// repeats and skipped steps lost to anomalies, setup failures, clock scaling, the summary.
#include <gtest/gtest.h>

#include "resilience/goodput.h"

using namespace zaya;
using nlohmann::json;

namespace {

std::string step_line(int attempt, int64_t step, double step_s, double after_s,
                      bool skipped = false) {
  return json({{"event", "step"},
               {"attempt", attempt},
               {"step", step},
               {"step_s", step_s},
               {"after_s", after_s},
               {"skipped", skipped}})
             .dump() +
         "\n";
}
std::string start_line(int attempt, int64_t resumed, double setup_s) {
  return json({{"event", "start"},
               {"attempt", attempt},
               {"world", 1},
               {"resumed_step", resumed},
               {"setup_s", setup_s}})
             .dump() +
         "\n";
}

// An attempt with a start event and steps [from, to] of step_s 1, after_s 0.5 each.
AttemptRecord attempt(int n, double launch, AttemptEnd end, int64_t resumed, int64_t from,
                      int64_t to, double setup = 1, double tail = 0.5) {
  std::string text = start_line(n, resumed, setup);
  for (int64_t s = from; s <= to; ++s) text += step_line(n, s, 1.0, 0.5);
  AttemptRecord a;
  a.attempt = n;
  a.launch_s = launch;
  a.end_s = launch + setup + 1.5 * double(to - from + 1) + tail;
  a.end = end;
  a.exit = end == AttemptEnd::Completed ? "exit code 0" : "signal SIGKILL";
  a.cause = "test";
  a.progress_stop_s = a.end_s - tail;
  a.events = parse_events(text);
  return a;
}

double sum_parts(const json& r) {
  double s = r["productive_s"].get<double>() + r["anomaly_s"].get<double>();
  for (const char* k : {"before_launch_s", "setup_s", "after_step_s", "shutdown_s"})
    s += r["overhead"][k].get<double>();
  for (const json& f : r["failures"])
    for (const char* k : {"detection_s", "restart_s", "recomputed_s", "other_s"}) {
      EXPECT_GE(f[k].get<double>(), 0) << k;
      s += f[k].get<double>();
    }
  return s;
}

void expect_adds_up(const json& r) {
  const double wall = r["wall_s"];
  EXPECT_NEAR(sum_parts(r), wall, 1e-9 * std::max(1.0, wall)) << r.dump(2);
  EXPECT_NEAR(r["parts_sum_s"].get<double>(), wall, 1e-9 * std::max(1.0, wall));
  for (const char* k : {"productive_s", "anomaly_s", "overhead_s", "failures_s"})
    EXPECT_GE(r[k].get<double>(), 0) << k;
  for (const char* k : {"before_launch_s", "setup_s", "after_step_s", "shutdown_s"})
    EXPECT_GE(r["overhead"][k].get<double>(), 0) << k;
}

}  // namespace

TEST(Goodput, ParsesEventsAndSkipsTornLines) {
  std::string text = start_line(1, 0, 2.5) + step_line(1, 1, 0.2, 0.1) +
                     R"({"event":"anomaly","attempt":1,"step":2,"kind":"nonfinite"})"
                     "\n" +
                     step_line(1, 2, 0.2, 0.1, true) + "not json\n" +
                     R"({"event":"rollback","attempt":1,"step":2,"to_step":0,"windows":[2],)"
                     R"("seconds":0.3})"
                     "\n" +
                     R"({"event":"straggler","attempt":1,"step":1,"rank":1,"host":"h","ratio":2})"
                     "\n" +
                     R"({"event":"step","attempt":1,"st)";  // torn last line
  const AttemptEvents ev = parse_events(text);
  EXPECT_TRUE(ev.started);
  EXPECT_EQ(ev.setup_s, 2.5);
  ASSERT_EQ(ev.items.size(), 3u);
  EXPECT_FALSE(ev.items[0].rollback);
  EXPECT_TRUE(ev.items[1].skipped);
  EXPECT_TRUE(ev.items[2].rollback);
  EXPECT_EQ(ev.items[2].to_step, 0);
  EXPECT_EQ(ev.items[2].seconds, 0.3);
  EXPECT_EQ(ev.anomalies.size(), 1u);
  EXPECT_EQ(ev.rollbacks.size(), 1u);
  EXPECT_EQ(ev.stragglers.size(), 1u);
  EXPECT_EQ(ev.torn_lines, 2);
  EXPECT_FALSE(ev.done);
}

TEST(Goodput, ParsesFiredFaults) {
  const auto f = parse_faults_fired("kill@step:7:rank:1\t1\t1\ngarbage\nhang@step:5\t0\t2\n");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].spec, "kill@step:7:rank:1");
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[1].attempt, 2);
}

TEST(Goodput, OneCleanRun) {
  GoodputInput in;
  in.start_s = 10;
  in.attempts = {attempt(1, 10.5, AttemptEnd::Completed, 0, 1, 4)};  // ends at 18
  in.end_s = 18.1;
  in.outcome = JobOutcome::Completed;
  const json r = goodput_report(in);
  expect_adds_up(r);
  EXPECT_NEAR(r["wall_s"].get<double>(), 8.1, 1e-12);
  EXPECT_NEAR(r["productive_s"].get<double>(), 4, 1e-12);
  EXPECT_NEAR(r["overhead"]["before_launch_s"].get<double>(), 0.5, 1e-12);
  EXPECT_NEAR(r["overhead"]["setup_s"].get<double>(), 1, 1e-12);
  EXPECT_NEAR(r["overhead"]["after_step_s"].get<double>(), 2, 1e-12);
  EXPECT_NEAR(r["overhead"]["shutdown_s"].get<double>(), 0.6, 1e-12);
  EXPECT_EQ(r["failures"].size(), 0u);
  EXPECT_EQ(r["restarts"], 0);
  EXPECT_EQ(r["steps_kept"], 4);
}

TEST(Goodput, CrashRecomputesTheStepsAfterTheCheckpoint) {
  GoodputInput in;
  in.start_s = 0;
  AttemptRecord a1 = attempt(1, 0, AttemptEnd::Crashed, 0, 1, 4, 1, 0.25);  // ends 7.25
  AttemptRecord a2 = attempt(2, 8.25, AttemptEnd::Completed, 2, 3, 6, 2);   // 1 s gap
  in.attempts = {a1, a2};
  in.end_s = a2.end_s;
  const json r = goodput_report(in);
  expect_adds_up(r);
  ASSERT_EQ(r["failures"].size(), 1u);
  const json& f = r["failures"][0];
  EXPECT_EQ(f["kind"], "crash");
  EXPECT_NEAR(f["detection_s"].get<double>(), 0.25, 1e-12);
  EXPECT_NEAR(f["restart_s"].get<double>(), 1 + 2, 1e-12);  // gap + the next setup
  EXPECT_NEAR(f["recomputed_s"].get<double>(), 2 * 1.5, 1e-12);
  EXPECT_EQ(f["recomputed_steps"], json::array({3, 4}));
  EXPECT_NEAR(r["productive_s"].get<double>(), 6, 1e-12);  // steps 1-6 once each
  EXPECT_EQ(r["steps_kept"], 6);
  EXPECT_EQ(r["steps_recomputed"], 2);
  EXPECT_EQ(r["restarts"], 1);
}

TEST(Goodput, EachFailureGetsTheStepsItLost) {
  // Attempt 1 runs 1-12, crashes (checkpoint 10 corrupt: attempt 2 falls back to 5) → 6-12 are
  // attempt 1's loss. Attempt 2 fails in setup (no events). Attempt 3 resumes from 5 too, runs
  // 6-8 and hangs; attempt 4 resumes from 5 and completes: 6-8 are attempt 3's loss.
  AttemptRecord a1 = attempt(1, 0, AttemptEnd::Crashed, 0, 1, 12);
  AttemptRecord a2;
  a2.attempt = 2;
  a2.launch_s = a1.end_s + 0.5;
  a2.end_s = a2.launch_s + 3;
  a2.end = AttemptEnd::Crashed;
  a2.progress_stop_s = a2.end_s - 0.1;
  AttemptRecord a3 = attempt(3, a2.end_s + 0.5, AttemptEnd::Hung, 5, 6, 8, 1, 4);
  a3.progress_stop_s = a3.end_s - 3.5;  // silent 3.5 s until the kill
  AttemptRecord a4 = attempt(4, a3.end_s + 0.5, AttemptEnd::Completed, 5, 6, 20);
  GoodputInput in;
  in.attempts = {a1, a2, a3, a4};
  in.end_s = a4.end_s + 0.01;
  const json r = goodput_report(in);
  expect_adds_up(r);
  const json& f = r["failures"];
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0]["recomputed_steps"], json::array({6, 7, 8, 9, 10, 11, 12}));
  EXPECT_NEAR(f[0]["restart_s"].get<double>(), 0.5 + 2.9, 1e-9);  // gap + attempt 2's setup
  EXPECT_EQ(f[1]["recomputed_steps"], json::array());
  EXPECT_NEAR(f[1]["detection_s"].get<double>(), 0.1, 1e-9);
  EXPECT_NEAR(f[1]["restart_s"].get<double>(), 0.5 + 1, 1e-9);
  EXPECT_EQ(f[2]["kind"], "hang");
  EXPECT_NEAR(f[2]["detection_s"].get<double>(), 3.5, 1e-9);
  EXPECT_NEAR(f[2]["other_s"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(f[2]["recomputed_steps"], json::array({6, 7, 8}));
  EXPECT_NEAR(r["productive_s"].get<double>(), 20, 1e-9);
  EXPECT_EQ(r["steps_kept"], 20);
  EXPECT_EQ(r["steps_recomputed"], 10);
  EXPECT_EQ(r["restarts"], 3);
}

TEST(Goodput, RollbackRepeatsAndSkippedStepsAreLostToAnomalies) {
  // Steps 1-3, 4 and 5 skipped (anomalies), rollback after 5 to 3 (0.4 s), then 4-6 again.
  std::string text = start_line(1, 0, 1) + step_line(1, 1, 1, 0) + step_line(1, 2, 1, 0) +
                     step_line(1, 3, 1, 0) + step_line(1, 4, 1, 0, true) +
                     step_line(1, 5, 1, 0, true) +
                     R"({"event":"rollback","attempt":1,"step":5,"to_step":3,"windows":[4,5],)"
                     R"("seconds":0.4})"
                     "\n" +
                     step_line(1, 4, 1, 0) + step_line(1, 5, 1, 0) + step_line(1, 6, 1, 0.2, true);
  GoodputInput in;
  AttemptRecord a;
  a.launch_s = 0;
  a.end_s = 1 + 8 + 0.2 + 0.4 + 0.3;  // setup, 8 steps, 6's after_s, rollback, the rest
  a.end = AttemptEnd::Completed;
  a.events = parse_events(text);
  in.attempts = {a};
  in.end_s = a.end_s;
  const json r = goodput_report(in);
  expect_adds_up(r);
  EXPECT_NEAR(r["productive_s"].get<double>(), 5, 1e-12);           // 1-5 kept
  EXPECT_NEAR(r["anomaly_s"].get<double>(), 2 + 0.4 + 1.2, 1e-12);  // 4,5 undone; rollback; 6
  EXPECT_EQ(r["steps_rolled_back"], 2);
  EXPECT_EQ(r["steps_skipped"], 1);
  EXPECT_EQ(r["steps_kept"], 5);
  EXPECT_NEAR(r["overhead"]["shutdown_s"].get<double>(), 0.3, 1e-12);
  EXPECT_EQ(r["rollbacks"].size(), 1u);
}

TEST(Goodput, JobDurationsLongerThanTheAttemptAreScaledToFit) {
  AttemptRecord a = attempt(1, 0, AttemptEnd::Completed, 0, 1, 4);
  a.end_s = 5;  // the events claim 7 s
  GoodputInput in;
  in.attempts = {a};
  in.end_s = 5;
  const json r = goodput_report(in);
  expect_adds_up(r);
  EXPECT_NEAR(r["attempts"][0]["clock_scale"].get<double>(), 5.0 / 7.0, 1e-12);
  EXPECT_NEAR(r["productive_s"].get<double>(), 4 * 5.0 / 7.0, 1e-12);
  EXPECT_NEAR(r["overhead"]["shutdown_s"].get<double>(), 0, 1e-12);
}

TEST(Goodput, NoAttemptsIsAllBeforeLaunch) {
  GoodputInput in;
  in.end_s = 2;
  in.outcome = JobOutcome::Stopped;
  const json r = goodput_report(in);
  expect_adds_up(r);
  EXPECT_EQ(r["overhead"]["before_launch_s"], 2.0);
  EXPECT_EQ(r["restarts"], 0);
}

TEST(Goodput, StoppedAttemptIsListedAndKeepsItsSteps) {
  AttemptRecord a = attempt(1, 0, AttemptEnd::Stopped, 0, 1, 3, 1, 0.7);
  GoodputInput in;
  in.attempts = {a};
  in.end_s = a.end_s + 0.1;
  in.outcome = JobOutcome::Stopped;
  const json r = goodput_report(in);
  expect_adds_up(r);
  ASSERT_EQ(r["failures"].size(), 1u);
  EXPECT_EQ(r["failures"][0]["kind"], "stopped");
  EXPECT_NEAR(r["failures"][0]["other_s"].get<double>(), 0.7, 1e-12);
  EXPECT_NEAR(r["productive_s"].get<double>(), 3, 1e-12);
}

TEST(Goodput, SummaryNamesTheFailuresAndFaults) {
  AttemptRecord a1 = attempt(1, 0, AttemptEnd::Crashed, 0, 1, 4);
  a1.cause = "signal SIGKILL: rank 0 died";
  AttemptRecord a2 = attempt(2, a1.end_s + 1, AttemptEnd::Completed, 2, 3, 6);
  GoodputInput in;
  in.attempts = {a1, a2};
  in.end_s = a2.end_s;
  in.outcome = JobOutcome::Completed;
  in.faults = {{"kill@step:4", 0, 1}};
  const std::string s = goodput_summary(goodput_report(in));
  EXPECT_NE(s.find("supervise: goodput: completed; wall"), std::string::npos) << s;
  EXPECT_NE(s.find("2 attempt(s), 1 restart(s); steps kept 6, recomputed 2"), std::string::npos)
      << s;
  EXPECT_NE(s.find("attempt 1 crash (signal SIGKILL)"), std::string::npos) << s;
  EXPECT_NE(s.find("(steps 3-4)"), std::string::npos) << s;
  EXPECT_NE(s.find("fault fired: kill@step:4 (rank 0, attempt 1)"), std::string::npos) << s;
}
