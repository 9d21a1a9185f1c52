// Muon's Newton–Schulz (5 steps, f32): the symmetric rank-k path against the same iteration with
// plain GEMMs, on a few shapes; prints the time of each and the speed ratio (system.md §4 target:
// symmetric ≥ 1.3x). usage: bench_muon [reps=5] [big=0: also the ZAYA1-like expert 4096x2048]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/rng.h"
#include "ops/ops.h"

using namespace zaya;

namespace {

double best_seconds(int reps, const Tensor& out, const Tensor& g, bool symmetric) {
  ops::newton_schulz(out, g, 5, symmetric);  // warm-up (BLAS threads, page faults)
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = omp_get_wtime();
    ops::newton_schulz(out, g, 5, symmetric);
    best = std::min(best, omp_get_wtime() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const bool big = argc > 2 && std::atoi(argv[2]) != 0;
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1024, 1024}, {2048, 512}, {512, 2048}};
  if (big) shapes.push_back({4096, 2048});
  std::printf("newton_schulz f32, 5 steps, threads=%d, best of %d\n", omp_get_max_threads(), reps);
  double worst_ratio = 1e30;
  for (auto [rows, cols] : shapes) {
    std::vector<float> g(size_t(rows * cols)), out(g.size());
    CounterRng rng{7, 0};
    for (size_t i = 0; i < g.size(); ++i) g[i] = float(rng.normal(i));
    Tensor tg(g.data(), {rows, cols}), to(out.data(), {rows, cols});
    const double plain = best_seconds(reps, to, tg, false);
    const double sym = best_seconds(reps, to, tg, true);
    worst_ratio = std::min(worst_ratio, plain / sym);
    std::printf("%5lld x %-5lld plain %8.2f ms  symmetric %8.2f ms  ratio %.2fx\n", (long long)rows,
                (long long)cols, plain * 1e3, sym * 1e3, plain / sym);
  }
  std::printf("worst ratio %.2fx (target >= 1.3x)\n", worst_ratio);
  return 0;
}
