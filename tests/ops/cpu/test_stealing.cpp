// for_chunks_stealing: every index is visited exactly once, in chunks of the requested size
// aligned to multiples of it, for any team size (including a team smaller than the range count,
// as under nested parallelism), and serially when asked.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ops/cpu/stealing.h"

using zaya::ops::cpu::for_chunks_stealing;

namespace {

// Visit counts per index, and whether every call was one chunk [k·chunk, min(n, (k+1)·chunk)) or
// the whole range at once (one thread, or a single chunk).
void check_cover(int64_t n, int64_t chunk, bool parallel) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  std::atomic<bool> aligned{true};
  for_chunks_stealing(n, chunk, parallel, [&](int64_t i0, int64_t i1) {
    const bool whole = i0 == 0 && i1 == n;
    if (!whole && (i0 % chunk != 0 || i1 != std::min(n, i0 + chunk))) aligned = false;
    for (int64_t i = i0; i < i1; ++i) seen[size_t(i)]++;
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(seen[size_t(i)].load(), 1) << "index " << i << " of " << n << ", chunk " << chunk;
  EXPECT_TRUE(aligned) << "n " << n << " chunk " << chunk;
}

}  // namespace

TEST(ForChunksStealing, CoversEveryIndexOnceOnAnyThreadCount) {
  const int procs = omp_get_max_threads();
  for (int threads : {1, 2, 3, 7}) {
    omp_set_num_threads(threads);
    for (int64_t n : {0, 1, 2, 5, 64, 1000, 4097})
      for (int64_t chunk : {1, 3, 64, 5000}) check_cover(n, chunk, true);
  }
  omp_set_num_threads(procs);
}

TEST(ForChunksStealing, SerialWhenNotParallel) {
  int calls = 0;
  for_chunks_stealing(100, 7, false, [&](int64_t i0, int64_t i1) {
    ++calls;
    EXPECT_EQ(i0, 0);
    EXPECT_EQ(i1, 100);
  });
  EXPECT_EQ(calls, 1);
}

// Inside a parallel region the inner team has one thread; the other ranges are stolen.
TEST(ForChunksStealing, NestedCallStillCoversEverything) {
  omp_set_num_threads(3);
#pragma omp parallel num_threads(2)
  {
    std::vector<int> seen(500, 0);
    for_chunks_stealing(500, 16, true, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) seen[size_t(i)]++;
    });
    for (int v : seen) EXPECT_EQ(v, 1);
  }
  omp_set_num_threads(omp_get_num_procs());
}

// A thread that is held up has its chunks taken by the others: the slow thread (the caller) does
// fewer.
TEST(ForChunksStealing, IdleThreadsTakeTheChunksOfASlowOne) {
  omp_set_num_threads(2);
  std::atomic<int> by_slow{0}, by_fast{0};
  const std::thread::id caller = std::this_thread::get_id();
  for_chunks_stealing(64, 1, true, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() == caller) {
      by_slow++;
      const double t0 = omp_get_wtime();
      while (omp_get_wtime() - t0 < 4e-3) {  // 32 own chunks: a 128 ms window to steal in
      }
    } else {
      by_fast++;
    }
  });
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_EQ(by_slow + by_fast, 64);
  EXPECT_LT(by_slow.load(), 32) << "the fast thread stole nothing";
}

// Many short loops back to back (a helper that wakes late must never run a chunk of the wrong
// loop), loops started from inside a loop's body (they run serially on that thread) and loops
// started by two threads at once (one gets the team, the other runs alone): every index of every
// loop is visited exactly once.
TEST(ForChunksStealing, BackToBackNestedAndConcurrentLoops) {
  omp_set_num_threads(2);
  for (int rep = 0; rep < 2000; ++rep) check_cover(1 + rep % 97, 1 + rep % 5, true);
  std::vector<std::atomic<int>> seen(64 * 50);
  for_chunks_stealing(64, 1, true, [&](int64_t i0, int64_t) {
    for_chunks_stealing(50, 3, true, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) seen[size_t(i0 * 50 + j)]++;
    });
  });
  for (const auto& v : seen) ASSERT_EQ(v.load(), 1);
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([] {
      for (int rep = 0; rep < 300; ++rep) check_cover(257, 8, true);
    });
  for (std::thread& t : callers) t.join();
  omp_set_num_threads(omp_get_num_procs());
}
