// Reductions, counting and scaling on the GPU (ops.h "reductions"; the CPU's are in
// ops/cpu/reduce.cpp). sum, sum_squares and count_scored accumulate in double, deterministically in
// two passes: a grid whose size depends only on the element count, each thread summing a fixed
// grid-stride subset, each block's tree sum written to a Scratch, then one block summing those
// partials in a fixed order; the double comes to the host (a synchronising copy), or stays on the
// device (sum_to). The bits differ from the CPU's sequential blocks of 2^16 only by the order of
// the double additions. count_scored sums 0/1 terms, exact in double. count_classes counts with
// integer atomics (exact) and adds the counts to an I64 or F64 tensor.
#include <type_traits>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr int kMaxPartials = 1024;  // blocks of the first pass (= threads of the second)
constexpr int kPerThread = 8;       // elements per thread before the grid is widened

struct Identity {
  __device__ double operator()(double v) const { return v; }
};
struct Square {
  __device__ double operator()(double v) const { return v * v; }
};
struct Scored {
  __device__ double operator()(int32_t v) const { return v >= 0 ? 1.0 : 0.0; }
};

// part[block] = Σ term(x[i]) over the block's grid-stride share of [0, n). kVec: F32 read as
// float4 (16-byte aligned x), the last n % 4 elements after.
template <class T, class Term, bool kVec>
__global__ void partial_sums_kernel(double* part, const T* x, int64_t n, Term term) {
  __shared__ double partials[kMaxWarpsPerBlock];
  double s = 0;
  int64_t tail = 0;
  if constexpr (kVec) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    ZAYA_GPU_FOR(i, n / 4) {
      const float4 v = x4[i];
      s += term(double(v.x)) + term(double(v.y)) + term(double(v.z)) + term(double(v.w));
    }
    tail = n / 4 * 4;
  }
  for (int64_t i = tail + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    s += term(x[i]);
  s = block_sum(s, partials);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// out[0] = Σ part[0 … parts) in a fixed order (one block of kMaxPartials threads).
__global__ void final_sum_kernel(double* out, const double* part, int parts) {
  __shared__ double partials[kMaxWarpsPerBlock];
  double s = 0;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += part[i];
  s = block_sum(s, partials);
  if (threadIdx.x == 0) out[0] = s;
}

// out[0] (device memory) = Σ term(x[i]), left on the device.
template <class T, class Term>
void reduce_sum_to(double* out, const T* x, int64_t n, Term term) {
  if (n == 0) {
    ZAYA_GPU_CHECK(cudaMemsetAsync(out, 0, sizeof(double), stream()));
    return;
  }
  const int parts = int(blocks_for(n, kBlock * kPerThread, kMaxPartials));
  Scratch part(size_t(parts) * sizeof(double));
  double* p = part.as<double>();
  bool vec = false;
  if constexpr (std::is_same_v<T, float>) {
    vec = (reinterpret_cast<uintptr_t>(x) & 15) == 0 && n >= 4;
    if (vec) partial_sums_kernel<T, Term, true><<<parts, kBlock, 0, stream()>>>(p, x, n, term);
  }
  if (!vec) partial_sums_kernel<T, Term, false><<<parts, kBlock, 0, stream()>>>(p, x, n, term);
  ZAYA_GPU_LAUNCH_CHECK();
  final_sum_kernel<<<1, kMaxPartials, 0, stream()>>>(out, p, parts);
  ZAYA_GPU_LAUNCH_CHECK();
}

// Σ term(x[i]) on the host (a synchronising copy).
template <class T, class Term>
double reduce_sum(const T* x, int64_t n, Term term) {
  if (n == 0) return 0.0;
  Scratch out(sizeof(double));
  reduce_sum_to(out.as<double>(), x, n, term);
  double s = 0;
  copy_to_host(&s, out.as<double>(), sizeof(double));
  return s;
}

template <class Term>
double reduce_float(const Tensor& t, Term term) {
  if (t.dtype == DType::F32) return reduce_sum(t.ptr<float>(), t.numel(), term);
  return reduce_sum(t.ptr<double>(), t.numel(), term);  // F64
}

// Classes up to this many are counted in shared memory per block first.
constexpr int64_t kSharedClasses = 4096;

// hist[k] += #{n : choice[n] = k} (integer atomics: exact, order-free). Values outside [0, K)
// are not counted (the CPU asserts them; here they must only not write out of bounds).
__global__ void count_kernel(unsigned long long* hist, const int32_t* choice, int64_t N,
                             int64_t K) {
  extern __shared__ unsigned int local[];
  const bool shared = K <= kSharedClasses;  // uniform
  if (shared) {
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) local[k] = 0;
    __syncthreads();
  }
  ZAYA_GPU_FOR(n, N) {
    const int32_t c = choice[n];
    if (c < 0 || c >= K) continue;
    if (shared)
      atomicAdd(&local[c], 1u);
    else
      atomicAdd(&hist[c], 1ull);
  }
  if (shared) {
    __syncthreads();
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
      if (local[k]) atomicAdd(&hist[k], (unsigned long long)local[k]);
  }
}

