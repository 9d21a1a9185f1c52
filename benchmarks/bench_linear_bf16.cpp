// Decode-shaped BF16 GEMV (linear_forward with BF16 weights, N inputs) against this machine's
// memory bandwidth measured in the same run, all OpenMP threads.
// usage: bench_linear_bf16 [rounds=5] [buffer_mib=256]
// Built as build/<dir>/benchmarks/bench_linear_bf16.
// Weights are cycled through enough copies that each timed pass streams ≥ buffer_mib from memory
// (not from the last-level cache). "GEMV GB/s" counts bf16 weight bytes read per second; the
// bound is the read-only rate (perf/bandwidth.h: a decode step is a read-only stream), and the
// STREAM copy figure (read + written bytes) is printed beside it for reference.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/dtype.h"
#include "ops/ops.h"
#include "perf/bandwidth.h"

using namespace zaya;

namespace {

struct Shape {
  int64_t O, I;
};

// Best seconds per call of y[N,O] = x[N,I]·wᵀ, cycling over the weight copies.
double time_gemv(std::vector<std::vector<uint16_t>>& copies, const Shape& s, int64_t N, int reps) {
  std::vector<float> x(size_t(N * s.I), 0.01f), y(size_t(N * s.O));
  auto pass = [&] {
    for (auto& w : copies)
      ops::linear_forward(Tensor(y.data(), {N, s.O}), Tensor(x.data(), {N, s.I}),
                          Tensor((void*)w.data(), DType::BF16, {s.O, s.I}), Tensor{});
  };
  pass();  // warm-up (page faults, thread team)
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = omp_get_wtime();
    pass();
    best = std::min(best, (omp_get_wtime() - t0) / double(copies.size()));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const long long buffer_mib = argc > 2 ? std::atoll(argv[2]) : 256;
  if (argc > 3 || rounds < 1 || buffer_mib < 1) {
    std::fprintf(
        stderr, "usage: bench_linear_bf16 [rounds ≥ 1, default 5] [buffer_mib ≥ 1, default 256]\n");
    return 2;
  }
  const size_t buffer = size_t(buffer_mib) << 20;
  // ZAYA1-base's decode GEMVs (experts 4096×2048 and 2048×2048, CCA output 2048×1024), a short-row
  // case, and a long-row one.
  const std::vector<Shape> shapes = {
      {4096, 2048}, {2048, 2048}, {2048, 1024}, {32768, 1024}, {1024, 5120}};
  const std::vector<int64_t> inputs = {1, 4, 16, 17};
  // Weight copies per shape: each timed pass streams ≥ buffer bytes.
  std::vector<std::vector<std::vector<uint16_t>>> weights(shapes.size());
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape s = shapes[si];
    const size_t bytes = size_t(s.O * s.I) * 2;
    weights[si].resize(std::max<size_t>(1, (buffer + bytes - 1) / bytes));
    for (auto& w : weights[si]) {
      w.resize(size_t(s.O * s.I));
      uint16_t* p = w.data();
#pragma omp parallel for schedule(static)  // first touch by the rows' readers
      for (int64_t i = 0; i < s.O * s.I; ++i) p[i] = f32_to_bf16(float(i % 17) * 0.01f - 0.08f);
    }
  }
  // Rounds interleave every measurement, each keeping its best: on a shared machine a quiet
  // moment then benefits the bandwidth probes and the GEMVs alike.
  double copy = 0, read = 0;
  std::vector<double> best(shapes.size() * inputs.size(), 1e30);
  for (int r = 0; r < rounds; ++r) {
    copy = std::max(copy, measure_copy_bandwidth(buffer, 2));
    read = std::max(read, measure_read_bandwidth(buffer, 2));
    for (size_t si = 0; si < shapes.size(); ++si)
      for (size_t ni = 0; ni < inputs.size(); ++ni) {
        double& b = best[si * inputs.size() + ni];
        b = std::min(b, time_gemv(weights[si], shapes[si], inputs[ni], 1));
      }
  }
  std::printf("threads=%d buffer=%zu MiB rounds=%d\n", omp_get_max_threads(), buffer >> 20, rounds);
  std::printf("copy bandwidth (STREAM: read+written) %7.2f GB/s  (read share %.2f GB/s)\n",
              copy * 1e-9, copy * 0.5e-9);
  std::printf("read bandwidth (read-only sum)        %7.2f GB/s\n", read * 1e-9);
  std::printf("%-16s %4s %10s %10s %9s %9s\n", "shape [O,I]", "N", "us/call", "GEMV GB/s", "/read",
              "/copy");
  for (size_t si = 0; si < shapes.size(); ++si)
    for (size_t ni = 0; ni < inputs.size(); ++ni) {
      const Shape s = shapes[si];
      const double t = best[si * inputs.size() + ni], gbs = double(s.O * s.I) * 2 / t;
      std::printf("[%6lld,%5lld] %4lld %10.1f %10.2f %8.1f%% %8.1f%%\n", (long long)s.O,
                  (long long)s.I, (long long)inputs[ni], t * 1e6, gbs * 1e-9, 100 * gbs / read,
                  100 * gbs / copy);
    }
  return 0;
}
