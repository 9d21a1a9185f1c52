// A slow rank under `mpirun -np 2 … zaya train` (label mpi; skipped without mpirun): rank 1 sleeps
// 0.3 s inside forward-backward for 5 steps (ZAYA_FAULT slow@…), so its compute time (outside
// collectives) is many times rank 0's while rank 0 only waits. After straggler_steps = 3 slow steps
// the log names rank 1 and its host (straggler_factor 3, far above the noise of 2 ranks on
// 2 shared cores), the metrics list it under "stragglers" with every rank's
// compute seconds, and rank 0 (which waited) is never named.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cli_util.h"
#include "test_skips.h"
#include "test_util.h"
#include "train/tiny_data.h"

namespace zaya {
namespace {

TEST(TrainStragglers, ASlowRankIsNamedInTheLogAndTheMetrics) {
  if (std::string(ZAYA_MPIRUN).empty()) ZAYA_SKIP(NoMpirun) << "at configure time";
  test::ScratchDir dir;
  const std::string shards = test::make_tiny_dataset(dir);
  test::write_tiny_toml(dir / "run.toml", shards,
                        "micro_batch = 2\nsteps = 10\nlog_every = 100\neval_batches = 1\n"
                        "straggler_steps = 3\nstraggler_factor = 3\nmetrics = \"" +
                            dir / "m.jsonl" + "\"\n",
                        "[checkpoint]\ndir = \"none\"\n");
  std::string faults;
  for (int s = 3; s <= 7; ++s)
    faults += (faults.empty() ? "" : ",") + std::string("slow@step:") + std::to_string(s) +
              ":rank:1:seconds:0.3";
  const std::string cmd =
      "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60 "
      "ZAYA_FAULT=" +
      faults + " " + ZAYA_MPIRUN + " " + ZAYA_MPIRUN_FLAGS +
      " -np 2 -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x ZAYA_DIST_TIMEOUT"
      " -x ZAYA_FAULT " +
      ZAYA_BINARY + " train --config " + dir / "run.toml" + " >" + dir / "log" + " 2>&1 </dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << test::slurp(dir / "log");
  const std::string log = test::slurp(dir / "log");
  EXPECT_NE(log.find("straggler: rank 1 ("), std::string::npos) << log;
  EXPECT_EQ(log.find("straggler: rank 0"), std::string::npos) << log;
  std::ifstream f(dir / "m.jsonl");
  int flagged = 0;
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    ASSERT_EQ(j.at("rank_compute_s").size(), 2u) << line;
    const int64_t step = j.at("step");
    if (step >= 3 && step <= 7) {
      EXPECT_GT(j["rank_compute_s"][1].get<double>(), 0.3) << line;
    }
    if (step >= 5 && step <= 7) {  // the third slow step in a row and on
      EXPECT_EQ(j.at("stragglers"), nlohmann::json::array({1})) << line;
    }
    if (j.at("stragglers") == nlohmann::json::array({1})) ++flagged;
    for (const nlohmann::json& r : j.at("stragglers")) EXPECT_EQ(r, 1) << line;
  }
  // Steps 5–7 at least; a loaded machine may stretch rank 1's streak by a step or two of noise.
  EXPECT_GE(flagged, 3);
  EXPECT_LE(flagged, 6);
}

}  // namespace
}  // namespace zaya
