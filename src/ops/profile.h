// Wall time per op, measured at the dispatch seam (ops/dispatch.h) while profiling is on: what
// `zaya bench step` splits a training step by. Off by default; then each op call costs one relaxed
// atomic load. Only the outermost op of a thread is timed (an op that calls another counts once),
// and only CPU calls (a GPU op returns before its kernels finish). Counters are per op name and
// shared by all threads; call snapshot() between steps, not while ops run.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace zaya::ops::profile {

struct OpTime {
  std::string op;  // the op's name, e.g. "linear_forward"
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
extern thread_local int depth;
}  // namespace detail

// Times the enclosing op call when profiling is on and no op of this thread is already timed.
class Scope {
 public:
  explicit Scope(int slot) {
    if (!detail::on.load(std::memory_order_relaxed)) return;
    counted_ = true;
    if (detail::depth++ > 0) return;  // inside another op of this thread: that one is timed
    slot_ = slot;
    t0_ = detail::now();
  }
  ~Scope() {
    if (!counted_) return;
    --detail::depth;
    if (slot_ >= 0) detail::add(slot_, detail::now() - t0_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool counted_ = false;
  int slot_ = -1;
  double t0_ = 0;
};

}  // namespace zaya::ops::profile
