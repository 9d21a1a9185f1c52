// Owning memory. Buffer: one zero-initialised, 64-byte-aligned allocation on one device. Arena: a
// Buffer carved into tensors by a bump pointer (params, grads, optimizer state and activations are
// each one arena, so zeroing, copying and reducing them is one loop); its tensors carry its device.
// device_copy / device_fill_zero move and clear tensor memory on any device (a GPU side goes
// through core/device.h's entry points, which a CPU-only build answers with a clear error).
// Allocation accounting: every Buffer and HostBuffer (core/host_buffer.h) allocation is reported
// to an optional hook, so a test can see the memory they allocate (aligned_alloc, the GPU
// allocator, mmap), which a replaced operator new does not.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string_view>

#include "core/device.h"
#include "core/tensor.h"

namespace zaya {

// Called on the allocating thread before each Buffer and HostBuffer allocation (bytes > 0) with
// its size, device and what it is ("Buffer", or the HostBuffer's name). For tests (a warm training
// step allocates nothing): with no hook installed an allocation costs one relaxed atomic load more.
// The hook must not throw and must not allocate Buffers or HostBuffers itself.
using AllocationHook = void (*)(size_t bytes, Device device, std::string_view what);
// Installs `hook` (null removes it) for every thread; returns the previous one.
AllocationHook set_allocation_hook(AllocationHook hook) noexcept;
// Reports an allocation to the installed hook, if any (Buffer and HostBuffer call it).
void note_allocation(size_t bytes, Device device, std::string_view what) noexcept;

// Buffer's deleter: releases memory of the device it was allocated on.
struct DeviceFree {
  Device device = Device::Cpu;
  void operator()(void* p) const;
};

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes, Device device = Device::Cpu);
  void* data() const { return ptr_.get(); }
  size_t size() const { return bytes_; }
  Device device() const { return ptr_.get_deleter().device; }
  void zero();

 private:
  std::unique_ptr<void, DeviceFree> ptr_;
  size_t bytes_ = 0;
};

class Arena {
 public:
  Arena() = default;
  explicit Arena(size_t bytes, Device device = Device::Cpu) : buf_(bytes, device) {}
  // Rounds each allocation up to 64 bytes so every tensor starts cache-line aligned.
  static size_t aligned(size_t bytes) { return (bytes + 63) & ~size_t(63); }
  Tensor alloc(DType t, std::initializer_list<int64_t> dims);
  void reset() { used_ = 0; }
  void zero() { buf_.zero(); }
  size_t used() const { return used_; }
  size_t capacity() const { return buf_.size(); }
  void* base() const { return buf_.data(); }
  Device device() const { return buf_.device(); }

 private:
  Buffer buf_;
  size_t used_ = 0;
};

// dst = src, byte for byte, across devices: same dtype and element count (shapes may differ).
void device_copy(const Tensor& dst, const Tensor& src);
// device_copy that, from the host to a GPU, returns once the copy is issued
// (gpu::copy_to_device_async: src must stay unchanged until a gpu::Fence recorded after this call
// has passed); any other pair of devices is device_copy.
void device_copy_async(const Tensor& dst, const Tensor& src);
// Every byte of t = 0 (an undefined or empty tensor is a no-op).
void device_fill_zero(const Tensor& t);

}  // namespace zaya
