// A warm training step allocates no large buffers: every op's scratch and the trainer's buffers
// are kept from step to step (no allocation in the step). This executable replaces the
// global operator new to count allocations of at least kLarge bytes while a step runs, naming the
// call site of each (backtrace) when the count is not zero.
#include <execinfo.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "test_util.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

namespace {

constexpr size_t kLarge = 16 << 10;
std::atomic<bool> g_counting{false};
std::atomic<int> g_large{0};
thread_local bool t_in_hook = false;
std::string g_sites;  // backtraces of the first few large allocations (written under counting)

void note_allocation(size_t n) {
  if (!g_counting.load(std::memory_order_relaxed) || n < kLarge || t_in_hook) return;
  t_in_hook = true;
  if (g_large.fetch_add(1) < 8) {
    void* frames[16];
    const int depth = backtrace(frames, 16);
    char** names = backtrace_symbols(frames, depth);
    g_sites += "allocation of " + std::to_string(n) + " bytes:\n";
    for (int i = 1; names && i < depth; ++i) g_sites += std::string("  ") + names[i] + "\n";
    std::free(names);
  }
  t_in_hook = false;
}

}  // namespace

void* operator new(size_t n) {
  note_allocation(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  return operator new(n);
}
void* operator new(size_t n, std::align_val_t a) {
  note_allocation(n);
  const size_t al = size_t(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) {
  return operator new(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace zaya {
namespace {

TEST(StepAllocations, AWarmStepAllocatesNoLargeBuffers) {
  test::ScratchDir dir;
  const std::string shards = test::make_tiny_dataset(dir);
  for (bool muon : {false, true}) {
    TrainConfig c = test::tiny_run(dir, muon ? "muon" : "adamw", shards);
    c.seq_len = 64;
    c.micro_batch = 8;  // 512 tokens: [N, D] buffers 128 KiB, Muon's 64×128 matrices 32 KiB
    c.grad_accum = 1;
    c.checkpoint_dir = "";
    c.optim.use_muon = muon;
    Trainer t(c, {.quiet = true});
    t.train_step();
    t.train_step();  // warm: every buffer has seen its largest size
    g_large = 0;
    g_sites.clear();
    g_counting = true;
    t.train_step();
    t.train_step();
    g_counting = false;
    EXPECT_EQ(g_large.load(), 0) << (muon ? "Muon" : "AdamW") << " steps allocated:\n" << g_sites;
  }
}

}  // namespace
}  // namespace zaya
