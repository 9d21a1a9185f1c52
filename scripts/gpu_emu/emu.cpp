// GPU emulator (scripts/gpu_emu/): the fiber scheduler behind ::emu::launch, the runtime of
// ops/gpu/runtime.h (stream, Scratch's cached allocator, copy_to_host) and core/device.h's GPU
// memory entry points, over host memory. The EMU build compiles it in place of
// src/ops/gpu/runtime.cpp (emu.cmake); cuBLASLt is absent there (src/ops/gpu/no_blaslt.cpp).
//
// A launch runs its blocks one after another (ZAYA_EMU_REVERSE=1: last block first, and the
// threads of a block in reverse order too). In a block every GPU thread is a fiber; a fiber runs
// until it reaches __syncthreads, a warp shuffle, or its end. A barrier opens when every thread
// of the block (of the warp, for a shuffle) has reached it; anything else is reported as the
// bug it is on a GPU: __syncthreads or a full-warp shuffle reached by only some threads, a
// shuffle reading a lane that has exited or does not exist, a bad launch configuration.
//
// ZAYA_EMU_PROTECT=1: device allocations are their own mappings, PROT_NONE while no launch or
// runtime call (copy, fill, cudaMemcpy/Memset) runs, so host code that reads or writes device
// memory directly (which would fault or read garbage on a GPU) stops with SIGSEGV and a message
// naming the buffer and the faulting code (a backtrace).
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/assert.h"
#include "core/device.h"
#include "ops/gpu/runtime.h"

