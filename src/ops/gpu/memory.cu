// Memory ops on the GPU (ops.h "memory"): fill, the counter-RNG fills, copy, conversion, segment
// copies, row gather and scatter, column concatenation, the target shift. Bit moves in the widest
// unit (16, 8, 4, 2 or 1 bytes) that the addresses and row sizes allow, one block per row for row
// ops; shapes, dtypes and segment ranges were checked in ops/ops.cpp. Index values are not checked
// on the device (the CPU backend asserts them; on the GPU an id out of range is the caller's bug).
//
// fill_normal and fill_uniform draw core/rng.h's counters on the device (ZAYA_HD): fill_uniform is
// the CPU's bits exactly (integer mixing and exact or singly rounded IEEE double steps);
// fill_normal's Box–Muller uses the device's double log and cos, within 1–2 ulp of the host's, so
// an element can differ from the CPU's by one f32 ulp where the double lands next to a rounding
// boundary (about 2^-28 of the elements).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/rng.h"
#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

template <class T>
__global__ void fill_kernel(T* p, int64_t n, T value) {
  ZAYA_GPU_FOR(i, n) p[i] = value;
}

template <class T>
void fill_n(T* p, int64_t n, T value) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(p, n, value);
  ZAYA_GPU_LAUNCH_CHECK();
}

__global__ void f32_to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  ZAYA_GPU_FOR(i, n) dst[i] = float_to_bf16_bits(src[i]);
}

__global__ void bf16_to_f32_kernel(float* dst, const uint16_t* src, int64_t n) {
  ZAYA_GPU_FOR(i, n) dst[i] = bf16_bits_to_float(src[i]);
}

__global__ void normal_kernel(float* p, int64_t n, CounterRng rng, double sd) {
  ZAYA_GPU_FOR(i, n) p[i] = float(sd * rng.normal(uint64_t(i)));
}

template <class T>
__global__ void uniform_kernel(T* p, int64_t n, CounterRng rng, double a) {
  ZAYA_GPU_FOR(k, n) {
    const float v = float(a * (2.0 * rng.uniform(uint64_t(k)) - 1.0));
    if constexpr (sizeof(T) == 2)
      p[k] = float_to_bf16_bits(v);
    else
      p[k] = v;
  }
}

__global__ void zero_where_kernel(float* v, const int32_t* choice, int64_t n, int64_t k) {
  ZAYA_GPU_FOR(i, n) if (choice[i] == k) v[i] = 0.0f;
}

// The unit of a bit move: the widest of 16, 8, 4, 2, 1 bytes dividing `bits` (addresses and
// sizes OR-ed together).
template <class U>
struct Unit {
  using type = U;
};
template <class Fn>
void with_unit(uintptr_t bits, Fn&& fn) {
  if (bits % 16 == 0) return fn(Unit<uint4>{}, 16);
  if (bits % 8 == 0) return fn(Unit<uint2>{}, 8);
  if (bits % 4 == 0) return fn(Unit<uint32_t>{}, 4);
  if (bits % 2 == 0) return fn(Unit<uint16_t>{}, 2);
  fn(Unit<uint8_t>{}, 1);
}

__host__ __device__ inline uintptr_t addr(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

template <class U>
__device__ __forceinline__ void move_units(void* dst, const void* src, int64_t n) {
  U* d = static_cast<U*>(dst);
  const U* s = static_cast<const U*>(src);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d[j] = s[j];
}

// One block per piece of a segment (≤ kPieceBytes), each moved in the widest unit it allows.
struct Piece {
  int64_t src = 0, dst = 0, bytes = 0;  // byte offsets into the flat buffers
};
constexpr int64_t kPieceBytes = int64_t(1) << 18;  // a multiple of 16: pieces keep alignment

__global__ void copy_pieces_kernel(char* dst, const char* src, const Piece* pieces, int64_t n) {
  for (int64_t c = blockIdx.x; c < n; c += gridDim.x) {
    const Piece k = pieces[c];
    char* d = dst + k.dst;
    const char* s = src + k.src;
    const uintptr_t bits = addr(d) | addr(s) | uintptr_t(k.bytes);
    if (bits % 16 == 0)
      move_units<uint4>(d, s, k.bytes / 16);
    else if (bits % 8 == 0)
      move_units<uint2>(d, s, k.bytes / 8);
    else if (bits % 4 == 0)
      move_units<uint32_t>(d, s, k.bytes / 4);
    else if (bits % 2 == 0)
      move_units<uint16_t>(d, s, k.bytes / 2);
    else
      move_units<uint8_t>(d, s, k.bytes);
  }
}

// Rows of W units: gather dst[m] = src[ids[m]], or (kScatter) dst[ids[m]] = src[m].
template <class U, bool kScatter>
__global__ void move_rows_kernel(U* dst, const U* src, const int32_t* ids, int64_t M, int64_t W) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const int64_t r = ids[m];
    if (kScatter)
      move_units<U>(dst + r * W, src + m * W, W);
    else
      move_units<U>(dst + m * W, src + r * W, W);
  }
}

