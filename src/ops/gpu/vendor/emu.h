// The GPU emulator's side of the one GPU source tree (ZAYA_GPU=EMU, scripts/gpu_emu/): CUDA's
// names as the kernels use them, for the host's C++ compiler, so that the kernels of src/ops/gpu/
// run on the CPU against the GPU tests. Each GPU thread of a block is a fiber (its own stack, one
// OS thread for all): __syncthreads and warp shuffles switch fibers, the blocks of a launch run
// one after another, device memory is host memory. The build rewrites every
// `k<<<grid, block, smem, stream>>>(args)` into ::emu::launch(...) (scripts/gpu_emu/transform.py);
// the scheduler and the runtime are scripts/gpu_emu/emu.cpp. A check of the kernels' code, not of
// their speed: no build that runs on a GPU includes this.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define ZAYA_GPU_VENDOR "EMU"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __constant__ static
#define __align__(n) alignas(n)

// ---------------------------------------------------------------- vector types and built-ins
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
inline float2 make_float2(float a, float b) {
  return {a, b};
}
inline float4 make_float4(float a, float b, float c, float d) {
  return {a, b, c, d};
}
inline uint2 make_uint2(unsigned a, unsigned b) {
  return {a, b};
}
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return {a, b, c, d};
}
inline int2 make_int2(int a, int b) {
  return {a, b};
}
inline int4 make_int4(int a, int b, int c, int d) {
  return {a, b, c, d};
}
inline double2 make_double2(double a, double b) {
  return {a, b};
}

// The current fiber's coordinates (set by the scheduler before it resumes a fiber).
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline constexpr int warpSize = 32;

inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) {
  int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline double __longlong_as_double(long long u) {
  double f;
  std::memcpy(&f, &u, 8);
  return f;
}
inline long long __double_as_longlong(double f) {
  long long u;
  std::memcpy(&u, &f, 8);
  return u;
}
// Device math the C library lacks (the host's correctly rounded versions stand in for the
// device's approximate intrinsics).
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
inline double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
inline float __expf(float x) {
  return std::exp(x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float __frcp_rn(float x) {
  return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
  return std::sqrt(x);
}
inline float __saturatef(float x) {
  return x < 0 ? 0.0f : (x > 1 ? 1.0f : x);
}
inline void __threadfence() {}
inline void __threadfence_block() {}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline int __popc(unsigned v) {
  return __builtin_popcount(v);
}
inline int __popcll(unsigned long long v) {
  return __builtin_popcountll(v);
}
inline int __clz(int v) {
  return v ? __builtin_clz(unsigned(v)) : 32;
}
inline int __ffs(int v) {
  return __builtin_ffs(v);
}
// CUDA's global min/max overloads (device code calls them unqualified).
#define ZAYA_EMU_MINMAX(T) \
  inline T min(T a, T b) { \
    return b < a ? b : a;  \
  }                        \
  inline T max(T a, T b) { \
    return a < b ? b : a;  \
  }
ZAYA_EMU_MINMAX(int)
ZAYA_EMU_MINMAX(unsigned)
ZAYA_EMU_MINMAX(long)
ZAYA_EMU_MINMAX(unsigned long)
ZAYA_EMU_MINMAX(long long)
ZAYA_EMU_MINMAX(unsigned long long)
ZAYA_EMU_MINMAX(float)
ZAYA_EMU_MINMAX(double)
#undef ZAYA_EMU_MINMAX

// Atomics: all fibers run on one OS thread and switch only at barriers and shuffles, so a plain
// read-modify-write is atomic here.
template <class T, class U>
inline T atomicAdd(T* p, U v) {
  T old = *p;
  *p = T(old + T(v));
  return old;
}
template <class T, class U>
inline T atomicSub(T* p, U v) {
  T old = *p;
  *p = T(old - T(v));
  return old;
}
template <class T, class U>
inline T atomicMax(T* p, U v) {
  T old = *p;
  if (old < T(v)) *p = T(v);
  return old;
}
template <class T, class U>
inline T atomicMin(T* p, U v) {
  T old = *p;
  if (T(v) < old) *p = T(v);
  return old;
}
template <class T, class U>
inline T atomicExch(T* p, U v) {
  T old = *p;
  *p = T(v);
  return old;
}
template <class T, class U>
inline T atomicOr(T* p, U v) {
  T old = *p;
  *p = T(old | T(v));
  return old;
}
template <class T, class U>
inline T atomicAnd(T* p, U v) {
  T old = *p;
  *p = T(old & T(v));
  return old;
}
template <class T, class U, class V>
inline T atomicCAS(T* p, U cmp, V v) {
  T old = *p;
  if (old == T(cmp)) *p = T(v);
  return old;
}

// ---------------------------------------------------------------- the scheduler (emu.cpp)
namespace emu {
using Body = void (*)(void* closure);
// Runs body(closure) once per thread of every block of the grid (see emu.cpp).
void launch_impl(const char* kernel, const char* file, int line, dim3 grid, dim3 block,
                 size_t dynamic_smem, Body body, void* closure);
template <class F>
void launch(const char* kernel, const char* file, int line, dim3 grid, dim3 block, size_t smem,
            F&& f) {
  using G = std::remove_reference_t<F>;
  launch_impl(
      kernel, file, line, grid, block, smem, [](void* c) { (*static_cast<G*>(c))(); },
      static_cast<void*>(&f));
}
template <class F>
void launch(const char* kernel, const char* file, int line, dim3 grid, dim3 block, F&& f) {
  launch(kernel, file, line, grid, block, 0, static_cast<F&&>(f));
}
void sync_block();
void sync_warp();
// Exchanges 8 bytes with lane `src` of the caller's warp (every lane of the warp takes part).
uint64_t shuffle_bits(uint64_t bits, int src_lane);
int lane();
void* dynamic_smem();
// Lanes per warp: ZAYA_EMU_WARP (32 or 64) inside a kernel, 32 in host code.
int warp_lanes();
struct Warp {
  operator int() const { return warp_lanes(); }
};

template <class T>
T shfl(T v, int src_lane) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "emu shuffle: 8 bytes at most");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shuffle_bits(bits, src_lane & (warp_lanes() - 1));
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
template <class T>
T shfl_xor(T v, int mask) {
  return shfl(v, lane() ^ mask);
}
}  // namespace emu

inline void __syncthreads() {
  emu::sync_block();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  emu::sync_warp();
}

#define ZAYA_SHFL_XOR(v, mask) ::emu::shfl_xor((v), (mask))
#define ZAYA_SHFL(v, lane) ::emu::shfl((v), (lane))

// ---------------------------------------------------------------- the runtime API
using cudaError_t = int;
using cudaStream_t = struct CUstream_st*;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize,
  cudaFuncAttributePreferredSharedMemoryCarveout
};
constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorInvalidValue = 1;
constexpr cudaError_t cudaErrorMemoryAllocation = 2;
namespace emu {
cudaError_t last_error();  // and clears it
void set_dynamic_smem_limit(const void* kernel, size_t bytes);
// With ZAYA_EMU_PROTECT=1 device memory is unreadable by the host except inside a launch or a
// runtime call; a DeviceAccess opens it for its scope (nests; see emu.cpp).
void device_open();
void device_close();
struct DeviceAccess {
  DeviceAccess() { device_open(); }
  ~DeviceAccess() { device_close(); }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};
}  // namespace emu
inline cudaError_t cudaGetLastError() {
  return emu::last_error();
}
inline cudaError_t cudaPeekAtLastError() {
  return cudaSuccess;
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulated GPU error";
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind,
                                   cudaStream_t = nullptr) {
  const emu::DeviceAccess open;
  if (n) std::memmove(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  const emu::DeviceAccess open;
  if (n) std::memmove(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = nullptr) {
  const emu::DeviceAccess open;
  if (n) std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {
  const emu::DeviceAccess open;
  if (n) std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin, cudaDevAttrMultiProcessorCount };
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
// One emulated device; work is synchronous, so the stream is always idle (the NCCL group).
constexpr cudaError_t cudaErrorNotReady = 600;
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
// What the GEMM table's validators ask (ops/gpu/gemm_table_runtime.cpp): no device, so no
// compute capability (0.0) and no runtime version (0).
struct cudaDeviceProp {
  char name[256] = "gpu emulator";
  int major = 0, minor = 0;
};
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  *p = cudaDeviceProp{};
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}
inline cudaError_t cudaStreamQuery(cudaStream_t) {
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 227 << 10 : 132;  // H200
  return cudaSuccess;
}
template <class K>
inline cudaError_t cudaFuncSetAttribute(K* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
    emu::set_dynamic_smem_limit(reinterpret_cast<const void*>(kernel), size_t(value));
  return cudaSuccess;
}
