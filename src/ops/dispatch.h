// The dispatch seam's machinery, shared by ops/ops.cpp (the model's ops) and ops/ops_memory.cpp
// (memory, reductions, optimizer updates): the device of a call and the exhaustive `switch` that
// sends it to ops::cpu::x or ops::gpu::x. Only those two files include this; they compile with
// -Werror=switch, so a new Device is an error until every op handles it.
#pragma once
#include "core/assert.h"
#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/profile.h"

namespace zaya::ops::detail {

// The device of a call: that of its defined tensors, which must all agree (Cpu when none is
// defined). Mixed devices are a caller bug, so this asserts with the op's name.
template <class... Ts>
Device call_device(const char* op, const Ts&... ts) {
  const Tensor* first = nullptr;
  auto visit = [&](const Tensor& t) {
    if (!t.defined()) return;
    if (!first) {
      first = &t;
      return;
    }
    ZAYA_ASSERT(t.device == first->device, "{}: tensors on different devices ({} and {})", op,
                device_name(first->device), device_name(t.device));
  };
  (visit(ts), ...);
  return first ? first->device : Device::Cpu;
}

}  // namespace zaya::ops::detail

#define ZAYA_UNPAREN(...) __VA_ARGS__
// Checks the devices of TENSORS (a parenthesised list), then calls the backend's NAME(ARGS...).
// Calls are timed while ops/profile.h's profiling is on (one slot per op name; a GPU call between
// two device synchronisations).
#define ZAYA_OP_DISPATCH(name, tensors, ...)                                      \
  switch (::zaya::ops::detail::call_device(#name, ZAYA_UNPAREN tensors)) {        \
    case Device::Cpu: {                                                           \
      static const int profile_slot_ = ::zaya::ops::profile::detail::slot(#name); \
      ::zaya::ops::profile::Scope profile_scope_(profile_slot_);                  \
      return cpu::name(__VA_ARGS__);                                              \
    }                                                                             \
    case Device::Gpu: {                                                           \
      static const int profile_slot_ = ::zaya::ops::profile::detail::slot(#name); \
      ::zaya::ops::profile::Scope profile_scope_(profile_slot_, true);            \
      return gpu::name(__VA_ARGS__);                                              \
    }                                                                             \
  }                                                                               \
  ::zaya::assert_fail(__FILE__, __LINE__, #name, "unknown device")