// dst[ids[m]] = w[ids[m]] · src[m] (F32 products), rows of W floats; kVec: float4.
template <bool kVec>
__global__ void scatter_weighted_kernel(float* dst, const int32_t* ids, const float* src,
                                        const float* w, int64_t M, int64_t W) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const int64_t r = ids[m];
    const float s = w[r];
    if (kVec) {
      float4* d = reinterpret_cast<float4*>(dst + r * W);
      const float4* x = reinterpret_cast<const float4*>(src + m * W);
      for (int64_t j = threadIdx.x; j < W / 4; j += blockDim.x) {
        const float4 v = x[j];
        d[j] = make_float4(s * v.x, s * v.y, s * v.z, s * v.w);
      }
    } else {
      for (int64_t j = threadIdx.x; j < W; j += blockDim.x) dst[r * W + j] = s * src[m * W + j];
    }
  }
}

// dst[n] = [a[n] ‖ b[n]], rows of A and B units.
template <class U>
__global__ void concat_kernel(U* dst, const U* a, const U* b, int64_t N, int64_t A, int64_t B) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    move_units<U>(dst + n * (A + B), a + n * A, A);
    move_units<U>(dst + n * (A + B) + A, b + n * B, B);
  }
}

__global__ void shift_targets_kernel(int32_t* tgt, const int32_t* id, int64_t n, int64_t T) {
  ZAYA_GPU_FOR(i, n) tgt[i] = (i % T) + 1 < T ? id[i + 1] : -1;
}

// Row width (elements) of a tensor whose rows are its first dimension.
int64_t row_width(const Tensor& t) {
  return t.shape[0] ? t.numel() / t.shape[0] : 0;
}

// Rows of the row ops: gather (dst[m] = src[ids[m]]) or scatter (dst[ids[m]] = src[m]), M =
// row_ids.numel() rows of dst's width (src has the same).
template <bool kScatter>
void move_rows(const Tensor& dst, const Tensor& src, const Tensor& row_ids) {
  const int64_t M = row_ids.numel();
  const uintptr_t row = uintptr_t(row_width(dst)) * dtype_size(dst.dtype);
  if (M == 0 || row == 0) return;
  with_unit(addr(dst.data) | addr(src.data) | row, [&](auto unit, uintptr_t u) {
    using U = typename decltype(unit)::type;
    move_rows_kernel<U, kScatter><<<blocks_for(M, 1), kBlock, 0, stream()>>>(
        static_cast<U*>(dst.data), static_cast<const U*>(src.data), row_ids.ptr<int32_t>(), M,
        int64_t(row / u));
  });
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace

void fill(const Tensor& t, double value) {
  const int64_t n = t.numel();
  if (t.dtype == DType::F32) return fill_n(t.ptr<float>(), n, float(value));
  if (t.dtype == DType::F64) return fill_n(t.ptr<double>(), n, value);
  fill_n(t.ptr<int32_t>(), n, int32_t(value));  // I32, the third dtype ops.cpp admits
}

void fill_zero(const Tensor& t) {
  zaya::gpu::fill_zero(t.data, t.nbytes());  // core/device.h's entry point (runtime.cpp)
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.data == src.data) return;
  zaya::gpu::copy(dst.data, Device::Gpu, src.data, Device::Gpu, src.nbytes());
}

void convert(const Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (dst.dtype == src.dtype) return copy(dst, src);
  if (n == 0) return;
  if (dst.dtype == DType::BF16 && src.dtype == DType::F32) {
    f32_to_bf16_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dst.ptr<uint16_t>(),
                                                               src.ptr<float>(), n);
  } else {  // F32 from BF16, the other conversion ops.cpp admits
    bf16_to_f32_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dst.ptr<float>(),
                                                               src.ptr<uint16_t>(), n);
  }
  ZAYA_GPU_LAUNCH_CHECK();
}

void fill_normal(const Tensor& t, uint64_t seed, uint64_t stream_id, double std) {
  const int64_t n = t.numel();
  if (n == 0) return;
  normal_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(t.ptr<float>(), n,
                                                        CounterRng{seed, stream_id}, std);
  ZAYA_GPU_LAUNCH_CHECK();
}

void fill_uniform(const Tensor& t, uint64_t seed, uint64_t stream_id, double a) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const CounterRng rng{seed, stream_id};
  if (t.dtype == DType::F32)
    uniform_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(t.ptr<float>(), n, rng, a);
  else  // BF16
    uniform_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(t.ptr<uint16_t>(), n, rng, a);
  ZAYA_GPU_LAUNCH_CHECK();
}

