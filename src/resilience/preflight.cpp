// Pre-flight checks (preflight.h): the checked sgemm, the checked collectives, the exchange of
// every rank's figures, and the verdict.
#include "resilience/preflight.h"
#include "core/stats.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "perf/comm.h"
#include "core/assert.h"
#include "core/stats.h"
#include "core/timer.h"

namespace zaya::preflight {

void validate(const Options& opt) {
  ZAYA_CHECK_INPUT(opt.seconds > 0 && opt.seconds <= 60,
                   "preflight: --seconds must be in (0, 60], got {}", opt.seconds);
  ZAYA_CHECK_INPUT(opt.min_ratio > 0 && opt.min_ratio <= 1,
                   "preflight: --min-ratio must be in (0, 1], got {}", opt.min_ratio);
  ZAYA_CHECK_INPUT(opt.allreduce_bytes >= 4 && opt.allreduce_bytes <= (int64_t(256) << 20),
                   "preflight: --bytes must be 4 bytes (one f32) to 256M, got {}",
                   opt.allreduce_bytes);
}

namespace {

// A small integer in [-8, 8], pseudo-random in (i, j) and different for each `salt`.
float small_int(int i, int j, uint32_t salt) {
  uint32_t h = uint32_t(i) * 2654435761u ^ (uint32_t(j) + salt) * 2246822519u;
  h ^= h >> 15;
  h *= 2654435761u;
  return float(int((h >> 8) % 17) - 8);
}

// Rows i where (C·x)_i != (A·(B·x))_i, x_j = 1 + j % 7, all in double (exact: integers < 2^53).
int64_t freivalds_wrong_rows(int n, const float* a, const float* b, const float* c) {
  std::vector<double> x(n), bx(n, 0.0);
  for (int j = 0; j < n; ++j) x[j] = 1 + j % 7;
  for (int k = 0; k < n; ++k)
    for (int j = 0; j < n; ++j) bx[k] += double(b[size_t(k) * n + j]) * x[j];
  int64_t wrong = 0;
  for (int i = 0; i < n; ++i) {
    double abx = 0, cx = 0;
    for (int k = 0; k < n; ++k) abx += double(a[size_t(i) * n + k]) * bx[k];
    for (int j = 0; j < n; ++j) cx += double(c[size_t(i) * n + j]) * x[j];
    wrong += !(cx == abx);  // NaN compares unequal
  }
  return wrong;
}

// 1234.5 → "1234.5", 0.0123 → "0.0123": one decimal, or three significant digits below 1.
std::string figure(double x) {
  return std::abs(x) >= 1 ? fmt::format("{:.1f}", x) : fmt::format("{:.3g}", x);
}

}  // namespace

SgemmResult checked_sgemm(double seconds, const Injection& inj, int n) {
  const size_t size = size_t(n) * size_t(n);
  std::vector<float> a(size), b(size), c(size, 0.0f);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      a[size_t(i) * n + j] = small_int(i, j, 1);
      b[size_t(i) * n + j] = small_int(i, j, 2);
    }
  auto product = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  };
  product();  // warm-up: thread pool, caches, page faults
  const Timer clock;
  int64_t reps = 0;
  double elapsed = 0;
  do {
    product();
    if (++reps == 1 && inj.slow_seconds > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(inj.slow_seconds));
    elapsed = clock.seconds();
  } while (elapsed < seconds);
  SgemmResult r;
  r.gflops = double(reps) * 2.0 * n * double(n) * n / elapsed / 1e9;
  if (inj.nan) c[size_t(n / 2) * n + n / 3] = NAN;
  r.wrong_rows = freivalds_wrong_rows(n, a.data(), b.data(), c.data());
  return r;
}

