// Throughput of the CPU causal attention op (forward, backward) in f32, as a fraction of the
// machine's sgemm rate measured in the same run: each rep times a square cblas_sgemm (n = 1024,
// the same threads), the forward and the backward one after another, and the best of the reps is
// kept for each, so a shared, noisy machine affects both sides alike.
// usage: bench_attention [T=4096] [B=1] [Hq=8] [Hk=2] [d=0: 16, 64 and 128] [reps=3]
// Built as build/release/bench/bench_attention.
// Flops count the useful causal work: forward 2 GEMMs (S = QKᵀ, O = PV), backward 5 (S, dP, dV,
// dK, dQ), each 2·(T(T+1)/2)·d per (b, query head).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/rng.h"
#include "ops/ops.h"

using namespace zaya;

namespace {

// Seconds of one n³ sgemm (OpenBLAS, all threads), the best of three.
double sgemm_seconds(int n, std::vector<float>& a, std::vector<float>& b, std::vector<float>& c) {
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const double t0 = omp_get_wtime();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    best = std::min(best, omp_get_wtime() - t0);
  }
  return best;
}

void bench_head_size(int64_t T, int64_t B, int64_t Hq, int64_t Hk, int64_t d, int reps) {
  const size_t nq = size_t(B * T * Hq * d), nk = size_t(B * T * Hk * d);
  std::vector<float> q(nq), k(nk), v(nk), o(nq), dout(nq), lse(size_t(B * Hq * T)), dq(nq), dk(nk),
      dv(nk);
  CounterRng rng{1, 0};
  for (size_t i = 0; i < nq; ++i) q[i] = float(rng.normal(i)), dout[i] = float(rng.normal(nq + i));
  for (size_t i = 0; i < nk; ++i)
    k[i] = float(rng.normal(2 * nq + i)), v[i] = float(rng.normal(3 * nq + i));
  Tensor tq(q.data(), {B, T, Hq, d}), tk(k.data(), {B, T, Hk, d}), tv(v.data(), {B, T, Hk, d}),
      to(o.data(), {B, T, Hq, d}), tl(lse.data(), {B, Hq, T});
  const int n = 1024;
  std::vector<float> a(size_t(n) * n, 0.5f), bm(size_t(n) * n, 0.25f), c(size_t(n) * n);
  sgemm_seconds(n, a, bm, c);  // warm-up: thread pool, page faults
  const double gemm = 2.0 * (double(T) * double(T + 1) / 2) * double(d) * double(B * Hq);
  double best_g = 1e30, best_f = 1e30, best_b = 1e30;
  for (int r = 0; r < reps; ++r) {
    best_g = std::min(best_g, sgemm_seconds(n, a, bm, c));
    const double t0 = omp_get_wtime();
    ops::attention_forward(to, tl, tq, tk, tv);
    const double t1 = omp_get_wtime();
    ops::attention_backward(Tensor(dq.data(), {B, T, Hq, d}), Tensor(dk.data(), {B, T, Hk, d}),
                            Tensor(dv.data(), {B, T, Hk, d}), Tensor(dout.data(), {B, T, Hq, d}),
                            tq, tk, tv, to, tl);
    const double t2 = omp_get_wtime();
    best_f = std::min(best_f, t1 - t0), best_b = std::min(best_b, t2 - t1);
  }
  const double sgemm = 2.0 * n * n * double(n) / best_g * 1e-9;
  const double fwd = 2 * gemm / best_f * 1e-9, bwd = 5 * gemm / best_b * 1e-9;
  std::printf("T=%lld B=%lld Hq=%lld Hk=%lld d=%lld threads=%d: sgemm %d^3 %.1f GFLOP/s\n",
              (long long)T, (long long)B, (long long)Hq, (long long)Hk, (long long)d,
              omp_get_max_threads(), n, sgemm);
  std::printf("  forward  %9.2f ms %7.1f GFLOP/s  %5.1f%% of sgemm\n", best_f * 1e3, fwd,
              100 * fwd / sgemm);
  std::printf("  backward %9.2f ms %7.1f GFLOP/s  %5.1f%% of sgemm\n", best_b * 1e3, bwd,
              100 * bwd / sgemm);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i, int64_t def) { return argc > i ? int64_t(std::atoll(argv[i])) : def; };
  const int64_t T = arg(1, 4096), B = arg(2, 1), Hq = arg(3, 8), Hk = arg(4, 2), d = arg(5, 0);
  const int reps = int(arg(6, 3));
  if (T < 1 || B < 1 || Hk < 1 || Hq < Hk || Hq % Hk != 0 || d < 0 || reps < 1) {
    std::fprintf(stderr, "usage: bench_attention [T] [B] [Hq] [Hk | Hq %% Hk == 0] [d] [reps]\n");
    return 2;
  }
  for (int64_t hd : d > 0 ? std::vector<int64_t>{d} : std::vector<int64_t>{16, 64, 128})
    bench_head_size(T, B, Hq, Hk, hd, reps);
  return 0;
}