void zero_where_class(const Tensor& v, const Tensor& choice, int64_t k) {
  const int64_t n = choice.numel();
  if (n == 0) return;
  zero_where_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(v.ptr<float>(), choice.ptr<int32_t>(),
                                                            n, k);
  ZAYA_GPU_LAUNCH_CHECK();
}

namespace {

// The piece lists of recent copy_segments calls, kept on the device. The ZeRO-1 bucket's pack and
// unpack (train/optimizer.cpp) repeat the same lists every step, and uploading a list makes the
// host wait for the stream (its vector goes away after the call): a list met again is not
// uploaded. Beyond kCachedLists the least recently used one is dropped (its memory goes back to
// the cache allocator, ordered on the stream after the copies that read it). Never destroyed:
// static destruction may run after the driver's.
class PieceLists {
 public:
  const Piece* get(const std::vector<Piece>& pieces) {
    std::lock_guard<std::mutex> lock(mu_);
    ++clock_;
    for (Entry& e : entries_)
      if (e.host.size() == pieces.size() &&
          std::memcmp(e.host.data(), pieces.data(), pieces.size() * sizeof(Piece)) == 0) {
        e.used = clock_;
        return static_cast<const Piece*>(e.device);
      }
    if (entries_.size() == kCachedLists) {
      auto oldest =
          std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.used < b.used; });
      cached_free(oldest->device);
      entries_.erase(oldest);
    }
    const size_t bytes = pieces.size() * sizeof(Piece);
    void* device = cached_alloc(bytes);
    zaya::gpu::copy(device, Device::Gpu, pieces.data(), Device::Cpu, bytes);
    entries_.push_back({pieces, device, clock_});
    return static_cast<const Piece*>(device);
  }

 private:
  static constexpr size_t kCachedLists = 256;
  struct Entry {
    std::vector<Piece> host;
    void* device;
    uint64_t used;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

PieceLists& piece_lists() {
  static PieceLists* lists = new PieceLists;
  return *lists;
}

}  // namespace

void copy_segments(const Tensor& dst, const Tensor& src, std::span<const CopySegment> segments) {
  const int64_t es = int64_t(dtype_size(src.dtype));
  std::vector<Piece> pieces;
  for (const CopySegment& g : segments)
    for (int64_t at = 0; at < g.length * es; at += kPieceBytes) {
      const int64_t bytes = g.length * es - at < kPieceBytes ? g.length * es - at : kPieceBytes;
      pieces.push_back(Piece{g.src * es + at, g.dst * es + at, bytes});
    }
  if (pieces.empty()) return;
  const int64_t n = int64_t(pieces.size());
  copy_pieces_kernel<<<blocks_for(n, 1), kBlock, 0, stream()>>>(static_cast<char*>(dst.data),
                                                                static_cast<const char*>(src.data),
                                                                piece_lists().get(pieces), n);
  ZAYA_GPU_LAUNCH_CHECK();
}

void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& row_ids) {
  move_rows<false>(dst, src, row_ids);
}

void scatter_rows(const Tensor& dst, const Tensor& row_ids, const Tensor& src,
                  const Tensor& weight) {
  const int64_t M = row_ids.numel(), W = row_width(dst);
  if (M == 0 || W == 0) return;
  if (weight.defined()) {
    const bool vec = W % 4 == 0 && (addr(dst.data) | addr(src.data)) % 16 == 0;
    auto kernel = vec ? scatter_weighted_kernel<true> : scatter_weighted_kernel<false>;
    kernel<<<blocks_for(M, 1), kBlock, 0, stream()>>>(dst.ptr<float>(), row_ids.ptr<int32_t>(),
                                                      src.ptr<float>(), weight.ptr<float>(), M, W);
    ZAYA_GPU_LAUNCH_CHECK();
    return;
  }
  move_rows<true>(dst, src, row_ids);
}

void concat_cols(const Tensor& dst, const Tensor& a, const Tensor& b) {
  const int64_t N = dst.shape[0];
  const uintptr_t es = dtype_size(dst.dtype);
  const uintptr_t ra = uintptr_t(row_width(a)) * es, rb = uintptr_t(row_width(b)) * es;
  if (N == 0 || ra + rb == 0) return;
  with_unit(addr(dst.data) | addr(a.data) | addr(b.data) | ra | rb, [&](auto unit, uintptr_t u) {
    using U = typename decltype(unit)::type;
    concat_kernel<U><<<blocks_for(N, 1), kBlock, 0, stream()>>>(
        static_cast<U*>(dst.data), static_cast<const U*>(a.data), static_cast<const U*>(b.data), N,
        int64_t(ra / u), int64_t(rb / u));
  });
  ZAYA_GPU_LAUNCH_CHECK();
}

void shift_targets(const Tensor& targets, const Tensor& ids, int64_t B, int64_t T) {
  const int64_t n = B * T;
  if (n == 0) return;
  shift_targets_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(targets.ptr<int32_t>(),
                                                               ids.ptr<int32_t>(), n, T);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