RankFigures measure_rank(dist::Group& group, const Options& opt, const Injection& inj) {
  RankFigures f;
  f.rank = group.rank();
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) f.host = name;
  if (f.host.empty()) f.host = "?";

  group.barrier();  // the ranks measure at the same time, sharing the machine alike
  const SgemmResult s = checked_sgemm(opt.seconds, inj);
  f.sgemm_gflops = s.gflops;
  f.sgemm_wrong = s.wrong_rows;

  dist::CommBenchOptions c;
  c.iters = 10, c.warmup = 2, c.max_seconds = 0.2;
  const int64_t gather_bytes = 64 << 10;
  const size_t words = size_t(std::max(opt.allreduce_bytes, gather_bytes) + 7) / 8;
  std::vector<uint64_t> a(words), b(words);
  c.dtype = DType::F32;
  const dist::CommBenchRow ar = dist::bench_collective(group, dist::CommOp::AllReduce,
                                                       opt.allreduce_bytes, c, a.data(), b.data());
  f.allreduce_wrong = ar.wrong_here;
  f.allreduce_gbs = ar.time_us_here > 0 ? double(ar.bytes) / ar.time_us_here / 1e3 : 0;
  c.dtype = DType::I32, c.iters = 3, c.warmup = 1;
  const dist::CommBenchRow ag =
      dist::bench_collective(group, dist::CommOp::AllGather, gather_bytes, c, a.data(), b.data());
  f.allgather_wrong = ag.wrong_here;
  return f;
}

std::vector<RankFigures> gather_figures(dist::Group& group, const RankFigures& mine) {
  const int n = group.size();
  constexpr int kNums = 5, kHostWords = 64;
  double nums[kNums] = {mine.sgemm_gflops, double(mine.sgemm_wrong), double(mine.allreduce_wrong),
                        double(mine.allgather_wrong), mine.allreduce_gbs};
  std::vector<double> all_nums(size_t(n) * kNums);
  group.all_gather(Tensor(nums, {kNums}), Tensor(all_nums.data(), {int64_t(n) * kNums}));
  int32_t host[kHostWords] = {};
  std::memcpy(host, mine.host.data(), std::min<size_t>(mine.host.size(), sizeof host - 1));
  std::vector<int32_t> all_hosts(size_t(n) * kHostWords);
  group.all_gather(Tensor(host, {kHostWords}), Tensor(all_hosts.data(), {int64_t(n) * kHostWords}));

  std::vector<RankFigures> out(n);
  for (int r = 0; r < n; ++r) {
    const double* v = &all_nums[size_t(r) * kNums];
    RankFigures& f = out[r];
    f.rank = r;
    char text[sizeof host + 1] = {};
    std::memcpy(text, &all_hosts[size_t(r) * kHostWords], sizeof host);
    f.host = text;
    f.sgemm_gflops = v[0];
    f.sgemm_wrong = int64_t(v[1]), f.allreduce_wrong = int64_t(v[2]);
    f.allgather_wrong = int64_t(v[3]);
    f.allreduce_gbs = v[4];
  }
  return out;
}

Verdict judge(const std::vector<RankFigures>& ranks, double min_ratio) {
  Verdict v;
  const size_t n = ranks.size();
  if (n == 0) return v;
  std::vector<double> rates;
  for (const RankFigures& f : ranks) rates.push_back(f.sgemm_gflops);
  v.median_gflops = median(rates);
  for (const RankFigures& f : ranks) {
    const double ratio = v.median_gflops > 0 ? f.sgemm_gflops / v.median_gflops : 0;
    v.ratio.push_back(ratio);
    std::vector<std::string> why;
    if (n > 1 && !(ratio >= min_ratio))
      why.push_back(fmt::format("sgemm {} GFLOP/s is {}x the median {} (limit {}x)",
                                figure(f.sgemm_gflops), figure(ratio), figure(v.median_gflops),
                                min_ratio));
    if (f.sgemm_wrong)
      why.push_back(
          fmt::format("sgemm gave a wrong result ({} of {} rows differ from the exact "
                      "product)",
                      f.sgemm_wrong, kSgemmN));
    if (f.allreduce_wrong)
      why.push_back(fmt::format("all_reduce gave a wrong result ({} elements)", f.allreduce_wrong));
    if (f.allgather_wrong)
      why.push_back(fmt::format("all_gather gave a wrong result ({} elements)", f.allgather_wrong));
    if (why.empty()) continue;
    std::string line = fmt::format("rank {} (host {}): ", f.rank, f.host);
    for (size_t i = 0; i < why.size(); ++i) line += (i ? "; " : "") + why[i];
    v.problems.push_back(line);
  }
  return v;
}

}  // namespace zaya::preflight
