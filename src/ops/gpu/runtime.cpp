// The GPU runtime (ops/gpu/runtime.h) and core/device.h's GPU memory entry points: device
// selection (ZAYA_GPU_DEVICE, default 0), the one stream, the caching allocator and its report.
// Host code only (compiled by the C++ compiler against the vendor runtime's C API).
#include "ops/gpu/runtime.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/assert.h"
#include "core/device.h"
#include "ops/gpu/size_class.h"

namespace zaya::gpu {

void check_failed(const char* expr, const char* file, int line, const char* message) {
  throw Error(fmt::format("GPU error at {}:{}: {}: {}", file, line, expr, message));
}

namespace {

constexpr size_t kGiB = size_t(1) << 30;

// The chosen device and its stream, made on first use.
struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  int multiprocessors = 0;
  std::string name;
  size_t total_bytes = 0;
};

Context make_context() {
  Context c;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    fail("no {} device: {}", ZAYA_GPU_VENDOR,
         err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports none");
  if (const char* env = std::getenv("ZAYA_GPU_DEVICE")) {
    char* end = nullptr;
    const long d = std::strtol(env, &end, 10);
    if (end == env || *end || d < 0 || d >= count)
      fail("ZAYA_GPU_DEVICE={}: expected a device index in [0, {})", env, count);
    c.device = int(d);
  }
  ZAYA_GPU_CHECK(cudaSetDevice(c.device));
  cudaDeviceProp prop{};
  ZAYA_GPU_CHECK(cudaGetDeviceProperties(&prop, c.device));
  c.name = prop.name;
  c.multiprocessors = prop.multiProcessorCount;
  c.total_bytes = prop.totalGlobalMem;
  ZAYA_GPU_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  return c;
}

const Context& context() {
  static const Context c = make_context();
  // The current device is per host thread, and a thread other than the one that chose it (the
  // checkpoint writer's, pinning its staging) starts on device 0, where its first runtime call
  // would make a context of its own: on an 8-GPU node, every rank's on GPU 0. Each thread that
  // asks for the context is moved to the chosen device first.
  thread_local const bool bound = [] {
    ZAYA_GPU_CHECK(cudaSetDevice(c.device));
    return true;
  }();
  (void)bound;
  return c;
}

struct Allocator {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // class size → cached block
  std::unordered_map<void*, size_t> live;    // block → class size
  size_t in_use = 0, cached = 0, peak = 0;

  void* allocate(size_t bytes) {
    const size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = free_blocks.find(cls); it != free_blocks.end()) {
      void* p = it->second;
      free_blocks.erase(it);
      cached -= cls;
      return take(p, cls);
    }
    context();
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, cls);
    if (err == cudaErrorMemoryAllocation && !free_blocks.empty()) {
      (void)cudaGetLastError();  // clear the sticky-free error before retrying
      release_cache();
      err = cudaMalloc(&p, cls);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      fail("out of GPU memory: {} bytes asked for with {:.2f} GiB in use ({}: {})", cls,
           double(in_use) / double(kGiB), ZAYA_GPU_VENDOR, cudaGetErrorString(err));
    }
    return take(p, cls);
  }

  void* take(void* p, size_t cls) {
    live[p] = cls;
    in_use += cls;
    if (in_use > peak) peak = in_use;
    return p;
  }

  void release(void* p) noexcept {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(p);
    if (it == live.end()) assert_fail(__FILE__, __LINE__, "live", "freeing unknown GPU memory");
    free_blocks.emplace(it->second, p);
    in_use -= it->second;
    cached += it->second;
    live.erase(it);
  }

  // Returns cached blocks to the driver (after the stream is idle, so none is still in use).
  void release_cache() {
    (void)cudaStreamSynchronize(context().stream);
    for (auto& [cls, p] : free_blocks) (void)cudaFree(p);
    free_blocks.clear();
    cached = 0;
  }
};

Allocator& allocator() {
  static Allocator* a = new Allocator;  // never destroyed: blocks may be freed at exit
  return *a;
}

cudaMemcpyKind copy_kind(Device dst, Device src) {
  if (dst == Device::Gpu && src == Device::Gpu) return cudaMemcpyDeviceToDevice;
  return dst == Device::Gpu ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}

}  // namespace

