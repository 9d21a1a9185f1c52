// Memory bandwidth probes (see bandwidth.h). Buffers are first touched by the threads that later
// stream them (static split), so pages sit near their readers on NUMA machines.
#include "core/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

namespace zaya {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;

// A 64-byte aligned buffer of n floats, filled in parallel (static split, as the probes read).
Buffer make_buffer(size_t n, float value) {
  const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  Buffer b(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))));
  float* p = b.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) p[i] = value;
  return b;
}

// Best of reps timed passes of f (after one untimed pass), in seconds.
template <class F>
double best_time(int reps, F&& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const double t0 = omp_get_wtime();
    f();
    best = std::min(best, omp_get_wtime() - t0);
  }
  return best;
}

}  // namespace

double measure_copy_bandwidth(size_t bytes, int reps) {
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1);
  Buffer src = make_buffer(n, 1.0f), dst = make_buffer(n, 0.0f);
  const float* s = src.get();
  float* d = dst.get();
  const double t = best_time(reps, [&] {
#pragma omp parallel
    {  // each thread copies its contiguous slice
      const size_t nt = size_t(omp_get_num_threads()), id = size_t(omp_get_thread_num());
      const size_t begin = n * id / nt, end = n * (id + 1) / nt;
      std::memcpy(d + begin, s + begin, (end - begin) * sizeof(float));
    }
  });
  return 2.0 * double(n * sizeof(float)) / t;
}

double measure_read_bandwidth(size_t bytes, int reps) {
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1);
  Buffer src = make_buffer(n, 1.0f);
  const float* s = src.get();
  volatile float sink = 0;  // keeps the sums alive
  const double t = best_time(reps, [&] {
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      const size_t nt = size_t(omp_get_num_threads()), id = size_t(omp_get_thread_num());
      const size_t begin = n * id / nt, end = n * (id + 1) / nt;
      constexpr int kLanes = 64;  // 4 AVX-512 / 8 AVX2 independent accumulators
      float acc[kLanes] = {};
      size_t i = begin;
      for (; i + kLanes <= end; i += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += s[i + l];
      for (; i < end; ++i) acc[0] += s[i];
      for (int l = 0; l < kLanes; ++l) total += acc[l];
    }
    sink = sink + total;
  });
  return double(n * sizeof(float)) / t;
}

}  // namespace zaya