// ---------------------------------------------------------------- fiber switch (x86-64 SysV)
extern "C" void zaya_emu_switch(void** save_sp, void* load_sp);
extern "C" void zaya_emu_trampoline();
asm(R"(
.text
.p2align 4
.globl zaya_emu_switch
.type zaya_emu_switch,@function
zaya_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr 8(%rsp)
    fldcw (%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size zaya_emu_switch,.-zaya_emu_switch
.globl zaya_emu_trampoline
.type zaya_emu_trampoline,@function
zaya_emu_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
.size zaya_emu_trampoline,.-zaya_emu_trampoline
)");

namespace emu {
namespace {

const int kWarpLanes = [] {
  const char* v = std::getenv("ZAYA_EMU_WARP");
  return v && std::string(v) == "64" ? 64 : 32;
}();
constexpr size_t kStackBytes = size_t(256) << 10;
constexpr size_t kSmemBytes = size_t(228) << 10;  // H200: 227 KiB per block, opt-in

enum class State : uint8_t { Ready, AtBlock, AtWarp, Done };

struct Fiber {
  void* sp = nullptr;
  char* stack = nullptr;
  State state = State::Ready;
  uint3 idx{};
  uint32_t shuffles = 0;  // shuffles done: picks the half of the double-buffered lane slots
};

struct Launch {
  const char* kernel = "";
  const char* file = "";
  int line = 0;
  Body body = nullptr;
  void* closure = nullptr;
  std::vector<Fiber> fibers;
  int current = -1;
  void* scheduler_sp = nullptr;
  std::exception_ptr error;
  std::vector<uint64_t> slots[2];  // [parity][thread]
  alignas(64) unsigned char smem[kSmemBytes];
};

Launch& L() {
  static Launch* l = new Launch;
  return *l;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && *v != '0';
}
const bool kReverse = env_flag("ZAYA_EMU_REVERSE");
bool in_launch = false;
cudaError_t pending_error = cudaSuccess;
size_t smem_opt_in = 48 << 10;

[[noreturn]] void emu_fail(const std::string& what) {
  Launch& l = L();
  throw std::runtime_error(fmt::format("gpu emulator: {} ({}:{}: {}<<<…>>>, block ({}, {}, {}))",
                                       what, l.file, l.line, l.kernel, blockIdx.x, blockIdx.y,
                                       blockIdx.z));
}

void fiber_main(void* arg) {
  Launch& l = L();
  try {
    l.body(l.closure);
  } catch (...) {
    if (!l.error) l.error = std::current_exception();
  }
  Fiber& f = l.fibers[size_t(reinterpret_cast<intptr_t>(arg))];
  f.state = State::Done;
  zaya_emu_switch(&f.sp, l.scheduler_sp);
  std::abort();  // never resumed
}

char* stack_for(size_t t) {
  static std::vector<char*> stacks;
  while (stacks.size() <= t) {
    void* p =
        mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("gpu emulator: cannot map a fiber stack");
    stacks.push_back(static_cast<char*>(p));
  }
  return stacks[t];
}

void start_fiber(Fiber& f, size_t t) {
  auto* top = reinterpret_cast<uint64_t*>(f.stack + kStackBytes);
  uint64_t* sp = top - 11;  // 88 bytes: after the switch's pops and ret, rsp is 16-aligned
  uint16_t cw;
  uint32_t csr;
  asm volatile("fnstcw %0" : "=m"(cw));
  asm volatile("stmxcsr %0" : "=m"(csr));
  std::memset(sp, 0, 88);
  std::memcpy(sp, &cw, 2);
  std::memcpy(reinterpret_cast<char*>(sp) + 8, &csr, 4);
  sp[2] = 0;                                                 // r15
  sp[3] = 0;                                                 // r14
  sp[4] = reinterpret_cast<uint64_t>(&fiber_main);           // r13: the function
  sp[5] = uint64_t(t);                                       // r12: its argument
  sp[6] = 0;                                                 // rbx
  sp[7] = 0;                                                 // rbp
  sp[8] = reinterpret_cast<uint64_t>(&zaya_emu_trampoline);  // return address
  f.sp = sp;
  f.state = State::Ready;
  f.shuffles = 0;
}

void resume(Launch& l, int t) {
  Fiber& f = l.fibers[size_t(t)];
  l.current = t;
  threadIdx = f.idx;
  zaya_emu_switch(&l.scheduler_sp, f.sp);
  l.current = -1;
}

void yield(State s) {
  Launch& l = L();
  if (l.current < 0) throw std::logic_error("gpu emulator: barrier outside a kernel");
  Fiber& f = l.fibers[size_t(l.current)];
  f.state = s;
  zaya_emu_switch(&f.sp, l.scheduler_sp);
}

// Runs one block to its end.
void run_block(Launch& l) {
  const int n = int(l.fibers.size());
  const int warps = (n + kWarpLanes - 1) / kWarpLanes;
  for (int t = 0; t < n; ++t) start_fiber(l.fibers[size_t(t)], size_t(t));
  for (;;) {
    if (kReverse)
      for (int t = n - 1; t >= 0; --t) {
        if (l.fibers[size_t(t)].state == State::Ready) resume(l, t);
      }
    else
      for (int t = 0; t < n; ++t)
        if (l.fibers[size_t(t)].state == State::Ready) resume(l, t);
    if (l.error) std::rethrow_exception(l.error);
    int at_block = 0, done = 0;
    bool released = false;
    for (int w = 0; w < warps; ++w) {
      const int t0 = w * kWarpLanes, t1 = std::min(n, t0 + kWarpLanes);
      int at_warp = 0, w_done = 0, w_block = 0;
      for (int t = t0; t < t1; ++t) {
        const State s = l.fibers[size_t(t)].state;
        at_warp += s == State::AtWarp;
        w_done += s == State::Done;
        w_block += s == State::AtBlock;
      }
      at_block += w_block;
      done += w_done;
      if (at_warp == 0) continue;
      if (at_warp == t1 - t0) {
        for (int t = t0; t < t1; ++t) l.fibers[size_t(t)].state = State::Ready;
        released = true;
      } else if (w_block == 0) {
        emu_fail(
            fmt::format("warp {}: {} lanes wait at a full-warp shuffle/__syncwarp while {} "
                        "lanes have exited (the mask names every lane)",
                        w, at_warp, w_done));
      } else {
        emu_fail(
            fmt::format("warp {}: {} lanes wait at a warp shuffle, {} at __syncthreads "
                        "(divergent barrier: deadlock on a GPU)",
                        w, at_warp, w_block));
      }
    }
    if (released) continue;
    if (done == n) return;
    if (at_block + done == n) {
      if (done > 0)
        emu_fail(
            fmt::format("__syncthreads reached by {} threads after {} threads of the block "
                        "returned (a barrier in divergent code)",
                        at_block, done));
      for (auto& f : l.fibers) f.state = State::Ready;
      continue;
    }
    emu_fail("deadlock (threads wait at different barriers)");
  }
}

}  // namespace

int warp_lanes() {
  return L().current >= 0 ? kWarpLanes : 32;
}

int lane() {
  Launch& l = L();
  return l.current % kWarpLanes;
}

void* dynamic_smem() {
  return L().smem;
}

void sync_block() {
  yield(State::AtBlock);
}

void sync_warp() {
  yield(State::AtWarp);
}

uint64_t shuffle_bits(uint64_t bits, int src_lane) {
  Launch& l = L();
  const int t = l.current;
  Fiber& f = l.fibers[size_t(t)];
  auto& slots = l.slots[f.shuffles & 1];
  slots[size_t(t)] = bits;
  ++f.shuffles;
  yield(State::AtWarp);
  const int src = t / kWarpLanes * kWarpLanes + src_lane;
  if (src >= int(l.fibers.size()))
    emu_fail(fmt::format("thread {} shuffles from lane {}, which does not exist in a block of {}",
                         t, src_lane, l.fibers.size()));
  return slots[size_t(src)];
}

void launch_impl(const char* kernel, const char* file, int line, dim3 grid, dim3 block,
                 size_t dynamic_smem, Body body, void* closure) {
  Launch& l = L();
  l.kernel = kernel;
  l.file = file;
  l.line = line;
  if (in_launch) emu_fail("a launch inside a kernel");
  const DeviceAccess open;  // kernels read device memory (ZAYA_EMU_PROTECT)
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  blockIdx = {0, 0, 0};
  if (threads == 0 || threads > 1024 || block.z > 64)
    emu_fail(fmt::format("block ({}, {}, {}): 1 to 1024 threads", block.x, block.y, block.z));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535)
    emu_fail(fmt::format("grid ({}, {}, {}) out of the limits", grid.x, grid.y, grid.z));
  if (dynamic_smem > kSmemBytes - 1024 || dynamic_smem > smem_opt_in)
    emu_fail(
        fmt::format("{} bytes of dynamic shared memory (over 48 KiB needs "
                    "cudaFuncSetAttribute; 227 KiB at most)",
                    dynamic_smem));
  gridDim = grid;
  blockDim = block;
  l.body = body;
  l.closure = closure;
  l.error = nullptr;
  l.fibers.resize(size_t(threads));
  for (auto& s : l.slots) s.assign(size_t(threads), 0);
  for (size_t t = 0; t < threads; ++t) {
    Fiber& f = l.fibers[t];
    f.stack = stack_for(t);
    f.idx = {unsigned(t % block.x), unsigned(t / block.x % block.y),
             unsigned(t / (uint64_t(block.x) * block.y))};
  }
  in_launch = true;
  struct Reset {
    ~Reset() { in_launch = false; }
  } reset;
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint64_t b = kReverse ? blocks - 1 - i : i;
    blockIdx = {unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
                unsigned(b / (uint64_t(grid.x) * grid.y))};
    if (dynamic_smem) std::memset(l.smem, 0xff, dynamic_smem);  // unwritten shared memory shows
    run_block(l);
  }
}

