// Muon's Newton–Schulz (5 steps, f32): the symmetric path (A = X·Xᵀ and A·A as symmetric products,
// upper-triangle tiles mirrored; the Gram-space iteration where n ≥ 1.5·m, ops/cpu/muon.cpp)
// against the same iteration with plain GEMMs, on a few shapes. Per shape: the best time of each
// (the two interleaved rep by rep, so that a busy machine slows both alike), their ratio (the
// target: symmetric ≥ 1.3x) and their agreement, the largest |symmetric − plain| over the output
// (tests/ops/cpu/test_muon.cpp asks ≤ 1e-5); then the worst ratio.
//
// usage: bench_muon [reps=7] [big=0: also the ZAYA1-like expert 4096x2048] [clock=wall|cpu]
//                   [shapes: "RxC,RxC,…" instead of the three]
// cpu: the process's CPU time instead of wall time, steadier on a busy machine for one thread
// (OMP_NUM_THREADS=1); with more threads it also counts OpenMP's spin-waiting.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/ops.h"

using namespace zaya;

namespace {

clockid_t clock_id = CLOCK_MONOTONIC;

double now() {
  timespec t;
  clock_gettime(clock_id, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double seconds(const Tensor& out, const Tensor& g, bool symmetric) {
  const double t0 = now();
  ops::newton_schulz(out, g, 5, symmetric);
  return now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const bool big = argc > 2 && std::atoi(argv[2]) != 0;
  const bool cpu = argc > 3 && std::string(argv[3]) == "cpu";
  if (cpu) clock_id = CLOCK_PROCESS_CPUTIME_ID;
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1024, 1024}, {2048, 512}, {512, 2048}};
  if (big) shapes.push_back({4096, 2048});
  if (argc > 4) {  // other shapes instead: "RxC,RxC,…"
    shapes.clear();
    for (const char* p = argv[4]; *p;) {
      char* end;
      const long long r = std::strtoll(p, &end, 10);
      const bool x = end != p && *end == 'x';
      const char* q = x ? end + 1 : end;
      const long long c = x ? std::strtoll(q, &end, 10) : 0;
      if (!x || end == q || r < 1 || c < 1 || (*end != ',' && *end != '\0')) {
        std::fprintf(stderr, "bench_muon: shapes must be RxC,RxC,… with R, C ≥ 1, got '%s'\n",
                     argv[4]);
        return 2;
      }
      shapes.push_back({r, c});
      p = *end ? end + 1 : end;
    }
  }
  std::printf("newton_schulz f32, 5 steps, threads=%d, best of %d (interleaved), %s time\n",
              omp_get_max_threads(), reps, cpu ? "process CPU" : "wall");
  double worst_ratio = 1e30, worst_diff = 0;
  for (auto [rows, cols] : shapes) {
    std::vector<float> g(size_t(rows * cols)), plain_out(g.size()), sym_out(g.size());
    CounterRng rng{7, 0};
    for (size_t i = 0; i < g.size(); ++i) g[i] = float(rng.normal(i));
    const Tensor tg(g.data(), {rows, cols}), tp(plain_out.data(), {rows, cols}),
        ts(sym_out.data(), {rows, cols});
    seconds(tp, tg, false), seconds(ts, tg, true);  // warm-up (threads, page faults)
    double plain = 1e30, sym = 1e30;
    for (int r = 0; r < reps; ++r) {
      plain = std::min(plain, seconds(tp, tg, false));
      sym = std::min(sym, seconds(ts, tg, true));
    }
    double diff = 0;
    for (size_t i = 0; i < g.size(); ++i)
      diff = std::max(diff, std::fabs(double(sym_out[i]) - double(plain_out[i])));
    worst_ratio = std::min(worst_ratio, plain / sym), worst_diff = std::max(worst_diff, diff);
    std::printf(
        "%5lld x %-5lld plain %8.2f ms  symmetric %8.2f ms  ratio %.2fx  max|sym-plain| %.1e\n",
        (long long)rows, (long long)cols, plain * 1e3, sym * 1e3, plain / sym, diff);
  }
  std::printf("worst ratio %.2fx (target >= 1.3x), worst max|sym-plain| %.1e (limit 1e-5)\n",
              worst_ratio, worst_diff);
  return 0;
}
