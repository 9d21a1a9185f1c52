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

#include "core/enum_words.h"

namespace zaya {

enum class Device : uint8_t { Cpu, Gpu };
template <>
struct EnumWords<Device> {
  static constexpr std::pair<Device, std::string_view> words[] = {{Device::Cpu, "cpu"},
                                                                  {Device::Gpu, "gpu"}};
};

inline std::string_view device_name(Device d) {
  return enum_word(d);
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
// A host→device copy that returns once it is issued: the bytes at src are read later, in stream
// order, so the host must leave them unchanged until a Fence recorded after this call has passed.
// From page-locked memory (pin_host) it is a DMA that runs while the host works on; from pageable
// memory the driver stages the bytes first (src is then free at once, but the call may wait).
void copy_to_device_async(void* dst, const void* src, size_t bytes);
// Waits until every GPU operation issued so far has finished (timing, benchmarks).
void synchronize();
// A point in the GPU's work: record() marks everything issued so far, wait() blocks the host until
// that has run (at once when nothing was recorded). The host's half of an asynchronous copy. In a
// build without a GPU backend, or where GPU work runs synchronously, both are no-ops.
class Fence {
 public:
  Fence() = default;
  ~Fence();
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;
  void record();
  void wait();

 private:
  void* event_ = nullptr;  // the backend's event, made by the first record()
};
// Page-locks the host memory [p, p + bytes) for every device (copies to and from it then run at
// the link's DMA rate instead of through the driver's pageable bounce buffers): the checkpoint
// staging of a GPU run. Returns false where it cannot (no GPU backend, device memory that is host
// memory, the driver refused): the memory stays usable, copies are just slower. unpin_host undoes
// a pin (before the memory is freed); both never throw.
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
// The GEMM library's plans so far: cuBLASLt's layouts and heuristic query, made on the host the
// first time a GEMM shape is seen (the MoE experts' row counts change every step, so new shapes
// keep coming), and the host seconds they took. Zero where the build has no cuBLASLt.
struct GemmPlanStats {
  int64_t plans = 0;
  double seconds = 0;
};
GemmPlanStats gemm_plan_stats() noexcept;
}  // namespace gpu

}  // namespace zaya