cudaError_t last_error() {
  const cudaError_t e = pending_error;
  pending_error = cudaSuccess;
  return e;
}

void set_dynamic_smem_limit(const void*, size_t bytes) {
  smem_opt_in = std::max(smem_opt_in, bytes);
}

}  // namespace emu

// ---------------------------------------------------------------- ops/gpu/runtime.h, core/device.h
namespace zaya::gpu {

namespace {

// Every block carries a header (its size) and 64 guard bytes after its end, checked when freed:
// a kernel writing past the end of a buffer shows.
constexpr size_t kHeader = 64, kGuard = 64;
constexpr unsigned char kGuardByte = 0xa5;

std::mutex mu;
size_t in_use = 0, peak = 0;

// ZAYA_EMU_PROTECT: every live mapping (base → length), and how many DeviceAccess scopes are open.
const bool kProtect = [] {
  const char* v = std::getenv("ZAYA_EMU_PROTECT");
  return v && *v && *v != '0';
}();
std::unordered_map<unsigned char*, size_t> mappings;
int open_depth = 0;

size_t mapping_bytes(size_t bytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return (kHeader + bytes + kGuard + page - 1) / page * page;
}

void set_protection(unsigned char* base, size_t length, bool readable) {
  if (::mprotect(base, length, readable ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
    std::perror("gpu emulator: mprotect");
    std::abort();
  }
}

// A fault in a protected device buffer: host code touched device memory.
void on_segv(int, siginfo_t* info, void*) {
  auto* at = static_cast<unsigned char*>(info->si_addr);
  for (const auto& [base, length] : mappings)
    if (at >= base && at < base + length) {
      char line[200];
      const int n = std::snprintf(line, sizeof line,
                                  "gpu emulator (ZAYA_EMU_PROTECT): host code touched device "
                                  "memory: byte %td of a device buffer, outside any launch or "
                                  "copy; backtrace:\n",
                                  at - base - ptrdiff_t(kHeader));
      if (::write(2, line, size_t(n)) < 0) break;
      void* frames[48];
      backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
      break;
    }
  ::signal(SIGSEGV, SIG_DFL);
  ::raise(SIGSEGV);
}

void install_segv_handler() {
  static const bool once = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, nullptr);
    return true;
  }();
  (void)once;
}

void* raw_alloc(size_t bytes, int fill) {
  unsigned char* base = nullptr;
  if (kProtect) {
    install_segv_handler();
    void* m = ::mmap(nullptr, mapping_bytes(bytes), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) fail("gpu emulator: out of host memory ({} bytes)", bytes);
    base = static_cast<unsigned char*>(m);
  } else {
    base = static_cast<unsigned char*>(
        std::aligned_alloc(64, kHeader + bytes + kGuard + 63 & ~size_t(63)));
  }
  if (!base) fail("gpu emulator: out of host memory ({} bytes)", bytes);
  std::memcpy(base, &bytes, sizeof bytes);
  std::memset(base + kHeader, fill, bytes);
  std::memset(base + kHeader + bytes, kGuardByte, kGuard);
  std::lock_guard<std::mutex> lock(mu);
  in_use += bytes;
  peak = std::max(peak, in_use);
  if (kProtect) {
    mappings.emplace(base, mapping_bytes(bytes));
    if (open_depth == 0) set_protection(base, mapping_bytes(bytes), false);
  }
  return base + kHeader;
}

void raw_free(void* p) noexcept {
  if (!p) return;
  auto* base = static_cast<unsigned char*>(p) - kHeader;
  size_t length = 0;
  if (kProtect) {
    std::lock_guard<std::mutex> lock(mu);
    length = mappings.at(base);
    mappings.erase(base);
    set_protection(base, length, true);
  }
  size_t bytes;
  std::memcpy(&bytes, base, sizeof bytes);
  for (size_t i = 0; i < kGuard; ++i)
    if (base[kHeader + bytes + i] != kGuardByte) {
      std::fprintf(stderr,
                   "gpu emulator: a kernel wrote past the end of a device buffer of %zu bytes "
                   "(byte %zu after it)\n",
                   bytes, i);
      std::abort();
    }
  {
    std::lock_guard<std::mutex> lock(mu);
    in_use -= bytes;
  }
  if (kProtect)
    ::munmap(base, length);
  else
    std::free(base);
}

}  // namespace
}  // namespace zaya::gpu

