// The profiler's counters (ops/profile.h): a fixed table of slots, registered under a mutex on
// first use, counted with relaxed atomics.
#include "ops/profile.h"

#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

#include "core/device.h"

namespace zaya::ops::profile {

namespace {

// A fixed table: one slot per op name or "op/region" pair, registered on first use.
constexpr int kSlots = 256;
struct Slot {
  std::string op;
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> nanos{0};
};
Slot g_slots[kSlots];
int g_used = 0;
std::mutex g_register;
std::map<std::pair<int, int>, int> g_pairs;  // (op slot, region slot) → the pair's slot

int register_locked(const std::string& op) {
  for (int i = 0; i < g_used; ++i)
    if (g_slots[i].op == op) return i;
  if (g_used == kSlots) return kSlots - 1;  // unreachable with today's ~60 ops; shares the last
  g_slots[g_used].op = op;
  return g_used++;
}

}  // namespace

namespace detail {

std::atomic<bool> on{false};
thread_local int depth = 0;
thread_local bool gpu_op = false;
thread_local int op_slot = -1, region_depth = 0;
thread_local double region_seconds = 0;

int slot(const char* op) {
  std::lock_guard<std::mutex> lock(g_register);
  return register_locked(op);
}

void add_region(int op, int region, double seconds) {
  int s;
  {
    std::lock_guard<std::mutex> lock(g_register);
    auto it = g_pairs.find({op, region});
    if (it == g_pairs.end())
      it = g_pairs
               .emplace(std::pair{op, region},
                        register_locked(g_slots[op].op + "/" + g_slots[region].op))
               .first;
    s = it->second;
  }
  add(s, seconds);
}

void device_sync() {
  if (std::uncaught_exceptions() == 0) gpu::synchronize();
}

void add(int s, double seconds) {
  g_slots[s].calls.fetch_add(1, std::memory_order_relaxed);
  g_slots[s].nanos.fetch_add(int64_t(seconds * 1e9), std::memory_order_relaxed);
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace detail

void enable(bool on) {
  detail::on.store(on, std::memory_order_relaxed);
}

bool enabled() {
  return detail::on.load(std::memory_order_relaxed);
}

void reset() {
  std::lock_guard<std::mutex> lock(g_register);
  for (int i = 0; i < g_used; ++i) g_slots[i].calls = 0, g_slots[i].nanos = 0;
}

std::vector<OpTime> snapshot() {
  std::lock_guard<std::mutex> lock(g_register);
  std::vector<OpTime> out;
  for (int i = 0; i < g_used; ++i)
    if (g_slots[i].calls > 0)
      out.push_back(
          {g_slots[i].op, g_slots[i].calls.load(), double(g_slots[i].nanos.load()) * 1e-9});
  return out;
}

}  // namespace zaya::ops::profile
