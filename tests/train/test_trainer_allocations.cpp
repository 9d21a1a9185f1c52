// A warm training step allocates no large buffers: every op's scratch and the trainer's buffers
// are kept from step to step. Two doors are watched while a step runs: the global operator new
// (replaced here; allocations of at least kLarge bytes count) and core/arena.h's allocation hook,
// which sees every Buffer, Arena and HostBuffer allocation (aligned_alloc, the GPU allocator, mmap:
// memory operator new never sees; each counts, whatever its size). When the count is not zero
// the message names the call site of each (backtrace, named by addr2line where installed).
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "core/host_buffer.h"
#include "test_util.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

namespace {

constexpr size_t kLarge = 16 << 10;
std::atomic<bool> g_counting{false};
std::atomic<int> g_large{0};
thread_local bool t_in_hook = false;
std::mutex g_sites_mutex;  // the step's worker threads allocate too
std::string g_sites;       // backtraces of the first few counted allocations

// Counts one allocation and records where it came from (the first 8).
void count_allocation(std::string_view what, size_t n) {
  t_in_hook = true;
  if (g_large.fetch_add(1) < 8) {
    void* frames[20];
    const int depth = backtrace(frames, 20);
    char** names = backtrace_symbols(frames, depth);
    const std::lock_guard<std::mutex> lock(g_sites_mutex);
    g_sites += std::string(what) + " of " + std::to_string(n) + " bytes:\n";
    for (int i = 2; names && i < depth; ++i) g_sites += std::string("  ") + names[i] + "\n";
    std::free(names);
  }
  t_in_hook = false;
}

void note_new(size_t n) {
  if (!g_counting.load(std::memory_order_relaxed) || n < kLarge || t_in_hook) return;
  count_allocation("operator new", n);
}

// core/arena.h's hook: every Buffer / Arena / HostBuffer allocation, on the host or a GPU.
void note_buffer(size_t n, zaya::Device device, std::string_view what) {
  if (!g_counting.load(std::memory_order_relaxed) || t_in_hook) return;
  count_allocation(std::string(what) + " (" + std::string(zaya::device_name(device)) + ")", n);
}

// `sites` with each frame in this executable named by its function (addr2line, where installed:
// the executable is not linked with -rdynamic, so backtrace_symbols gives only offsets).
std::string with_function_names(const std::string& sites) {
  std::vector<std::string> lines, offsets;
  std::vector<size_t> frame_line;
  std::istringstream in(sites);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("(+0x");
    if (at != std::string::npos && line.find(".so") == std::string::npos) {
      offsets.push_back(line.substr(at + 2, line.find(')', at) - at - 2));
      frame_line.push_back(lines.size());
    }
    lines.push_back(line);
  }
  if (offsets.empty()) return sites;
  char exe[4096];
  const ssize_t len = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return sites;
  std::string cmd = "addr2line -f -C -p -e '" + std::string(exe, size_t(len)) + "'";
  for (const std::string& o : offsets) cmd += " " + o;
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return sites;
  std::vector<std::string> names;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) names.emplace_back(buf, std::strcspn(buf, "\n"));
  if (::pclose(p) != 0 || names.size() != offsets.size()) return sites;
  for (size_t k = 0; k < names.size(); ++k) {
    const size_t cut = names[k].find(" at ??:?");  // no line numbers in a release build
    lines[frame_line[k]] = "  " + names[k].substr(0, cut);
  }
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// Counting from construction to destruction (the hook installed for as long).
struct Counting {
  Counting() {
    g_large = 0;
    g_sites.clear();
    zaya::set_allocation_hook(note_buffer);
    g_counting = true;
  }
  ~Counting() {
    g_counting = false;
    zaya::set_allocation_hook(nullptr);
  }
};

}  // namespace

// The replacements pair malloc/aligned_alloc with free, as the standard ones do; GCC, seeing both
// inlined into one function of this file, takes free for a mismatch.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(size_t n) {
  note_new(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  return operator new(n);
}
void* operator new(size_t n, std::align_val_t a) {
  note_new(n);
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

// The hook sees what operator new does not: a Buffer, an Arena and a HostBuffer made while
// counting are three counted allocations, each named with its call site; none once counting ends.
TEST(StepAllocations, BuffersArenasAndHostBuffersAreCounted) {
  {
    Counting counting;
    Buffer b(64);
    Arena a(1000);
    HostBuffer h(100, false, "test staging");
    EXPECT_EQ(g_large.load(), 3) << with_function_names(g_sites);
    EXPECT_NE(g_sites.find("Buffer (cpu) of 64 bytes"), std::string::npos) << g_sites;
    EXPECT_NE(g_sites.find("Buffer (cpu) of 1000 bytes"), std::string::npos) << g_sites;
    EXPECT_NE(g_sites.find("test staging (cpu) of 4096 bytes"), std::string::npos) << g_sites;
  }
  Buffer after(64);
  HostBuffer h(100, false, "after");
  EXPECT_EQ(g_large.load(), 3) << "counted after the hook was removed:\n"
                               << with_function_names(g_sites);
}

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
    {
      Counting counting;
      t.train_step();
      t.train_step();
    }
    EXPECT_EQ(g_large.load(), 0) << (muon ? "Muon" : "AdamW") << " steps allocated:\n"
                                 << with_function_names(g_sites);
  }
}

}  // namespace
}  // namespace zaya