namespace emu {

void device_open() {
  using namespace zaya::gpu;
  if (!kProtect) return;
  std::lock_guard<std::mutex> lock(mu);
  if (open_depth++ == 0)
    for (const auto& [base, length] : mappings) set_protection(base, length, true);
}

void device_close() {
  using namespace zaya::gpu;
  if (!kProtect) return;
  std::lock_guard<std::mutex> lock(mu);
  if (--open_depth == 0)
    for (const auto& [base, length] : mappings) set_protection(base, length, false);
}

}  // namespace emu

namespace zaya::gpu {

void check_failed(const char* expr, const char* file, int line, const char* message) {
  throw Error(fmt::format("GPU error at {}:{}: {}: {}", file, line, expr, message));
}

cudaStream_t stream() {
  return nullptr;
}

int multiprocessor_count() {
  static const int n = [] {
    const char* v = std::getenv("ZAYA_EMU_SMS");
    return v ? std::max(1, std::atoi(v)) : 132;
  }();
  return n;
}

// Scratch: poisoned with 0xff bytes (NaN as f32/f64, -1 as integers), so a kernel reading what
// nothing wrote shows.
void* cached_alloc(size_t bytes) {
  return bytes ? raw_alloc(bytes, 0xff) : nullptr;
}

void cached_free(void* p) noexcept {
  raw_free(p);
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  const emu::DeviceAccess open;
  if (bytes) std::memcpy(dst, src, bytes);
}

void* alloc(size_t bytes) {
  return bytes ? raw_alloc(bytes, 0) : nullptr;
}

void free(void* p) noexcept {
  raw_free(p);
}

void fill_zero(void* p, size_t bytes) {
  const emu::DeviceAccess open;
  if (bytes) std::memset(p, 0, bytes);
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  ZAYA_ASSERT(dst_device == Device::Gpu || src_device == Device::Gpu,
              "gpu::copy between two host buffers");
  const emu::DeviceAccess open;
  if (bytes) std::memmove(dst, src, bytes);
}

void copy_to_device_async(void* dst, const void* src, size_t bytes) {
  copy(dst, Device::Gpu, src, Device::Cpu, bytes);
}

void synchronize() {}

// Every emulated kernel and copy has finished when its call returns: one stream is enough, and
// no event has anything to order.
cudaStream_t comm_stream() {
  return nullptr;
}
StreamEvent::StreamEvent(cudaStream_t) {}
StreamEvent::~StreamEvent() = default;
void StreamEvent::make_wait(cudaStream_t) const {}
bool StreamEvent::done() const {
  return true;
}

Fence::~Fence() = default;
void Fence::record() {}
void Fence::wait() {}

bool available() noexcept {
  return true;
}

bool pin_host(void* /*p*/, size_t /*bytes*/) noexcept {
  return false;  // device memory is host memory here: nothing to lock
}

void unpin_host(void* /*p*/) noexcept {}

std::string describe() {
  return fmt::format("gpu emulator (scripts/gpu_emu): fibers on the host, {}-lane warps, {} SMs",
                     emu::kWarpLanes, multiprocessor_count());
}

std::string memory_report() {
  std::lock_guard<std::mutex> lock(mu);
  return fmt::format("GPU memory (emulated): {:.3f} GiB in use, {:.3f} GiB peak",
                     double(in_use) / double(size_t(1) << 30),
                     double(peak) / double(size_t(1) << 30));
}

}  // namespace zaya::gpu
