// Buffer and Arena (arena.h): 64-byte-aligned, zero-initialised allocations on a device, each
// reported to the allocation hook; an arena hands out aligned tensor views of its buffer by a bump
// pointer.
#include "core/arena.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace zaya {

namespace {

std::atomic<AllocationHook> g_allocation_hook{nullptr};

}  // namespace

AllocationHook set_allocation_hook(AllocationHook hook) noexcept {
  return g_allocation_hook.exchange(hook);
}

void note_allocation(size_t bytes, Device device, std::string_view what) noexcept {
  if (AllocationHook hook = g_allocation_hook.load(std::memory_order_relaxed))
    hook(bytes, device, what);
}

void DeviceFree::operator()(void* p) const {
  switch (device) {
    case Device::Cpu:
      std::free(p);
      return;
    case Device::Gpu:
      gpu::free(p);
      return;
  }
}

Buffer::Buffer(size_t bytes, Device device) : ptr_(nullptr, DeviceFree{device}), bytes_(bytes) {
  if (bytes == 0) return;
  note_allocation(bytes, device, "Buffer");
  void* p = nullptr;
  switch (device) {
    case Device::Cpu:
      p = std::aligned_alloc(64, Arena::aligned(bytes));
      if (!p) fail("out of memory allocating {} bytes", bytes);
      std::memset(p, 0, Arena::aligned(bytes));
      break;
    case Device::Gpu:
      p = gpu::alloc(Arena::aligned(bytes));  // zero-filled
      break;
  }
  ptr_.reset(p);
}

namespace {

void fill_zero_bytes(void* p, size_t bytes, Device device) {
  switch (device) {
    case Device::Cpu:
      std::memset(p, 0, bytes);
      return;
    case Device::Gpu:
      gpu::fill_zero(p, bytes);
      return;
  }
}

}  // namespace

void Buffer::zero() {
  if (ptr_) fill_zero_bytes(ptr_.get(), bytes_, device());
}

Tensor Arena::alloc(DType t, std::initializer_list<int64_t> dims) {
  Tensor view(nullptr, t, dims);
  size_t need = aligned(view.nbytes());
  ZAYA_ASSERT(used_ + need <= buf_.size(), "arena overflow: {} + {} > {}", used_, need,
              buf_.size());
  view.data = static_cast<char*>(buf_.data()) + used_;
  view.device = buf_.device();
  used_ += need;
  return view;
}

void device_copy(const Tensor& dst, const Tensor& src) {
  ZAYA_ASSERT(dst.dtype == src.dtype && dst.numel() == src.numel(), "device_copy: {} {} into {} {}",
              dtype_name(src.dtype), src.shape_str(), dtype_name(dst.dtype), dst.shape_str());
  const size_t bytes = src.nbytes();
  if (bytes == 0 || dst.data == src.data) return;
  if (dst.device == Device::Cpu && src.device == Device::Cpu)
    std::memcpy(dst.data, src.data, bytes);
  else
    gpu::copy(dst.data, dst.device, src.data, src.device, bytes);
}

void device_copy_async(const Tensor& dst, const Tensor& src) {
  if (dst.device != Device::Gpu || src.device != Device::Cpu) return device_copy(dst, src);
  ZAYA_ASSERT(dst.dtype == src.dtype && dst.numel() == src.numel(),
              "device_copy_async: {} {} into {} {}", dtype_name(src.dtype), src.shape_str(),
              dtype_name(dst.dtype), dst.shape_str());
  gpu::copy_to_device_async(dst.data, src.data, src.nbytes());
}

void device_fill_zero(const Tensor& t) {
  if (t.defined() && t.nbytes()) fill_zero_bytes(t.data, t.nbytes(), t.device);
}

}  // namespace zaya
