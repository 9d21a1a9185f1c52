// for_chunks_stealing: a parallel loop over [0, n) in chunks, for memory-bound loops that want
// OpenMP's static split (each thread streams one contiguous range, which the hardware prefetcher
// follows best) without its tail: a thread that finishes its own range takes the remaining
// chunks of the others from their far end. On a shared machine one thread is routinely slower
// (interrupts, a neighbour's traffic); with a static split the team then waits for it — in decode,
// several percent of the bandwidth bound (benchmarks/results/decode_*).
//
// The loop does not run on OpenMP's team but on a team of its own (stealing.cpp: the caller and
// omp_get_max_threads() − 1 helper threads), because of what a fork/join costs on a machine whose
// cores are shared: an OpenMP region ends at a barrier that waits for every team member, and
// libgomp's members spin (up to GOMP_SPINCOUNT, milliseconds) while they wait. With more runnable
// threads than cores the member being waited for is often descheduled while the other spins
// away the time slice it needs; decode runs ~200 such regions per token, and at a load of ~8 on 2
// cores bench decode fell to 0.7 tokens/s (14–19% of the bandwidth bound) where
// OMP_WAIT_POLICY=passive gave 3.4. Here the caller never waits for a helper that has not started:
// a helper that wakes late finds every chunk claimed and goes back to waiting; the caller waits
// only for chunks a helper has claimed and not finished. Helpers spin briefly between loops
// (decode calls them every few hundred microseconds) and then sleep on a futex.
//
// Every chunk is claimed exactly once (a compare-and-swap on its owner's [front, back) pair), so
// which thread computes an index never changes what is computed: results do not depend on the
// thread count or on timing as long as body(i0, i1) writes only its own outputs. Inside an OpenMP
// parallel region, from a helper, or while another thread's loop holds the team, the loop runs
// serially on the calling thread.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace zaya::ops::cpu {

namespace detail {

// Runs task(ctx, c) once for every chunk c in [0, chunks), on the caller and threads − 1 helpers,
// and returns when all have run. False (nothing run) when the team is unavailable (called from a
// helper, or another thread's loop holds it): the caller then runs the loop itself.
bool run_on_team(int64_t chunks, int threads, void (*task)(void*, int64_t), void* ctx);

}  // namespace detail

// Calls body(i0, i1) for consecutive chunks [i0, i1) of at most `chunk` indices covering [0, n),
// in parallel when `parallel` (otherwise one call over everything, on the calling thread).
template <class Body>
void for_chunks_stealing(int64_t n, int64_t chunk, bool parallel, Body&& body) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int T = omp_get_max_threads();
  if (parallel && T >= 2 && chunks >= 2 && chunks <= int64_t(UINT32_MAX) && !omp_in_parallel()) {
    struct Ctx {
      Body* body;
      int64_t n, chunk;
    } ctx{&body, n, chunk};
    auto task = [](void* p, int64_t c) {
      const Ctx& x = *static_cast<const Ctx*>(p);
      (*x.body)(c * x.chunk, std::min(x.n, (c + 1) * x.chunk));
    };
    if (detail::run_on_team(chunks, T, task, &ctx)) return;
  }
  body(int64_t(0), n);
}

}  // namespace zaya::ops::cpu
