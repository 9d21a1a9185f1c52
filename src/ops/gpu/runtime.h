// The GPU runtime every kernel file uses (fmt-free, so nvcc compiles it): the current device's
// one stream, error checks with their location, scratch memory from the caching allocator, and
// the device's properties. Implemented in ops/gpu/runtime.cpp.
//
// zaya is eager and single-stream: every kernel, copy and GEMM goes onto stream() in program
// order, so a buffer freed after its last use can be handed out again at once (the stream orders
// the reuse). Host reads of device results (scalars of sum, copies to the host) synchronise.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.h"  // alloc, free, copy, synchronize, available
#include "ops/gpu/vendor.h"

namespace zaya::gpu {

// Raises zaya::Error "GPU error at FILE:LINE: EXPR: MESSAGE" (the vendor's error string).
[[noreturn]] void check_failed(const char* expr, const char* file, int line, const char* message);

// The stream all work is issued on (created, with the device chosen, on first use).
cudaStream_t stream();

// The NCCL group's stream (dist/nccl.cpp; created on first use, on stream()'s device): its
// collectives run there, overlapping the work of stream(), ordered against it by StreamEvents.
cudaStream_t comm_stream();

// An event recorded on a stream at construction: make_wait(other) lets the work queued on
// `other` from then on start only after the work recorded here has finished (the host does not
// wait). Destroying it is safe at any time.
class StreamEvent {
 public:
  explicit StreamEvent(cudaStream_t recorded_on);
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  void make_wait(cudaStream_t other) const;
  // Whether the recorded work has finished (a query: never waits); a failed stream throws.
  bool done() const;

 private:
  void* event_ = nullptr;
};

// Streaming multiprocessors (CUs on AMD) of the current device: for grid sizes.
int multiprocessor_count();

// Device memory from the caching allocator: blocks are kept after release and handed out again
// for requests of their size class; on exhaustion the cache is emptied and the request retried.
// Not zero-filled (gpu::alloc of core/device.h is: it clears what this returns).
void* cached_alloc(size_t bytes);
void cached_free(void* p) noexcept;

// A temporary device buffer of a kernel's entry point (released to the cache at scope end; safe
// because all work is on one stream).
class Scratch {
 public:
  explicit Scratch(size_t bytes) : p_(bytes ? cached_alloc(bytes) : nullptr) {}
  ~Scratch() { cached_free(p_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_;
};

// Copies `bytes` from device memory to the host and waits for them (a scalar result).
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace zaya::gpu

// Checks a vendor runtime call: ZAYA_GPU_CHECK(cudaMalloc(&p, n)).
#define ZAYA_GPU_CHECK(expr)                                                                   \
  do {                                                                                         \
    const cudaError_t zaya_gpu_err_ = (expr);                                                  \
    if (zaya_gpu_err_ != cudaSuccess)                                                          \
      ::zaya::gpu::check_failed(#expr, __FILE__, __LINE__, cudaGetErrorString(zaya_gpu_err_)); \
  } while (0)

// After a kernel launch: a bad configuration (too many threads, too much shared memory) shows
// here; faults inside the kernel show at the next synchronising call.
#define ZAYA_GPU_LAUNCH_CHECK() ZAYA_GPU_CHECK(cudaGetLastError())
