// Where a tensor's memory lives. zaya is eager: every Tensor names its device, every arena is one
// allocation on one device, and ops/ops.cpp is the only place that branches on it (an exhaustive
// `switch`, so adding a device is a compile error until every op handles it).
//
// The GPU memory entry points below are the backend's (ops/gpu/). A build without a GPU links
// ops/gpu/no_gpu.cpp, where each of them throws zaya::Error ("this build has no GPU backend: …").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zaya {

enum class Device : uint8_t { Cpu, Gpu };

inline std::string_view device_name(Device d) {
  switch (d) {
    case Device::Cpu:
      return "cpu";
    case Device::Gpu:
      return "gpu";
  }
  return "?";
}

// GPU memory of the backend in ops/gpu/ (declared here so core's Buffer can own device memory).
namespace gpu {
// `bytes` of device memory, zero-filled, 64-byte aligned (never null for bytes > 0).
void* alloc(size_t bytes);
// Releases alloc's memory (null is a no-op).
void free(void* p) noexcept;
void fill_zero(void* p, size_t bytes);
// Copies between any two devices; at least one side is Device::Gpu. Returns once the bytes are
// at dst (the host may then read or free its side).
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Waits until every GPU operation issued so far has finished (timing, benchmarks).
void synchronize();
// Page-locks the host memory [p, p + bytes) for every device (copies to and from it then run at
// the link's DMA rate instead of through the driver's pageable bounce buffers): the checkpoint
// staging of a GPU run. Returns false where it cannot (no GPU backend, the emulator, the driver
// refused): the memory stays usable, copies are just slower. unpin_host undoes a pin (before the
// memory is freed); both never throw.
bool pin_host(void* p, size_t bytes) noexcept;
void unpin_host(void* p) noexcept;
// Whether this build has a GPU backend and a device to run it on (false in a CPU-only build, or
// where the driver reports no device). Never throws; tests labelled `gpu` skip when false.
bool available() noexcept;
// One line: the device in use ("NVIDIA H200, 132 SMs, 139.8 GiB, CUDA 13.0") or why there is
// none ("this build has no GPU backend", "no CUDA device: …").
std::string describe();
// The caching allocator's figures: in use, cached, peak, device total/free.
std::string memory_report();
}  // namespace gpu

}  // namespace zaya