template <class C>
__global__ void add_counts_kernel(C* counts, const unsigned long long* hist, int64_t K) {
  ZAYA_GPU_FOR(k, K) counts[k] += C(hist[k]);
}

template <class T>
__global__ void scale_kernel(T* x, int64_t n, T s) {
  ZAYA_GPU_FOR(i, n) x[i] *= s;
}

__global__ void scale4_kernel(float4* x, int64_t n4, float s) {
  ZAYA_GPU_FOR(i, n4) {
    float4 v = x[i];
    v.x *= s, v.y *= s, v.z *= s, v.w *= s;
    x[i] = v;
  }
}

}  // namespace

double sum(const Tensor& t) {
  return reduce_float(t, Identity{});
}

void sum_to(const Tensor& out, const Tensor& t) {
  if (t.dtype == DType::F32)
    return reduce_sum_to(out.ptr<double>(), t.ptr<float>(), t.numel(), Identity{});
  reduce_sum_to(out.ptr<double>(), t.ptr<double>(), t.numel(), Identity{});
}

double sum_squares(const Tensor& t) {
  return reduce_float(t, Square{});
}

int64_t count_scored(const Tensor& target) {
  return int64_t(reduce_sum(target.ptr<int32_t>(), target.numel(), Scored{}));
}

void count_classes(const Tensor& counts, const Tensor& choice, int64_t K) {
  const int64_t N = choice.numel();
  if (N == 0 || K == 0) return;
  Scratch hist(size_t(K) * sizeof(unsigned long long));
  unsigned long long* h = hist.as<unsigned long long>();
  ZAYA_GPU_CHECK(cudaMemsetAsync(h, 0, size_t(K) * sizeof(unsigned long long), stream()));
  const size_t smem = K <= kSharedClasses ? size_t(K) * sizeof(unsigned int) : 0;
  count_kernel<<<blocks_for(N, kBlock * 16, 1024), kBlock, smem, stream()>>>(
      h, choice.ptr<int32_t>(), N, K);
  ZAYA_GPU_LAUNCH_CHECK();
  if (counts.dtype == DType::I64)
    add_counts_kernel<<<blocks_for(K), kBlock, 0, stream()>>>(counts.ptr<int64_t>(), h, K);
  else  // F64
    add_counts_kernel<<<blocks_for(K), kBlock, 0, stream()>>>(counts.ptr<double>(), h, K);
  ZAYA_GPU_LAUNCH_CHECK();
}

void scale(const Tensor& t, double s) {
  const int64_t n = t.numel();
  if (n == 0) return;
  if (t.dtype == DType::F32) {
    float* x = t.ptr<float>();
    int64_t done = 0;
    if ((reinterpret_cast<uintptr_t>(x) & 15) == 0 && n >= 4) {
      scale4_kernel<<<blocks_for(n / 4), kBlock, 0, stream()>>>(reinterpret_cast<float4*>(x), n / 4,
                                                                float(s));
      ZAYA_GPU_LAUNCH_CHECK();
      done = n / 4 * 4;
    }
    if (done < n) {
      // The 1–3 elements after the float4s, or all of an unaligned tensor.
      scale_kernel<<<blocks_for(n - done), kBlock, 0, stream()>>>(x + done, n - done, float(s));
      ZAYA_GPU_LAUNCH_CHECK();
    }
  } else {  // F64
    scale_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(t.ptr<double>(), n, s);
    ZAYA_GPU_LAUNCH_CHECK();
  }
}

}  // namespace zaya::ops::gpu
