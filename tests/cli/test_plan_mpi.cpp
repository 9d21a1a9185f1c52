// `zaya plan`'s byte figures equal a real run's on 2 ranks (Muon, buckets of about 26 elements:
// several, started during the backward) and 3 ranks (AdamW, uneven shards, bf16 activations):
// the start-up memory line, the first step's ZeRO-1 collective line and the checkpoint
// manifest's sizes of every rank's optimizer shard (label mpi; skipped without mpirun).
#include <gtest/gtest.h>

#include "cli/plan_util.h"
#include "integration/mpirun_job.h"
#include "test_util.h"

namespace zaya {
namespace {

TEST(PlanMpi, ByteFiguresEqualATwoRankRun) {
  SKIP_WITHOUT_MPIRUN();
  const test::ScratchDir dir;
  test::expect_plan_matches_run(dir, "two", 2, {"optim.zero_bucket_mb=0.0001"});
}

TEST(PlanMpi, ByteFiguresEqualAThreeRankRun) {
  SKIP_WITHOUT_MPIRUN();
  const test::ScratchDir dir;
  test::expect_plan_matches_run(dir, "three", 3,
                                {"optim.use_muon=false", "train.activations=bf16"});
}

}  // namespace
}  // namespace zaya
