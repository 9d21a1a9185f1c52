// Memory bandwidth probes (see bandwidth.h). Buffers are first touched by the threads that later
// stream them (static split), so pages sit near their readers on NUMA machines.
#include "perf/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/assert.h"
#include "ops/cpu/stealing.h"

namespace zaya {

namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;

// A 64-byte aligned buffer of n floats, filled in parallel (static split, as the probes read).
Buffer make_buffer(size_t n, float value) {
  const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  Buffer b(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))));
  if (!b) fail("out of memory allocating a {}-byte bandwidth probe buffer", bytes);
  float* p = b.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) p[i] = value;
  return b;
}

// Best of reps timed passes of f (after one untimed pass).
template <class F>
double best_rate(int reps, F&& f) {
  f();
  double best = 0;
  for (int r = 0; r < std::max(reps, 1); ++r) best = std::max(best, f());
  return best;
}

}  // namespace

// The passes run on the team of ops/cpu/stealing.h in chunks of 1 MiB: each thread streams its
// contiguous half and takes the far end of a slower one's, as the decode GEMVs do, so on a shared
// machine a descheduled thread slows the probe no more than it slows decode.
constexpr int64_t kChunkFloats = int64_t(1) << 18;

struct BandwidthProbe::Buffers {
  size_t n;                    // floats per buffer
  Buffer src, dst;             // dst: allocated by the first copy pass
  std::vector<float> partial;  // per-chunk sums of a read pass
  volatile float sink = 0;     // keeps the sums alive
};

BandwidthProbe::BandwidthProbe(size_t bytes) : b_(std::make_unique<Buffers>()) {
  b_->n = std::max<size_t>(bytes / sizeof(float), 1);
  b_->src = make_buffer(b_->n, 1.0f);
}

BandwidthProbe::~BandwidthProbe() = default;

double BandwidthProbe::read_pass() {
  const int64_t n = int64_t(b_->n);
  const float* s = b_->src.get();
  const int64_t chunks = (n + kChunkFloats - 1) / kChunkFloats;
  b_->partial.resize(size_t(chunks));
  const double t0 = omp_get_wtime();
  ops::cpu::for_chunks_stealing(n, kChunkFloats, true, [&](int64_t i0, int64_t i1) {
    constexpr int kLanes = 64;  // 4 AVX-512 / 8 AVX2 independent accumulators
    float acc[kLanes] = {};
    int64_t i = i0;
    for (; i + kLanes <= i1; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += s[i + l];
    for (; i < i1; ++i) acc[0] += s[i];
    float total = 0;
    for (int l = 0; l < kLanes; ++l) total += acc[l];
    b_->partial[size_t(i0 / kChunkFloats)] = total;
  });
  const double t = omp_get_wtime() - t0;
  float total = 0;
  for (float p : b_->partial) total += p;
  b_->sink = b_->sink + total;
  return double(n) * sizeof(float) / t;
}

double BandwidthProbe::copy_pass() {
  const int64_t n = int64_t(b_->n);
  if (!b_->dst) b_->dst = make_buffer(size_t(n), 0.0f);  // only copy probes need the second buffer
  const float* s = b_->src.get();
  float* d = b_->dst.get();
  const double t0 = omp_get_wtime();
  ops::cpu::for_chunks_stealing(n, kChunkFloats, true, [&](int64_t i0, int64_t i1) {
    std::memcpy(d + i0, s + i0, size_t(i1 - i0) * sizeof(float));
  });
  return 2.0 * double(n) * sizeof(float) / (omp_get_wtime() - t0);
}

double measure_copy_bandwidth(size_t bytes, int reps) {
  BandwidthProbe p(bytes);
  return best_rate(reps, [&] { return p.copy_pass(); });
}

double measure_read_bandwidth(size_t bytes, int reps) {
  BandwidthProbe p(bytes);
  return best_rate(reps, [&] { return p.read_pass(); });
}

}  // namespace zaya
