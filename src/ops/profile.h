// Wall time per op, measured at the dispatch seam (ops/dispatch.h) while profiling is on: what
// `zaya bench step` splits a training step by. Off by default; then each op call costs one relaxed
// atomic load. Only the outermost op of a thread is timed (an op that calls another counts once).
// Counters are per op name and shared by all threads; call snapshot() between steps, not while
// ops run.
//
// GPU ops return before their kernels finish, so a GPU call (Scope with gpu = true) is timed
// between two gpu::synchronize() calls: exact attribution, but every op then waits for the device
// and the host no longer runs ahead, so a profiled step is slower than an unprofiled one (a sync
// costs the launch latency a queue would hide: tens of µs × the step's op calls). Time a step
// without profiling, and profile a separate one.
//
// A Region (ZAYA_PROFILE_REGION("gemm")) marks a part of an op, e.g. the GEMMs inside moe_forward:
// while profiling, its time is counted under "OP/REGION" ("moe_forward/gemm") and taken out of
// the op's own entry, so the entries of a snapshot never overlap. A region outside any timed op,
// or inside another region, is not counted. A GPU op's region synchronises like the op.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace zaya::ops::profile {

struct OpTime {
  std::string op;  // the op's name, e.g. "linear_forward", or "op/region" ("moe_forward/gemm")
  int64_t calls = 0;
  double seconds = 0;
};

void enable(bool on);
bool enabled();
void reset();                    // zeroes every counter
std::vector<OpTime> snapshot();  // ops called since reset(), by name

namespace detail {
extern std::atomic<bool> on;
// Registers `op` once (a static per call site) and returns its counter slot.
int slot(const char* op);
void add(int slot, double seconds);
double now();
void device_sync();  // gpu::synchronize(); nothing while an exception unwinds the stack
// Per thread: the timed op's nesting depth, whether it is a GPU call, and its regions' seconds.
extern thread_local int depth;
extern thread_local bool gpu_op;
extern thread_local int op_slot, region_depth;
extern thread_local double region_seconds;
void add_region(int op, int region, double seconds);
}  // namespace detail

// Times the enclosing op call when profiling is on and no op of this thread is already timed.
class Scope {
 public:
  explicit Scope(int slot, bool gpu = false) {
    if (!detail::on.load(std::memory_order_relaxed)) return;
    counted_ = true;
    if (detail::depth++ > 0) return;  // inside another op of this thread: that one is timed
    slot_ = slot;
    detail::gpu_op = gpu, detail::op_slot = slot, detail::region_seconds = 0;
    if (gpu) detail::device_sync();
    t0_ = detail::now();
  }
  ~Scope() noexcept(false) {  // a GPU error shows at the closing sync
    if (!counted_) return;
    --detail::depth;
    if (slot_ < 0) return;
    if (detail::gpu_op) detail::device_sync();
    detail::add(slot_, detail::now() - t0_ - detail::region_seconds);
    detail::op_slot = -1;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool counted_ = false;
  int slot_ = -1;
  double t0_ = 0;
};

// A part of the op this thread is timing (see the header); does nothing otherwise.
class Region {
 public:
  explicit Region(int slot) {
    if (!detail::on.load(std::memory_order_relaxed) || detail::op_slot < 0) return;
    entered_ = true;
    if (detail::region_depth++ > 0) return;  // inside another region: that one is timed
    slot_ = slot;
    if (detail::gpu_op) detail::device_sync();
    t0_ = detail::now();
  }
  ~Region() noexcept(false) {
    if (!entered_) return;
    --detail::region_depth;
    if (slot_ < 0) return;
    if (detail::gpu_op) detail::device_sync();
    const double s = detail::now() - t0_;
    detail::region_seconds += s;
    detail::add_region(detail::op_slot, slot_, s);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  bool entered_ = false;
  int slot_ = -1;
  double t0_ = 0;
};

}  // namespace zaya::ops::profile

#define ZAYA_PROFILE_CAT2(a, b) a##b
#define ZAYA_PROFILE_CAT(a, b) ZAYA_PROFILE_CAT2(a, b)
// Marks the rest of the enclosing block as the region NAME (a string literal) of the timed op.
#define ZAYA_PROFILE_REGION(name)                                  \
  static const int ZAYA_PROFILE_CAT(zaya_region_slot_, __LINE__) = \
      ::zaya::ops::profile::detail::slot(name);                    \
  const ::zaya::ops::profile::Region ZAYA_PROFILE_CAT(             \
      zaya_region_, __LINE__)(ZAYA_PROFILE_CAT(zaya_region_slot_, __LINE__))
