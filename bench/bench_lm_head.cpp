// The fused tied LM head + cross-entropy (ops::lm_head_xent_*) against today's unfused path
// (linear_forward into an [N,V] buffer, xent_forward, xent_backward in place, linear_backward),
// forward + backward, interleaved, best of `reps`, on the step-bench and tiny-kjv shapes; also
// sgemm's rate on the logits product x·wᵀ measured in the same run. Prints each time, the
// unfused/fused ratio, GFLOP/s (6·N·D·V model FLOPs per forward + backward; the fused op does
// 8·N·D·V, recomputing the logits) and the largest differences between the two paths.
// usage: bench_lm_head [reps=5] [which=both|fused|unfused] [shape=all|step-bench|tiny-kjv]
// (one path on one shape alone: for its max RSS)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/ops.h"

using namespace zaya;

namespace {

struct Shape {
  const char* name;
  int64_t N, D, V;
};

struct Buffers {
  std::vector<float> x, w, dx, dw, loss, lse, logits;
  std::vector<int32_t> target;
};

Tensor t(std::vector<float>& v, int64_t rows, int64_t cols) {
  return Tensor(v.data(), {rows, cols});
}

void fused(Buffers& b, const Shape& s, double scale) {
  const Tensor x = t(b.x, s.N, s.D), w = t(b.w, s.V, s.D), tg(b.target.data(), {s.N});
  ops::lm_head_xent_forward(t(b.loss, s.N, 1).view({s.N}), t(b.lse, s.N, 1).view({s.N}), x, w, tg);
  ops::lm_head_xent_backward(t(b.dx, s.N, s.D), t(b.dw, s.V, s.D), x, w,
                             t(b.lse, s.N, 1).view({s.N}), tg, scale);
}

void unfused(Buffers& b, const Shape& s, double scale) {
  if (b.logits.empty()) b.logits.resize(size_t(s.N * s.V));
  const Tensor x = t(b.x, s.N, s.D), w = t(b.w, s.V, s.D), tg(b.target.data(), {s.N});
  const Tensor l = t(b.logits, s.N, s.V), lse = t(b.lse, s.N, 1).view({s.N});
  ops::linear_forward(l, x, w, {});
  ops::xent_forward(t(b.loss, s.N, 1).view({s.N}), lse, l, tg);
  ops::xent_backward(l, l, lse, tg, scale);
  ops::linear_backward(t(b.dx, s.N, s.D), t(b.dw, s.V, s.D), {}, l, x, w);
}

double seconds(void (*f)(Buffers&, const Shape&, double), Buffers& b, const Shape& s) {
  const double t0 = omp_get_wtime();
  f(b, s, 1.0 / double(s.N));
  return omp_get_wtime() - t0;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string which = argc > 2 ? argv[2] : "both";
  const std::string only = argc > 3 ? argv[3] : "all";
  const Shape shapes[] = {{"step-bench", 1024, 512, 8192}, {"tiny-kjv", 32768, 128, 1024}};
  std::printf("lm head + xent f32, forward + backward, threads=%d, best of %d\n",
              omp_get_max_threads(), reps);
  for (const Shape& s : shapes) {
    if (only != "all" && only != s.name) continue;
    Buffers b;
    b.x.resize(size_t(s.N * s.D));
    b.w.resize(size_t(s.V * s.D));
    b.dx.resize(b.x.size());
    b.dw.resize(b.w.size());
    b.loss.resize(size_t(s.N));
    b.lse.resize(size_t(s.N));
    b.target.resize(size_t(s.N));
    ops::fill_normal(t(b.x, s.N, s.D), 1, 0, 1.0);
    ops::fill_normal(t(b.w, s.V, s.D), 1, 1, 0.05);
    for (int64_t n = 0; n < s.N; ++n)
      b.target[size_t(n)] = n % 512 == 511 ? -1 : int32_t(n * 7919 % s.V);
    const double flops = 6.0 * double(s.N * s.D * s.V);
    if (which != "both") {
      auto f = which == "fused" ? fused : unfused;
      double best = 1e30;
      for (int r = 0; r <= reps; ++r) best = std::min(best, seconds(f, b, s));
      std::printf("%-10s %s only: %8.2f ms\n", s.name, which.c_str(), best * 1e3);
      continue;
    }
    std::vector<float> y(size_t(s.N * s.V));
    auto gemm_once = [&] {
      const double t0 = omp_get_wtime();
      ops::linear_forward(t(y, s.N, s.V), t(b.x, s.N, s.D), t(b.w, s.V, s.D), {});
      return omp_get_wtime() - t0;
    };
    gemm_once();
    seconds(fused, b, s);  // warm-up: tile buffers, page faults
    seconds(unfused, b, s);
    double tf = 1e30, tu = 1e30, tg = 1e30;
    for (int r = 0; r < reps; ++r) {
      tf = std::min(tf, seconds(fused, b, s));
      tu = std::min(tu, seconds(unfused, b, s));
      tg = std::min(tg, gemm_once());
    }
    // The two paths' results (dw accumulates: compare one fresh call of each).
    Buffers u = b;
    std::fill(b.dw.begin(), b.dw.end(), 0.0f);
    std::fill(u.dw.begin(), u.dw.end(), 0.0f);
    fused(b, s, 1.0 / double(s.N));
    unfused(u, s, 1.0 / double(s.N));
    const double sgemm = 2.0 * double(s.N * s.D * s.V) / tg;
    std::printf(
        "%-10s N=%lld D=%lld V=%lld: unfused %8.2f ms  fused %8.2f ms  ratio %.2fx  "
        "fused %.1f GFLOP/s (model FLOPs; %.0f%% of sgemm %.1f GFLOP/s)  logits buffer %.1f MiB\n",
        s.name, (long long)s.N, (long long)s.D, (long long)s.V, tu * 1e3, tf * 1e3, tu / tf,
        flops / tf * 1e-9, 100.0 * flops / tf / sgemm, sgemm * 1e-9,
        double(s.N * s.V) * 4 / (1 << 20));
    std::printf("%-10s max |diff| loss %.2e  lse %.2e  dx %.2e  dw %.2e\n", s.name,
                max_diff(b.loss, u.loss), max_diff(b.lse, u.lse), max_diff(b.dx, u.dx),
                max_diff(b.dw, u.dw));
  }
  return 0;
}
