// Whole jobs under mpirun (label mpi): `zaya bench comm` at 2 and 4 ranks prints one table with
// correct rows and 0 wrong elements; and a rank that dies (SIGKILL), hangs or fails on its own
// ends the job non-zero, with a clear message, in bounded time
// (tests/integration/dist_fault_helper.cpp). Skipped where mpirun is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "integration/mpirun_job.h"
#include "test_util.h"

using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// The table's rows, each with the collective of the section it is in ("# all_reduce").
struct Row {
  std::string op;
  std::vector<std::string> cols;
};
std::vector<Row> table_rows(const std::string& out) {
  std::vector<Row> rows;
  std::string op;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    for (const char* name : {"all_reduce", "reduce_scatter", "all_gather", "broadcast"})
      if (line == std::string("# ") + name) op = name;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    Row row{op, {}};
    for (std::string w; words >> w;) row.cols.push_back(w);
    rows.push_back(row);
  }
  return rows;
}

void expect_good_bench(int ranks) {
  const Job j = mpirun(ranks, ZAYA_BINARY, "bench comm --max-bytes 1M --iters 3 --warmup 1");
  ASSERT_EQ(j.r.code, 0) << j.r.out << j.r.err;
  // Rank 0 alone prints: one header.
  EXPECT_EQ(j.r.out.find("# zaya bench comm: " + std::to_string(ranks) + " ranks (mpi group)"), 0u)
      << j.r.out;
  EXPECT_EQ(j.r.out.find("# zaya bench comm", 1), std::string::npos) << j.r.out;
  const auto rows = table_rows(j.r.out);
  // 18 sizes (8 B … 1 MiB) for each of 4 collectives, less the reduce_scatter/all_gather sizes
  // under one f32 per rank (8 B at 4 ranks).
  EXPECT_EQ(rows.size(), size_t(4 * 18 - (ranks == 4 ? 2 : 0))) << j.r.out;
  const double n = ranks;
  std::map<std::string, int> per_op;
  for (const auto& [op, row] : rows) {
    ASSERT_EQ(row.size(), 8u) << j.r.out;
    ++per_op[op];
    const double bytes = std::stod(row[0]), count = std::stod(row[1]);
    const double us = std::stod(row[4]), algbw = std::stod(row[5]), busbw = std::stod(row[6]);
    EXPECT_EQ(bytes, 4 * count);
    EXPECT_EQ(row[2], "f32");
    EXPECT_EQ(row[3], op == "all_reduce" || op == "reduce_scatter" ? "sum" : "none");
    EXPECT_EQ(row[7], "0") << "wrong elements in: " << j.r.out;
    EXPECT_GT(us, 0);
    if (algbw < 0.05) continue;  // printed to 3 decimals: too coarse to check a ratio
    EXPECT_NEAR(algbw, bytes / us / 1e3, 0.002 + 0.01 * algbw);
    const double factor = op == "all_reduce"  ? 2 * (n - 1) / n
                          : op == "broadcast" ? 1
                                              : (n - 1) / n;
    EXPECT_NEAR(busbw, algbw * factor, 0.002 + 0.01 * busbw) << op << " " << bytes;
  }
  EXPECT_EQ(per_op.size(), 4u) << j.r.out;
  EXPECT_NE(j.r.out.find("# wrong elements: 0"), std::string::npos) << j.r.out;
}

}  // namespace

TEST(BenchCommMpirun, TwoRanks) {
  SKIP_WITHOUT_MPIRUN();
  expect_good_bench(2);
}

TEST(BenchCommMpirun, FourRanks) {
  SKIP_WITHOUT_MPIRUN();
  expect_good_bench(4);
}

TEST(DistFaults, HealthyJobExitsZero) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = mpirun(3, ZAYA_DIST_FAULT_HELPER, "--mode ok");
  EXPECT_EQ(j.r.code, 0) << j.r.err;
  EXPECT_NE(j.r.out.find("ok: sum 9 over 3 ranks"), std::string::npos) << j.r.out;
}

// mpirun sees the rank die and stops the job: non-zero, its message names the rank and signal.
TEST(DistFaults, KilledRankEndsTheJobQuickly) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = mpirun(3, ZAYA_DIST_FAULT_HELPER, "--mode kill --victim 1 --timeout 300");
  EXPECT_NE(j.r.code, 0) << j.r.err;
  EXPECT_NE(j.r.err.find("rank 1"), std::string::npos) << j.r.err;
  EXPECT_NE(j.r.err.find("exited on signal 9 (Killed)"), std::string::npos) << j.r.err;
  EXPECT_LT(j.seconds, 60) << "survivors must not wait for their 300 s timeout";
}

// A hung rank: the others give up after their timeout with the one-line zaya error, and the
// job ends (mpirun stops the hung rank) — well before the hung rank's 10-minute sleep.
TEST(DistFaults, HungRankTimesOutWithAClearError) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = mpirun(3, ZAYA_DIST_FAULT_HELPER, "--mode hang --victim 2 --timeout 3");
  EXPECT_NE(j.r.code, 0) << j.r.err;
  EXPECT_NE(j.r.err.find("zaya: error: all_reduce: no answer from the other ranks within 3 s"),
            std::string::npos)
      << j.r.err;
  EXPECT_GE(j.seconds, 3);
  EXPECT_LT(j.seconds, 60) << j.r.err;
}

// A rank-local error: that rank exits at once (without waiting in MPI_Finalize for peers that
// are blocked in a collective), so the job ends long before the others' 300 s timeout.
TEST(DistFaults, RankLocalErrorEndsTheJobWithoutWaitingForTheTimeout) {
  SKIP_WITHOUT_MPIRUN();
  const Job j = mpirun(3, ZAYA_DIST_FAULT_HELPER, "--mode error --victim 1 --timeout 300");
  EXPECT_EQ(j.r.code, 1) << j.r.err;
  EXPECT_NE(j.r.err.find("zaya: error: rank 1: cannot open shard 'missing.bin'"), std::string::npos)
      << j.r.err;
  EXPECT_LT(j.seconds, 60) << j.r.err;
}
