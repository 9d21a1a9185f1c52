// The hang detector's pure logic (resilience/hang_detector.h): heartbeat parsing (torn records),
// the per-section and computed timeouts, the localisation rule (fewest collectives, then lowest
// step, then earliest section), done ranks, ranks without a heartbeat file, the verdict's line.
#include <gtest/gtest.h>

#include "resilience/hang_detector.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya;
using heartbeat::Section;
using zaya::test::error_of;
using zaya::test::expect_contains;

namespace {

RankState rank_at(int rank, Section s, int64_t step, int64_t collectives, double changed_at,
                  const char* detail = "", double max_step_s = 0.1) {
  RankState r;
  r.rank = rank;
  r.seen = true;
  r.changed_at = changed_at;
  r.record.rank = rank;
  r.record.world = 2;
  r.record.host = "host" + std::to_string(rank);
  r.record.section = s;
  r.record.detail = detail;
  r.record.step = step;
  r.record.last_step = max_step_s > 0 ? step - 1 : 0;
  r.record.collectives = collectives;
  r.record.max_step_s = max_step_s;
  return r;
}

HangTimeouts tight() {
  HangTimeouts t;
  t.floor = 3;
  t.factor = 10;
  return t;
}

}  // namespace

TEST(HangDetector, ParsesAPaddedRecordAndRejectsTornOnes) {
  std::string line =
      R"({"attempt":2,"rank":1,"world":2,"host":"vm1","pid":1234,"seq":42,"step":7,)"
      R"("last_step":6,"section":"collective","detail":"all_reduce","collectives":311,)"
      R"("max_step_s":0.12,"max_eval_s":0.5,"max_checkpoint_s":0.0,"time":1700000000.123})";
  std::string padded = line + std::string(511 - line.size(), ' ') + "\n";
  auto r = parse_heartbeat(padded);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->attempt, 2);
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->host, "vm1");
  EXPECT_EQ(r->seq, 42);
  EXPECT_EQ(r->step, 7);
  EXPECT_EQ(r->section, Section::Collective);
  EXPECT_EQ(r->detail, "all_reduce");
  EXPECT_EQ(r->collectives, 311);
  EXPECT_DOUBLE_EQ(r->max_step_s, 0.12);
  EXPECT_FALSE(parse_heartbeat(line.substr(0, 100)).has_value());  // torn
  EXPECT_FALSE(parse_heartbeat("").has_value());
  std::string bad_section = line;
  bad_section.replace(bad_section.find("collective\""), 10, "frobnicate");
  EXPECT_FALSE(parse_heartbeat(bad_section).has_value());
}

TEST(HangDetector, ComputedTimeouts) {
  HangTimeouts t;
  EXPECT_EQ(section_timeout(t, Section::Setup, 0), 600);
  EXPECT_EQ(section_timeout(t, Section::Checkpoint, 5), 600);
  EXPECT_EQ(section_timeout(t, Section::Eval, 5), 600);
  EXPECT_EQ(section_timeout(t, Section::ForwardBackward, 0), 600);   // no step completed yet
  EXPECT_EQ(section_timeout(t, Section::ForwardBackward, 0.5), 60);  // the floor
  EXPECT_EQ(section_timeout(t, Section::Collective, 20), 200);       // 10 × the slowest step
  set_timeout(t, "step=7");
  for (Section s :
       {Section::Data, Section::ForwardBackward, Section::Collective, Section::Optimizer})
    EXPECT_EQ(section_timeout(t, s, 20), 7);
  set_timeout(t, "collective=auto");
  EXPECT_EQ(section_timeout(t, Section::Collective, 20), 200);
  set_timeout(t, "checkpoint=30.5");
  EXPECT_EQ(section_timeout(t, Section::Checkpoint, 0), 30.5);
}

