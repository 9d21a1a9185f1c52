// `mpirun -np 2 zaya preflight` (label mpi): two good ranks exit 0 with one table of two rows from
// rank 0; a rank made slow (slow@preflight) or wrong (nan@preflight) makes the whole job exit 1
// with a line naming that rank; a bad ZAYA_FAULT is the parse error. Skipped without mpirun.
// Timing margins: the good run allows a 5x spread between the two ranks' rates (they share two
// loaded cores); the slow rank sleeps 2 s inside a 0.3 s measurement (≈ 0.13x its own rate).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "integration/mpirun_job.h"

using namespace zaya::test;

namespace {

// `mpirun -np 2 [env ZAYA_FAULT=…] zaya preflight ARGS`.
Job preflight(const std::string& args, const std::string& fault = "") {
  const std::string program =
      (fault.empty() ? std::string() : "env " + shell_quote("ZAYA_FAULT=" + fault) + " ") +
      ZAYA_BINARY;
  return mpirun(2, program, "preflight " + args);
}

// The table's rows (first word: the rank).
std::vector<std::string> row_ranks(const std::string& out) {
  std::vector<std::string> ranks;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("preflight:", 0) == 0) continue;
    std::istringstream words(line);
    std::string w;
    words >> w;
    ranks.push_back(w);
  }
  return ranks;
}

TEST(PreflightMpirun, TwoGoodRanks) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = preflight("--seconds 0.2 --min-ratio 0.2");
  ASSERT_EQ(j.r.code, 0) << j.r.out << j.r.err;
  EXPECT_EQ(j.r.out.find("# zaya preflight: 2 ranks (mpi group)"), 0u) << j.r.out;
  EXPECT_EQ(j.r.out.find("# zaya preflight", 1), std::string::npos) << "rank 0 alone prints";
  EXPECT_EQ(row_ranks(j.r.out), (std::vector<std::string>{"0", "1"})) << j.r.out;
  EXPECT_NE(j.r.out.find("preflight: ok: 2 ranks"), std::string::npos) << j.r.out;
  EXPECT_EQ(j.r.out.find("WRONG"), std::string::npos) << j.r.out;
}

TEST(PreflightMpirun, SlowRankIsRefusedByName) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = preflight("", "slow@preflight:rank:1:seconds:2");
  EXPECT_EQ(j.r.code, 1) << j.r.out << j.r.err;
  EXPECT_FALSE(j.r.crashed);
  EXPECT_NE(j.r.err.find("preflight: rank 1 (host "), std::string::npos) << j.r.err;
  EXPECT_NE(j.r.err.find("x the median"), std::string::npos) << j.r.err;
  EXPECT_NE(j.r.err.find("(limit 0.5x)"), std::string::npos) << j.r.err;
  EXPECT_EQ(j.r.err.find("preflight: rank 0"), std::string::npos) << j.r.err;
  EXPECT_EQ(row_ranks(j.r.out).size(), 2u) << j.r.out;
  EXPECT_NE(j.r.out.find("preflight: refused: 1 of 2 ranks bad"), std::string::npos) << j.r.out;
}

TEST(PreflightMpirun, WrongResultIsRefusedByName) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = preflight("--seconds 0.1 --min-ratio 0.1", "nan@preflight:rank:1");
  EXPECT_EQ(j.r.code, 1) << j.r.out << j.r.err;
  EXPECT_NE(j.r.err.find("preflight: rank 1 (host "), std::string::npos) << j.r.err;
  EXPECT_NE(j.r.err.find("sgemm gave a wrong result"), std::string::npos) << j.r.err;
  EXPECT_EQ(j.r.err.find("preflight: rank 0"), std::string::npos) << j.r.err;
  EXPECT_NE(j.r.out.find("WRONG(1)"), std::string::npos) << j.r.out;
}

TEST(PreflightMpirun, BadFaultSpecIsTheParseError) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = preflight("", "slow@preflight:rank:one");
  EXPECT_EQ(j.r.code, 1) << j.r.out << j.r.err;
  EXPECT_NE(j.r.err.find("zaya: error: ZAYA_FAULT 'slow@preflight:rank:one': rank needs a number"),
            std::string::npos)
      << j.r.err;
  EXPECT_EQ(j.r.out.find("# zaya preflight"), std::string::npos) << j.r.out;
}

}  // namespace
