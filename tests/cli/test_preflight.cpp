// `zaya preflight` in one process (the single group): a good run prints one row and exits 0 (also
// as JSON); nan@preflight exits 1 naming rank 0 and the wrong result; with one rank a slow sgemm
// cannot refuse; bad flags and a bad ZAYA_FAULT are one "zaya: error:" line. Rates are not
// asserted, only that they are positive.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::CliResult;

// Runs `zaya preflight ARGS` with ZAYA_FAULT set to `fault` ("" = unset).
CliResult preflight(const std::string& args, const std::string& fault = "") {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) unsetenv(v);
  if (fault.empty())
    unsetenv("ZAYA_FAULT");
  else
    setenv("ZAYA_FAULT", fault.c_str(), 1);
  const test::ScratchDir dir;
  CliResult r = test::run_zaya_in(dir.path, "preflight " + args);
  unsetenv("ZAYA_FAULT");
  return r;
}

// The table's rows: the lines that are neither comments nor the verdict, split into words.
std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> table;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("preflight:", 0) == 0) continue;
    std::istringstream words(line);
    table.emplace_back();
    for (std::string w; words >> w;) table.back().push_back(w);
  }
  return table;
}

TEST(PreflightCli, GoodRunPrintsOneRowAndExitsZero) {
  const CliResult r = preflight("--seconds 0.05");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("# zaya preflight: 1 rank (single group)", 0), 0u) << r.out;
  const auto t = rows(r.out);
  ASSERT_EQ(t.size(), 1u) << r.out;
  ASSERT_EQ(t[0].size(), 7u) << r.out;  // rank host GFLOP/s ratio sgemm collective GB/s
  EXPECT_EQ(t[0][0], "0");
  EXPECT_GT(std::stod(t[0][2]), 0);
  EXPECT_EQ(t[0][3], "1.00");
  EXPECT_EQ(t[0][4], "ok");
  EXPECT_EQ(t[0][5], "ok");
  EXPECT_NE(r.out.find("preflight: ok: 1 rank, median sgemm"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(PreflightCli, JsonReport) {
  const CliResult r = preflight("--seconds 0.05 --json --bytes 64K");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("ok").get<bool>());
  EXPECT_EQ(j.at("ranks").get<int>(), 1);
  EXPECT_EQ(j.at("allreduce_bytes").get<int64_t>(), 64 << 10);
  ASSERT_EQ(j.at("rows").size(), 1u);
  const auto& row = j.at("rows")[0];
  EXPECT_EQ(row.at("sgemm_wrong_rows").get<int64_t>(), 0);
  EXPECT_GT(row.at("sgemm_gflops").get<double>(), 0);
  EXPECT_DOUBLE_EQ(j.at("median_sgemm_gflops").get<double>(), row.at("sgemm_gflops").get<double>());
  EXPECT_TRUE(j.at("problems").empty());
}

TEST(PreflightCli, NanFaultIsRefusedNamingTheRank) {
  const CliResult r = preflight("--seconds 0.05", "nan@preflight");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.err.find("zaya: fault injected on rank 0: nan@preflight"), std::string::npos);
  EXPECT_NE(r.err.find("preflight: rank 0 (host "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sgemm gave a wrong result (1 of 512 rows differ"), std::string::npos)
      << r.err;
  const auto t = rows(r.out);
  ASSERT_EQ(t.size(), 1u) << r.out;
  EXPECT_EQ(t[0][4], "WRONG(1)");
  EXPECT_NE(r.out.find("preflight: refused: 1 of 1 rank bad"), std::string::npos) << r.out;
}

TEST(PreflightCli, OneSlowRankAloneIsNotRefused) {
  // Nothing to compare with: the rate drops, the verdict stays ok. A fault for rank 1 never fires.
  const CliResult r =
      preflight("--seconds 0.05", "slow@preflight:seconds:0.3,nan@preflight:rank:1");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("fault injected on rank 0: slow@preflight:seconds:0.3"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("nan@preflight:rank:1"), std::string::npos) << r.err;
}

TEST(PreflightCli, BadFlagsAndFaultSpecs) {
  test::expect_user_error(preflight("--min-ratio 2"), "--min-ratio must be in (0, 1], got 2");
  test::expect_user_error(preflight("--min-ratio 0"), "--min-ratio: 0 is not a number > 0");
  test::expect_user_error(preflight("--seconds 0"), "--seconds: 0 is not a number > 0");
  test::expect_user_error(preflight("--bytes 1X"), "'1X' is not a size");
  test::expect_user_error(preflight("--bytes 2"), "--bytes must be 4 bytes");
  test::expect_user_error(preflight("--group nonsense"), "nonsense");
  test::expect_user_error(preflight("--frobnicate"), "--frobnicate");
  test::expect_user_error(preflight("--seconds 0.05", "nan@nowhere"), "ZAYA_FAULT 'nan@nowhere'");
  test::expect_user_error(preflight("--seconds 0.05", "kill@preflight"),
                          "ZAYA_FAULT 'kill@preflight'");
}

}  // namespace
}  // namespace zaya
