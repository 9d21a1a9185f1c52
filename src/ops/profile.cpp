#include "ops/profile.h"

#include <chrono>
#include <mutex>

namespace zaya::ops::profile {

namespace {

// A fixed table: op names are string literals, one slot per name, registered on first use.
constexpr int kSlots = 256;
struct Slot {
  const char* op = nullptr;
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> nanos{0};
};
Slot g_slots[kSlots];
int g_used = 0;
std::mutex g_register;

}  // namespace

namespace detail {

std::atomic<bool> on{false};
thread_local int depth = 0;

int slot(const char* op) {
  std::lock_guard<std::mutex> lock(g_register);
  for (int i = 0; i < g_used; ++i)
    if (std::string(g_slots[i].op) == op) return i;
  if (g_used == kSlots) return kSlots - 1;  // unreachable with today's ~60 ops; shares the last
  g_slots[g_used].op = op;
  return g_used++;
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
