// The team behind for_chunks_stealing (see stealing.h): the calling thread plus helper threads
// started on first use, one [front, back) chunk range per member. A loop publishes its task and
// ranges, bumps a generation counter (the futex word sleeping helpers wait on), works through its
// own range and then steals, and returns once every chunk has been run. A helper claims chunks
// with a compare-and-swap on the ranges and only then reads the task: a claim can only succeed on
// a range of the loop in flight (ranges are refilled only after every chunk of the last loop
// ran), so a helper that wakes late or reads a stale generation can never run the wrong loop.
#include "ops/cpu/stealing.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace zaya::ops::cpu::detail {

namespace {

using Task = void (*)(void*, int64_t);

constexpr int kMaxThreads = 256;
// How long an idle helper spins before it sleeps; decode starts a loop every few hundred
// microseconds, and waking a sleeping thread costs tens of microseconds on a VM.
constexpr auto kHelperSpin = std::chrono::microseconds(500);
// How long the caller spins on a helper's unfinished chunk before it yields its core.
constexpr auto kCallerSpin = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins on done() with cpu_relax; after `spin` it calls idle() on every further check.
template <class Done, class Idle>
bool spin_until(Done&& done, std::chrono::microseconds spin, Idle&& idle) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t k = 1;; ++k) {
    if (done()) return true;
    cpu_relax();
    if (k % 64 == 0 && std::chrono::steady_clock::now() - t0 > spin) break;
  }
  for (;;) {
    if (done()) return true;
    if (!idle()) return false;
  }
}

// One member's chunks [front, back), packed so that both ends move with one CAS.
struct alignas(64) ChunkRange {
  std::atomic<uint64_t> v{0};
  static uint64_t pack(uint32_t front, uint32_t back) { return uint64_t(back) << 32 | front; }
  // Claims the first (owner) or the last (thief) chunk; false once the range is empty.
  bool take(bool from_front, uint32_t& chunk) {
    uint64_t cur = v.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t front = uint32_t(cur), back = uint32_t(cur >> 32);
      if (front >= back) return false;
      const uint64_t next = from_front ? pack(front + 1, back) : pack(front, back - 1);
      if (v.compare_exchange_weak(cur, next, std::memory_order_acq_rel,
                                  std::memory_order_acquire)) {
        chunk = from_front ? front : back - 1;
        return true;
      }
    }
  }
};

thread_local bool t_is_helper = false;

class Team {
 public:
  Team() : ranges_(std::make_unique<ChunkRange[]>(kMaxThreads)) {}
  ~Team() {
    // A forked child that exits normally has the thread objects but not the threads.
    if (getpid() != pid_) {
      for (std::thread& t : helpers_) t.detach();
      return;
    }
    stop_.store(true);
    gen_.fetch_add(1);
    gen_.notify_all();
    for (std::thread& t : helpers_) t.join();
  }

  bool run(int64_t chunks, int threads, Task task, void* ctx) {
    if (t_is_helper || busy_.exchange(true, std::memory_order_acquire)) return false;
    threads = std::min(threads, kMaxThreads);
    while (int(helpers_.size()) < threads - 1) {
      const int id = int(helpers_.size()) + 1;
      helpers_.emplace_back([this, id, g = gen_.load()] { helper(id, g); });
    }
    task_.store(task, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    parts_.store(threads, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    for (int p = 0; p < threads; ++p)
      ranges_[size_t(p)].v.store(
          ChunkRange::pack(uint32_t(chunks * p / threads), uint32_t(chunks * (p + 1) / threads)),
          std::memory_order_release);
    gen_.fetch_add(1);  // seq_cst, against a helper's sleepers_ increment (both sides)
    if (sleepers_.load() > 0) gen_.notify_all();
    work(0, threads);
    // Only chunks a helper claimed and has not finished are left: wait for those.
    spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; }, kCallerSpin,
               [] {
                 std::this_thread::yield();
                 return true;
               });
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  // Own range from the front, then the others' from their back.
  void work(int id, int parts) {
    uint32_t c;
    auto run_chunk = [&] {
      task_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), int64_t(c));
      done_.fetch_add(1, std::memory_order_release);
    };
    if (id < parts)
      while (ranges_[size_t(id)].take(true, c)) run_chunk();
    for (int k = 1; k < parts; ++k)
      while (ranges_[size_t((id + k) % parts)].take(false, c)) run_chunk();
  }

  void helper(int id, uint32_t seen) {
    t_is_helper = true;
    for (;;) {
      auto fresh = [&] { return gen_.load(std::memory_order_acquire) != seen; };
      spin_until(fresh, kHelperSpin, [&] {  // then sleep until the next loop
        sleepers_.fetch_add(1);
        if (gen_.load() == seen) gen_.wait(seen);  // seq_cst: pairs with run()'s gen_/sleepers_
        sleepers_.fetch_sub(1);
        return true;
      });
      if (stop_.load()) return;
      seen = gen_.load(std::memory_order_acquire);
      work(id, parts_.load(std::memory_order_relaxed));
    }
  }

  std::unique_ptr<ChunkRange[]> ranges_;
  std::vector<std::thread> helpers_;  // touched only by the thread holding busy_
  const pid_t pid_ = getpid();
  std::atomic<bool> busy_{false}, stop_{false};
  std::atomic<Task> task_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> parts_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int64_t> done_{0};
};

}  // namespace

bool run_on_team(int64_t chunks, int threads, Task task, void* ctx) {
  static Team team;
  return team.run(chunks, threads, task, ctx);
}

}  // namespace zaya::ops::cpu::detail