TEST(HangDetector, BadTimeoutsAreErrors) {
  HangTimeouts t;
  expect_contains(error_of([&] { set_timeout(t, "fwd=3"); }), "unknown section 'fwd'");
  expect_contains(error_of([&] { set_timeout(t, "setup"); }), "expected SECTION=SECONDS");
  expect_contains(error_of([&] { set_timeout(t, "setup=-1"); }), "not a number of seconds > 0");
  expect_contains(error_of([&] { set_timeout(t, "setup=3x"); }), "not a number of seconds > 0");
  expect_contains(error_of([&] { set_timeout(t, "setup=auto"); }), "'auto' is for the in-step");
  expect_contains(error_of([&] { set_timeout(t, "done=5"); }), "unknown section 'done'");
}

TEST(HangDetector, HealthyWhileWithinTimeouts) {
  const std::vector<RankState> ranks = {rank_at(0, Section::Collective, 5, 10, 100.0, "all_reduce"),
                                        rank_at(1, Section::ForwardBackward, 5, 9, 100.0)};
  EXPECT_FALSE(detect_hang(ranks, 102.9, tight()).hung);
  EXPECT_TRUE(detect_hang(ranks, 103.1, tight()).hung);
}

TEST(HangDetector, NamesTheRankTheOthersWaitFor) {
  // Rank 1 hangs in forward-backward; rank 0 waits for it in the all_reduce (one more collective).
  const std::vector<RankState> ranks = {rank_at(0, Section::Collective, 5, 10, 100.5, "all_reduce"),
                                        rank_at(1, Section::ForwardBackward, 5, 9, 100.0)};
  const HangVerdict v = detect_hang(ranks, 103.2, tight());
  ASSERT_TRUE(v.hung);
  ASSERT_EQ(v.at_fault.size(), 1u);
  EXPECT_EQ(v.at_fault[0].rank, 1);
  EXPECT_EQ(v.at_fault[0].host, "host1");
  EXPECT_EQ(v.at_fault[0].section, Section::ForwardBackward);
  EXPECT_EQ(v.at_fault[0].step, 5);
  EXPECT_NEAR(v.at_fault[0].silence_s, 3.2, 1e-9);
  EXPECT_EQ(v.at_fault[0].timeout_s, 3);
  ASSERT_EQ(v.waiting.size(), 1u);
  EXPECT_EQ(v.waiting[0].rank, 0);
  EXPECT_FALSE(v.same_point);
  EXPECT_EQ(v.message,
            "rank 1 on host host1 silent 3.2 s in forward-backward of step 5 (timeout 3.0 s); "
            "rank 0 waits in collective all_reduce");
}

TEST(HangDetector, WaitingRankPastItsTimeoutIsNotAHangWhileItsPeerIsWithinItsOwn) {
  // Rank 1 writes a long checkpoint (600 s timeout); rank 0 waits in a barrier past the computed
  // in-step timeout: the job is busy, not hung.
  const std::vector<RankState> ranks = {rank_at(0, Section::Collective, 5, 12, 100.0, "barrier"),
                                        rank_at(1, Section::Checkpoint, 5, 11, 100.0)};
  EXPECT_FALSE(detect_hang(ranks, 150, tight()).hung);
  const HangVerdict v = detect_hang(ranks, 701, tight());
  ASSERT_TRUE(v.hung);
  EXPECT_EQ(v.at_fault[0].rank, 1);
  EXPECT_EQ(v.at_fault[0].section, Section::Checkpoint);
}

TEST(HangDetector, TiesBreakOnStepThenSection) {
  // Same collectives: the lower step is at fault; same step too: the earlier section.
  std::vector<RankState> ranks = {rank_at(0, Section::Optimizer, 6, 9, 0),
                                  rank_at(1, Section::Data, 5, 9, 0)};
  HangVerdict v = detect_hang(ranks, 10, tight());
  ASSERT_TRUE(v.hung);
  ASSERT_EQ(v.at_fault.size(), 1u);
  EXPECT_EQ(v.at_fault[0].rank, 1);
  ranks = {rank_at(0, Section::Optimizer, 5, 9, 0), rank_at(1, Section::Data, 5, 9, 0),
           rank_at(2, Section::Data, 5, 9, 0)};
  v = detect_hang(ranks, 10, tight());
  ASSERT_EQ(v.at_fault.size(), 2u);
  EXPECT_EQ(v.at_fault[0].rank, 1);
  EXPECT_EQ(v.at_fault[1].rank, 2);
  ASSERT_EQ(v.waiting.size(), 1u);
  EXPECT_EQ(v.waiting[0].rank, 0);
}

