// Throughput of the CPU causal attention op (forward, backward) in f32, as a fraction of the
// machine's sgemm rate measured in the same run: each rep times three passes of perf/sgemm.h's
// probe (a 768³ cblas_sgemm on the same threads), the forward and the backward one after another,
// and the best of the reps is kept for each, so a shared, noisy machine affects both sides alike.
// usage: bench_attention [T=4096] [B=1] [Hq=8] [Hk=2] [d=0: 16, 64 and 128] [reps=3] [window=0]
// Built as build/release/benchmarks/bench_attention.
// Flops count the useful causal work: forward 2 GEMMs (S = QKᵀ, O = PV), backward 5 (S, dP, dV,
// dK, dQ), each 2·(visible (query, key) pairs)·d per (b, query head); the pairs are T(T+1)/2, or
// with a sliding window of W keys (ops/ops.h) Σ_t min(t + 1, W), linear in T. The time per token
// printed with a window then stays flat as T grows.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/rng.h"
#include "ops/ops.h"
#include "perf/sgemm.h"

using namespace zaya;

namespace {

void bench_head_size(int64_t T, int64_t B, int64_t Hq, int64_t Hk, int64_t d, int reps, int64_t W) {
  const size_t nq = size_t(B * T * Hq * d), nk = size_t(B * T * Hk * d);
  std::vector<float> q(nq), k(nk), v(nk), o(nq), dout(nq), lse(size_t(B * Hq * T)), dq(nq), dk(nk),
      dv(nk);
  CounterRng rng{1, 0};
  for (size_t i = 0; i < nq; ++i) q[i] = float(rng.normal(i)), dout[i] = float(rng.normal(nq + i));
  for (size_t i = 0; i < nk; ++i)
    k[i] = float(rng.normal(2 * nq + i)), v[i] = float(rng.normal(3 * nq + i));
  Tensor tq(q.data(), {B, T, Hq, d}), tk(k.data(), {B, T, Hk, d}), tv(v.data(), {B, T, Hk, d}),
      to(o.data(), {B, T, Hq, d}), tl(lse.data(), {B, Hq, T});
  SgemmProbe probe;  // 768³, the MFU yardstick of `zaya train` and `zaya bench step`
  probe.pass();      // warm-up: thread pool, page faults
  double pairs = 0;
  for (int64_t t = 0; t < T; ++t) pairs += double(W > 0 ? std::min(t + 1, W) : t + 1);
  const double gemm = 2.0 * pairs * double(d) * double(B * Hq);
  double sgemm = 0, best_f = 1e30, best_b = 1e30;  // sgemm: best FLOP/s of 3 passes per rep
  for (int r = 0; r < reps; ++r) {
    for (int p = 0; p < 3; ++p) sgemm = std::max(sgemm, probe.pass() * 1e-9);
    const double t0 = omp_get_wtime();
    ops::attention_forward(to, tl, tq, tk, tv, W);
    const double t1 = omp_get_wtime();
    ops::attention_backward(Tensor(dq.data(), {B, T, Hq, d}), Tensor(dk.data(), {B, T, Hk, d}),
                            Tensor(dv.data(), {B, T, Hk, d}), Tensor(dout.data(), {B, T, Hq, d}),
                            tq, tk, tv, to, tl, W);
    const double t2 = omp_get_wtime();
    best_f = std::min(best_f, t1 - t0), best_b = std::min(best_b, t2 - t1);
  }
  const double fwd = 2 * gemm / best_f * 1e-9, bwd = 5 * gemm / best_b * 1e-9;
  std::printf(
      "T=%lld B=%lld Hq=%lld Hk=%lld d=%lld window=%lld threads=%d: sgemm 768^3 %.1f GFLOP/s\n",
      (long long)T, (long long)B, (long long)Hq, (long long)Hk, (long long)d, (long long)W,
      omp_get_max_threads(), sgemm);
  std::printf("  forward  %9.2f ms %7.1f GFLOP/s  %5.1f%% of sgemm\n", best_f * 1e3, fwd,
              100 * fwd / sgemm);
  std::printf("  backward %9.2f ms %7.1f GFLOP/s  %5.1f%% of sgemm\n", best_b * 1e3, bwd,
              100 * bwd / sgemm);
  std::printf("  per token: forward %.3f us, backward %.3f us\n", best_f * 1e6 / double(B * T),
              best_b * 1e6 / double(B * T));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i, int64_t def) { return argc > i ? int64_t(std::atoll(argv[i])) : def; };
  const int64_t T = arg(1, 4096), B = arg(2, 1), Hq = arg(3, 8), Hk = arg(4, 2), d = arg(5, 0);
  const int reps = int(arg(6, 3));
  const int64_t W = arg(7, 0);
  if (T < 1 || B < 1 || Hk < 1 || Hq < Hk || Hq % Hk != 0 || d < 0 || reps < 1 || W < 0) {
    std::fprintf(stderr,
                 "usage: bench_attention [T] [B] [Hq] [Hk | Hq %% Hk == 0] [d] [reps] [window]\n");
    return 2;
  }
  for (int64_t hd : d > 0 ? std::vector<int64_t>{d} : std::vector<int64_t>{16, 64, 128})
    bench_head_size(T, B, Hq, Hk, hd, reps, W);
  return 0;
}
