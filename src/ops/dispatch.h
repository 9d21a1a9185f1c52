// The dispatch seam's machinery, shared by ops/ops.cpp (the model's ops) and ops/ops_memory.cpp
// (memory, reductions, optimizer updates): the device of a call, the GPU backend's declared
// support (ops/gpu/support.h), and the exhaustive `switch` that sends the call to ops::cpu::x or
// ops::gpu::x. Only those two files include this; they compile with -Werror=switch, so a new
// Device is an error until every op handles it.
//
// An op writes its argument list once: ZAYA_OP_DISPATCH(linear_forward, y, x, w, b, accumulate).
// The call's device is that of its Tensor arguments (other arguments are passed on untouched); a
// tensor that lives in host memory whatever the call's device is passed as host(t).
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

#include "core/assert.h"
#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/profile.h"
#if defined(ZAYA_HAS_GPU_BACKEND)
#include "ops/gpu/support.h"
#endif

namespace zaya::ops::detail {

// A tensor argument in host memory whatever the call's device (moe's offsets): the device check
// and the GPU's support check leave it out; the backend receives the tensor.
struct HostTensor {
  const Tensor& t;
  operator const Tensor&() const { return t; }
};
inline HostTensor host(const Tensor& t) {
  return {t};
}

template <class A>
inline constexpr bool is_tensor = std::is_same_v<std::remove_cvref_t<A>, Tensor>;

// The device of a call: that of its defined Tensor arguments, which must all agree (Cpu when none
// is defined). Mixed devices are a caller bug, so this asserts with the op's name.
template <class... Args>
Device call_device(const char* op, const Args&... args) {
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
  auto each = [&](const auto& a) {
    if constexpr (is_tensor<decltype(a)>) visit(a);
  };
  (each(args), ...);
  return first ? first->device : Device::Cpu;
}

#if defined(ZAYA_HAS_GPU_BACKEND)
// The GPU backend's support of this call (ops/gpu/support.h), over its Tensor arguments.
template <class... Args>
void check_gpu_support(const char* op, const gpu::Support& support, const Args&... args) {
  constexpr size_t n = (size_t(0) + ... + size_t(is_tensor<Args>));
  std::array<const Tensor*, n> tensors{};
  size_t i = 0;
  auto each = [&](const auto& a) {
    if constexpr (is_tensor<decltype(a)>) tensors[i++] = &a;
  };
  (each(args), ...);
  gpu::check_support(op, support, tensors);
}
#define ZAYA_GPU_SUPPORT_CHECK(name, ...) \
  ::zaya::ops::detail::check_gpu_support(#name, ::zaya::ops::gpu::support::name, __VA_ARGS__)
#else
// A build without a GPU backend: ops/gpu/no_gpu.cpp fails every GPU call.
#define ZAYA_GPU_SUPPORT_CHECK(name, ...) (void)0
#endif

}  // namespace zaya::ops::detail

// Checks the devices of the call's tensors (and, for the GPU, the backend's support), then calls
// the backend's NAME(ARGS...). Calls are timed while ops/profile.h's profiling is on (one slot per
// op name; a GPU call between two device synchronisations).
#define ZAYA_OP_DISPATCH(name, ...)                                               \
  switch (::zaya::ops::detail::call_device(#name, __VA_ARGS__)) {                 \
    case Device::Cpu: {                                                           \
      static const int profile_slot_ = ::zaya::ops::profile::detail::slot(#name); \
      ::zaya::ops::profile::Scope profile_scope_(profile_slot_);                  \
      return cpu::name(__VA_ARGS__);                                              \
    }                                                                             \
    case Device::Gpu: {                                                           \
      ZAYA_GPU_SUPPORT_CHECK(name, __VA_ARGS__);                                  \
      static const int profile_slot_ = ::zaya::ops::profile::detail::slot(#name); \
      ::zaya::ops::profile::Scope profile_scope_(profile_slot_, true);            \
      return gpu::name(__VA_ARGS__);                                              \
    }                                                                             \
  }                                                                               \
  ::zaya::assert_fail(__FILE__, __LINE__, #name, "unknown device")
