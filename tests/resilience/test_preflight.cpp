// The library side of `zaya preflight` (resilience/preflight.h): the checked sgemm finds a poisoned
// entry anywhere in the product, the verdict's median / ratio / refusal lines, option checks, and
// one whole measure + gather on the single group.
#include "resilience/preflight.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "test_util.h"

using namespace zaya;
using namespace zaya::preflight;

namespace {

RankFigures figures(int rank, double gflops, const std::string& host = "h") {
  RankFigures f;
  f.rank = rank, f.host = host, f.sgemm_gflops = gflops;
  return f;
}

}  // namespace

TEST(PreflightSgemm, ExactProductPassesAndAPoisonedEntryIsFound) {
  const SgemmResult good = checked_sgemm(0.01, {}, 96);
  EXPECT_EQ(good.wrong_rows, 0);
  EXPECT_GT(good.gflops, 0);
  const SgemmResult bad = checked_sgemm(0.01, {0, true}, 96);
  EXPECT_EQ(bad.wrong_rows, 1);
}

TEST(PreflightSgemm, ASleepInsideTheTimedRegionLowersTheRate) {
  // One product of 64³ takes microseconds; with 0.2 s slept the rate is bounded by 2·64³/0.2 s.
  const SgemmResult slow = checked_sgemm(0.01, {0.2, false}, 64);
  EXPECT_LT(slow.gflops, 2.0 * 64 * 64 * 64 / 0.2 / 1e9 * 1.01);
  EXPECT_EQ(slow.wrong_rows, 0);
}

TEST(PreflightJudge, MedianRatiosAndTheSlowRank) {
  const Verdict v = judge({figures(0, 50), figures(1, 2.1, "node7"), figures(2, 52)}, 0.5);
  EXPECT_DOUBLE_EQ(v.median_gflops, 50);
  ASSERT_EQ(v.ratio.size(), 3u);
  EXPECT_DOUBLE_EQ(v.ratio[1], 2.1 / 50);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0],
            "rank 1 (host node7): sgemm 2.1 GFLOP/s is 0.042x the median 50.0 (limit 0.5x)");
  EXPECT_FALSE(v.ok());
}

TEST(PreflightJudge, EvenCountTakesTheMeanOfTheMiddleTwo) {
  const std::vector<RankFigures> four = {figures(0, 10), figures(1, 30), figures(2, 20),
                                         figures(3, 40)};
  const Verdict v = judge(four, 0.5);
  EXPECT_DOUBLE_EQ(v.median_gflops, 25);
  ASSERT_EQ(v.problems.size(), 1u);  // 10 is 0.4x of 25
  EXPECT_EQ(v.problems[0],
            "rank 0 (host h): sgemm 10.0 GFLOP/s is 0.4x the median 25.0 (limit 0.5x)");
  EXPECT_TRUE(judge(four, 0.39).ok());
}

TEST(PreflightJudge, OneRankIsRefusedOnlyForWrongResults) {
  EXPECT_TRUE(judge({figures(0, 0.001)}, 1.0).ok());
  RankFigures f = figures(0, 10);
  f.sgemm_wrong = 3, f.allgather_wrong = 5;
  const Verdict v = judge({f}, 0.5);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0],
            "rank 0 (host h): sgemm gave a wrong result (3 of 512 rows differ from the exact "
            "product); all_gather gave a wrong result (5 elements)");
}

TEST(PreflightJudge, EveryBadRankHasItsLine) {
  RankFigures bad = figures(1, 40);
  bad.allreduce_wrong = 7;
  const Verdict v = judge({figures(0, 40), bad, figures(2, 1)}, 0.5);
  ASSERT_EQ(v.problems.size(), 2u);
  EXPECT_EQ(v.problems[0], "rank 1 (host h): all_reduce gave a wrong result (7 elements)");
  EXPECT_EQ(v.problems[1],
            "rank 2 (host h): sgemm 1.0 GFLOP/s is 0.025x the median 40.0 (limit 0.5x)");
}

TEST(PreflightOptions, BadValuesAreUserErrors) {
  Options o;
  validate(o);
  o.min_ratio = 1.5;
  test::expect_error([&] { validate(o); }, {"--min-ratio must be in (0, 1]", "1.5"});
  o = {}, o.seconds = 0;
  test::expect_error([&] { validate(o); }, {"--seconds must be in (0, 60]"});
  o = {}, o.allreduce_bytes = 2;
  test::expect_error([&] { validate(o); }, {"--bytes must be 4 bytes"});
}

TEST(PreflightSingleGroup, MeasureAndGatherOneRank) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) unsetenv(v);
  auto g = dist::make_group("single");
  Options o;
  o.seconds = 0.02, o.allreduce_bytes = 64 << 10;
  const RankFigures mine = measure_rank(*g, o, {});
  EXPECT_EQ(mine.sgemm_wrong + mine.allreduce_wrong + mine.allgather_wrong, 0);
  EXPECT_GT(mine.sgemm_gflops, 0);
  EXPECT_GT(mine.allreduce_gbs, 0);
  EXPECT_FALSE(mine.host.empty());
  const std::vector<RankFigures> all = gather_figures(*g, mine);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].host, mine.host);
  EXPECT_EQ(all[0].sgemm_gflops, mine.sgemm_gflops);
  EXPECT_TRUE(judge(all, 0.5).ok());
}
