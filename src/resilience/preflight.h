// Pre-flight health check of a job's ranks: `zaya preflight`, which `zaya supervise --preflight`
// runs through the job's launcher before the job. Every rank measures and checks itself; every
// rank then receives every rank's figures (all_gather) and judges them alike, so all ranks reach
// the same verdict (and exit code) without a further round.
//
// sgemm: C = A·B (f32, n = 512, OpenBLAS with all OpenMP threads). A and B hold small integers
//   (|a| <= 8), so every partial sum is an integer below 2^24 and the float product is exact
//   whatever the blocking, FMA use or summation order. Rate: 2n³ FLOPs per product, over the
//   products of about `seconds` after one untimed warm-up product. The last product is checked
//   completely and exactly by Freivalds' test, C·x = A·(B·x) in double for a fixed vector x of
//   nonzero small integers (every value an integer below 2^53): a wrong or non-finite entry makes
//   its row differ. sgemm_wrong = rows that differ.
// collectives (the data and checks of perf/comm.h, exact in every dtype): an all_reduce (sum) of
//   `allreduce_bytes` of f32, timed — allreduce_gbs = S / this rank's mean seconds per call
//   (algbw) — and an all_gather of 64 KiB of i32; each rank counts the elements of its own result
//   that differ from the known answer.
// Verdict (judge): a rank is bad when any check found a wrong element, or, with 2 or more ranks,
//   when its sgemm rate is below min_ratio × the median rate over the ranks (an even count: the
//   mean of the middle two). One rank can only fail the checks.
//
// The injected fault (resilience/faults.h preflight_fault) comes in as an Injection from the
// caller (cli/preflight.cpp): a sleep inside the timed products, a NaN in the product before its
// check.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dist/group.h"

namespace zaya::preflight {

struct Options {
  double seconds = 0.3;                        // of timed sgemm products
  double min_ratio = 0.5;                      // of the median sgemm rate, in (0, 1]
  int64_t allreduce_bytes = int64_t(2) << 20;  // of the timed all_reduce
};
// Throws zaya::Error naming the bad option.
void validate(const Options& opt);

struct Injection {
  double slow_seconds = 0;  // slept inside the timed region
  bool nan = false;         // one entry of the product becomes NaN before the check
};

constexpr int kSgemmN = 512;

struct SgemmResult {
  double gflops = 0;
  int64_t wrong_rows = 0;
};
// This process's checked sgemm (no collectives).
SgemmResult checked_sgemm(double seconds, const Injection& inj, int n = kSgemmN);

struct RankFigures {
  int rank = 0;
  std::string host;
  double sgemm_gflops = 0;
  int64_t sgemm_wrong = 0;      // rows of the checked product that differ
  int64_t allreduce_wrong = 0;  // elements of this rank's all_reduce result that differ
  int64_t allgather_wrong = 0;  // elements of this rank's all_gather result that differ
  double allreduce_gbs = 0;     // algbw by this rank's clock
};

// This rank's figures (a collective: every rank of `group` calls it with the same options).
RankFigures measure_rank(dist::Group& group, const Options& opt, const Injection& inj);
// Every rank's figures, in rank order, on every rank (a collective: F64 and I32 all_gathers; the
// hostname travels as I32 words, cut at 255 bytes).
std::vector<RankFigures> gather_figures(dist::Group& group, const RankFigures& mine);

struct Verdict {
  double median_gflops = 0;
  std::vector<double> ratio;          // per rank: sgemm rate / median
  std::vector<std::string> problems;  // one line per bad rank: "rank R (host H): why[; why]"
  bool ok() const { return problems.empty(); }
};
Verdict judge(const std::vector<RankFigures>& ranks, double min_ratio);

}  // namespace zaya::preflight