cudaStream_t stream() {
  return context().stream;
}

void synchronize() {
  ZAYA_GPU_CHECK(cudaStreamSynchronize(stream()));
}

int multiprocessor_count() {
  return context().multiprocessors;
}

void* cached_alloc(size_t bytes) {
  return allocator().allocate(bytes);
}

void cached_free(void* p) noexcept {
  if (p) allocator().release(p);
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  ZAYA_GPU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  synchronize();
}

// ---------------------------------------------------------------- core/device.h

void* alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = cached_alloc(bytes);
  ZAYA_GPU_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
  return p;
}

void free(void* p) noexcept {
  cached_free(p);
}

void fill_zero(void* p, size_t bytes) {
  if (bytes) ZAYA_GPU_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  ZAYA_ASSERT(dst_device == Device::Gpu || src_device == Device::Gpu,
              "gpu::copy between two host buffers");
  if (bytes == 0) return;
  ZAYA_GPU_CHECK(cudaMemcpyAsync(dst, src, bytes, copy_kind(dst_device, src_device), stream()));
  // A host side may be read or freed as soon as this returns; device-to-device stays ordered.
  if (dst_device != src_device) synchronize();
}

void copy_to_device_async(void* dst, const void* src, size_t bytes) {
  if (bytes) ZAYA_GPU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
}

cudaStream_t comm_stream() {
  static const cudaStream_t s = [] {
    (void)stream();  // the context first: the device is chosen there
    cudaStream_t c = nullptr;
    ZAYA_GPU_CHECK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    return c;
  }();
  return s;
}

StreamEvent::StreamEvent(cudaStream_t recorded_on) {
  cudaEvent_t e = nullptr;
  ZAYA_GPU_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
  ZAYA_GPU_CHECK(cudaEventRecord(e, recorded_on));
}

StreamEvent::~StreamEvent() {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));  // released once it has completed
}

void StreamEvent::make_wait(cudaStream_t other) const {
  ZAYA_GPU_CHECK(cudaStreamWaitEvent(other, static_cast<cudaEvent_t>(event_), 0));
}

bool StreamEvent::done() const {
  const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (q == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is no error: clear it for the next launch check
    return false;
  }
  ZAYA_GPU_CHECK(q);
  return true;
}

Fence::~Fence() {
  if (event_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void Fence::record() {
  if (!event_) {
    cudaEvent_t e = nullptr;
    ZAYA_GPU_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    event_ = e;
  }
  ZAYA_GPU_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream()));
}

void Fence::wait() {
  if (event_) ZAYA_GPU_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

bool available() noexcept {
  try {
    context();
    return true;
  } catch (...) {
    return false;
  }
}

bool pin_host(void* p, size_t bytes) noexcept {
  if (!p || bytes == 0 || !available()) return false;
  // Portable: pinned for every device context, whichever thread registers it (the staging is
  // allocated on a background thread, moved to this process's device by available()).
  if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) == cudaSuccess) return true;
  (void)cudaGetLastError();  // not sticky: the copies still work from pageable memory
  return false;
}

void unpin_host(void* p) noexcept {
  if (p && cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

std::string describe() {
  try {
    const Context& c = context();
    int runtime = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    return fmt::format("{} (device {}), {} multiprocessors, {:.1f} GiB, {} runtime {}.{}", c.name,
                       c.device, c.multiprocessors, double(c.total_bytes) / double(kGiB),
                       ZAYA_GPU_VENDOR, runtime / 1000, runtime % 1000 / 10);
  } catch (const Error& e) {
    return e.what();
  }
}

std::string memory_report() {
  Allocator& a = allocator();
  size_t free_bytes = 0, total_bytes = 0;
  (void)cudaMemGetInfo(&free_bytes, &total_bytes);
  std::lock_guard<std::mutex> lock(a.mu);
  return fmt::format(
      "GPU memory: {:.3f} GiB in use, {:.3f} GiB cached, {:.3f} GiB peak; device "
      "{:.1f} of {:.1f} GiB free",
      double(a.in_use) / double(kGiB), double(a.cached) / double(kGiB),
      double(a.peak) / double(kGiB), double(free_bytes) / double(kGiB),
      double(total_bytes) / double(kGiB));
}

}  // namespace zaya::gpu