TEST(HangDetector, EveryRankAtTheSamePointIsInsideTheCollective) {
  const std::vector<RankState> ranks = {rank_at(0, Section::Collective, 5, 10, 0, "all_reduce"),
                                        rank_at(1, Section::Collective, 5, 10, 0, "all_reduce")};
  const HangVerdict v = detect_hang(ranks, 10, tight());
  ASSERT_TRUE(v.hung);
  EXPECT_TRUE(v.same_point);
  EXPECT_EQ(v.at_fault.size(), 2u);
  EXPECT_TRUE(v.waiting.empty());
  expect_contains(v.message, "the fault is inside the collective (or the network)");
}

TEST(HangDetector, DoneRanksAreNeverHung) {
  std::vector<RankState> ranks = {rank_at(0, Section::Done, 20, 50, 0),
                                  rank_at(1, Section::Done, 20, 50, 0)};
  EXPECT_FALSE(detect_hang(ranks, 1e6, tight()).hung);
  // A done rank is not the one the others wait for, even with fewer collectives.
  ranks = {rank_at(0, Section::Done, 20, 40, 0), rank_at(1, Section::Collective, 20, 50, 0)};
  const HangVerdict v = detect_hang(ranks, 10, tight());
  ASSERT_TRUE(v.hung);
  ASSERT_EQ(v.at_fault.size(), 1u);
  EXPECT_EQ(v.at_fault[0].rank, 1);
}

TEST(HangDetector, RankWithoutAFileIsInSetup) {
  RankState missing;
  missing.rank = 1;
  missing.changed_at = 0;  // the launch
  std::vector<RankState> ranks = {rank_at(0, Section::Collective, 0, 1, 0, "barrier", 0), missing};
  EXPECT_FALSE(detect_hang(ranks, 599, tight()).hung);  // setup: 600 s
  const HangVerdict v = detect_hang(ranks, 601, tight());
  ASSERT_TRUE(v.hung);
  ASSERT_EQ(v.at_fault.size(), 1u);
  EXPECT_EQ(v.at_fault[0].rank, 1);
  EXPECT_FALSE(v.at_fault[0].seen);
  EXPECT_EQ(v.at_fault[0].section, Section::Setup);
  expect_contains(v.message, "rank 1 (no heartbeat yet) silent 601.0 s in setup (timeout 600.0 s)");
  HangTimeouts t = tight();
  set_timeout(t, "setup=5");
  EXPECT_TRUE(detect_hang(ranks, 6, t).hung);
}

TEST(HangDetector, InStepTimeoutIsTheSetupOneBeforeAnyStep) {
  // No step has completed (max_step_s 0): the in-step sections get 600 s, not the floor.
  const std::vector<RankState> ranks = {rank_at(0, Section::ForwardBackward, 1, 0, 0, "", 0)};
  EXPECT_FALSE(detect_hang(ranks, 100, tight()).hung);
  EXPECT_TRUE(detect_hang(ranks, 601, tight()).hung);
  // Once any rank has a step time, every rank's in-step timeout is computed from the slowest.
  std::vector<RankState> two = {rank_at(0, Section::ForwardBackward, 2, 0, 0, "", 0),
                                rank_at(1, Section::Collective, 2, 1, 0, "all_reduce", 0.5)};
  const HangVerdict v = detect_hang(two, 5.1, tight());
  ASSERT_TRUE(v.hung);
  EXPECT_EQ(v.at_fault[0].rank, 0);
  EXPECT_EQ(v.at_fault[0].timeout_s, 5);  // 10 × 0.5 s
}
