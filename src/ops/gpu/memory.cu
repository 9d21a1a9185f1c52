// Memory ops on the GPU (ops.h "memory"): fill, copy, conversion, segment copies, row gather and
// scatter, column concatenation, the target shift. Bit moves, one thread per element; shapes,
// dtypes and segment ranges were checked in ops/ops.cpp. Index values are not checked on the
// device (the CPU backend asserts them; on the GPU an id out of range is the caller's bug).
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

}  // namespace

void fill(const Tensor& t, double value) {
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::F32:
      return fill_n(t.ptr<float>(), n, float(value));
    case DType::F64:
      return fill_n(t.ptr<double>(), n, value);
    case DType::I32:
      return fill_n(t.ptr<int32_t>(), n, int32_t(value));
    default:
      ZAYA_ASSERT(false, "fill: dtype {}", dtype_name(t.dtype));
  }
}

void fill_zero(const Tensor& t) {
  if (t.nbytes()) ZAYA_GPU_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream()));
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.data == src.data || src.nbytes() == 0) return;
  ZAYA_GPU_CHECK(
      cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
}

void convert(const Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (dst.dtype == src.dtype) return copy(dst, src);
  if (n == 0) return;
  if (dst.dtype == DType::BF16 && src.dtype == DType::F32) {
    f32_to_bf16_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dst.ptr<uint16_t>(),
                                                               src.ptr<float>(), n);
  } else if (dst.dtype == DType::F32 && src.dtype == DType::BF16) {
    bf16_to_f32_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dst.ptr<float>(),
                                                               src.ptr<uint16_t>(), n);
  } else {
    ZAYA_ASSERT(false, "convert: {} → {} on the GPU", dtype_name(src.dtype), dtype_name(dst.dtype));
  }
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
