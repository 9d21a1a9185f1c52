// The tied LM head + cross-entropy, forward + backward, three ways: (a) unfused: linear_forward
// into an [N,V] buffer, xent_forward, xent_backward in place, linear_backward (3 GEMMs of N·V·D);
// (b) fused: lm_head_xent_forward then lm_head_xent_backward, tiles only (4 GEMMs: the logits are
// recomputed); (c) one pass: lm_head_xent_forward_backward (3 GEMMs, row blocks of the whole
// vocabulary). Interleaved, best of `reps`, on the step-bench and tiny-kjv shapes; also sgemm's
// rate on the logits product x·wᵀ measured in the same run. Prints each time, the ratios, GFLOP/s
// (6·N·D·V model FLOPs per forward + backward) and the largest differences against (a).
// usage: bench_lm_head [reps=5] [which=all|fused|unfused|one_pass] [shape=all|step-bench|tiny-kjv]
// (one path on one shape alone: for its max RSS)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
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

void one_pass(Buffers& b, const Shape& s, double scale) {
  const Tensor x = t(b.x, s.N, s.D), w = t(b.w, s.V, s.D), tg(b.target.data(), {s.N});
  ops::lm_head_xent_forward_backward(t(b.loss, s.N, 1).view({s.N}), t(b.lse, s.N, 1).view({s.N}),
                                     t(b.dx, s.N, s.D), t(b.dw, s.V, s.D), x, w, tg, scale);
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
  const std::string which = argc > 2 ? argv[2] : "all";
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
    if (which != "all") {
      auto f = which == "fused" ? fused : which == "one_pass" ? one_pass : unfused;
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
    seconds(fused, b, s);  // warm-up: tile and block buffers, page faults
    seconds(one_pass, b, s);
    seconds(unfused, b, s);
    double tf = 1e30, to = 1e30, tu = 1e30, tg = 1e30;
    for (int r = 0; r < reps; ++r) {
      tu = std::min(tu, seconds(unfused, b, s));
      tf = std::min(tf, seconds(fused, b, s));
      to = std::min(to, seconds(one_pass, b, s));
      tg = std::min(tg, gemm_once());
    }
    // The paths' results (dw accumulates: compare one fresh call of each).
    Buffers u = b, o = b;
    for (Buffers* z : {&b, &u, &o}) std::fill(z->dw.begin(), z->dw.end(), 0.0f);
    fused(b, s, 1.0 / double(s.N));
    unfused(u, s, 1.0 / double(s.N));
    one_pass(o, s, 1.0 / double(s.N));
    const double sgemm = 2.0 * double(s.N * s.D * s.V) / tg;
    std::printf("%-10s N=%lld D=%lld V=%lld  sgemm x·wT %.1f GFLOP/s  logits buffer %.1f MiB\n",
                s.name, (long long)s.N, (long long)s.D, (long long)s.V, sgemm * 1e-9,
                double(s.N * s.V) * 4 / (1 << 20));
    auto row = [&](const char* what, double sec) {
      std::printf("%-10s   %-28s %8.2f ms  %6.1f GFLOP/s (%3.0f%% of sgemm)  unfused/this %.2fx\n",
                  s.name, what, sec * 1e3, flops / sec * 1e-9, 100.0 * flops / sec / sgemm,
                  tu / sec);
    };
    row("(a) unfused linear + xent", tu);
    row("(b) fused forward + backward", tf);
    row("(c) one pass", to);
    std::printf("%-10s   fused/one pass %.2fx\n", s.name, tf / to);
    for (const auto& [name, z] : {std::pair{"fused", &b}, std::pair{"one pass", &o}})
      std::printf("%-10s   %-8s vs unfused max |diff| loss %.2e  lse %.2e  dx %.2e  dw %.2e\n",
                  s.name, name, max_diff(z->loss, u.loss), max_diff(z->lse, u.lse),
                  max_diff(z->dx, u.dx), max_diff(z->dw, u.dw));
  }
  return 0;
}
