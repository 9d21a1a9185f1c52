// Throughput of the CPU causal attention op (forward, backward) in f32.
// usage: bench_attention [T=4096] [B=1] [Hq=8] [Hk=2] [d=128] [reps=3]
// Built as build/release/bench/bench_attention.
// Flops count the useful causal work: forward 2 GEMMs, backward 5 (7 are computed, counting the
// recomputation of S and dP in the dq pass), each ≈ 2·(T²/2)·d per (b, query head).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "core/rng.h"
#include "ops/ops.h"

using namespace zaya;

int main(int argc, char** argv) {
  auto arg = [&](int i, int64_t def) { return argc > i ? int64_t(std::atoll(argv[i])) : def; };
  const int64_t T = arg(1, 4096), B = arg(2, 1), Hq = arg(3, 8), Hk = arg(4, 2), d = arg(5, 128);
  const int reps = int(arg(6, 3));
  const size_t nq = size_t(B * T * Hq * d), nk = size_t(B * T * Hk * d);
  std::vector<float> q(nq), k(nk), v(nk), o(nq), dout(nq), lse(size_t(B * Hq * T)), dq(nq), dk(nk),
      dv(nk);
  CounterRng rng{1, 0};
  for (size_t i = 0; i < nq; ++i) q[i] = float(rng.normal(i)), dout[i] = float(rng.normal(nq + i));
  for (size_t i = 0; i < nk; ++i)
    k[i] = float(rng.normal(2 * nq + i)), v[i] = float(rng.normal(3 * nq + i));
  Tensor tq(q.data(), {B, T, Hq, d}), tk(k.data(), {B, T, Hk, d}), tv(v.data(), {B, T, Hk, d}),
      to(o.data(), {B, T, Hq, d}), tl(lse.data(), {B, Hq, T});
  const double gemm = 2.0 * (double(T) * double(T + 1) / 2) * double(d) * double(B * Hq);
  // Wall time and process CPU time (the latter is what counts on a shared, oversubscribed box).
  auto cpu = [] { return double(std::clock()) / CLOCKS_PER_SEC; };
  double best_f = 1e30, best_b = 1e30, cpu_f = 1e30, cpu_b = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = omp_get_wtime(), c0 = cpu();
    ops::attention_forward(to, tl, tq, tk, tv);
    double t1 = omp_get_wtime(), c1 = cpu();
    ops::attention_backward(Tensor(dq.data(), {B, T, Hq, d}), Tensor(dk.data(), {B, T, Hk, d}),
                            Tensor(dv.data(), {B, T, Hk, d}), Tensor(dout.data(), {B, T, Hq, d}),
                            tq, tk, tv, to, tl);
    double t2 = omp_get_wtime(), c2 = cpu();
    best_f = std::min(best_f, t1 - t0), cpu_f = std::min(cpu_f, c1 - c0);
    best_b = std::min(best_b, t2 - t1), cpu_b = std::min(cpu_b, c2 - c1);
  }
  std::printf("T=%lld B=%lld Hq=%lld Hk=%lld d=%lld threads=%d\n", (long long)T, (long long)B,
              (long long)Hq, (long long)Hk, (long long)d, omp_get_max_threads());
  std::printf("forward  %8.2f ms wall %6.1f GFLOP/s, %8.2f ms cpu %6.1f GFLOP/s per core\n",
              best_f * 1e3, 2 * gemm / best_f * 1e-9, cpu_f * 1e3, 2 * gemm / cpu_f * 1e-9);
  std::printf("backward %8.2f ms wall %6.1f GFLOP/s, %8.2f ms cpu %6.1f GFLOP/s per core\n",
              best_b * 1e3, 5 * gemm / best_b * 1e-9, cpu_b * 1e3, 5 * gemm / cpu_b * 1e-9);
  return 0;
}
