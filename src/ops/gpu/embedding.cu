// Embedding lookup on the GPU (ops/cpu/embedding.cpp): out[n] = table[ids[n]] (an F32 or BF16
// table, widened exactly to an F32 out), float4 (or 4 × bf16) loads where aligned.
// Backward, deterministic without float atomics and without a host round trip:
//  1. rank_kernel: every token's position in the stable order by id (the skipped row's tokens
//     last), rank(n) = #{m : k_m < k_n} + #{m < n : k_m = k_n}, by comparing against all N ids in
//     shared-memory tiles (N² compares: ~67M for N = 8192, a few µs); order[rank] = n.
//  2. scatter_kernel: a block per sorted position that starts a run of one id (and per column
//     chunk) sums that run's dout rows in token order in double and adds the sum to the table row
//     once: the CPU's order and rounding, so the bits match it; runs have distinct ids, so no two
//     blocks write one row.
#include <climits>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

bool aligned(const void* p, uintptr_t a) {
  return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0;
}

// Rows n = blockIdx.x (strided); threads over the D / W vectors of a row.
template <class T, int W>
__global__ void gather_kernel(float* out, const int32_t* ids, const T* table, int64_t N,
                              int64_t D) {
  const int64_t nv = D / W;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* src = table + int64_t(ids[n]) * D;
    float* dst = out + n * D;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      if constexpr (W == 4 && sizeof(T) == 4) {
        reinterpret_cast<float4*>(dst)[i] = reinterpret_cast<const float4*>(src)[i];
      } else if constexpr (W == 4) {  // 4 × bf16 in one 8-byte load
        const uint2 u = reinterpret_cast<const uint2*>(src)[i];
        reinterpret_cast<float4*>(dst)[i] =
            make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                        __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u));
      } else {
        dst[i] = load_f32(src, i);
      }
    }
  }
}

template <class T>
void gather(float* out, const int32_t* ids, const T* table, int64_t N, int64_t D) {
  const bool v4 = D % 4 == 0 && aligned(out, 16) && aligned(table, 4 * sizeof(T));
  const unsigned grid = unsigned(N < 65535 ? N : 65535);
  const int64_t nv = v4 ? D / 4 : D;
  const int threads = nv >= 256 ? 256 : (nv >= 128 ? 128 : 64);
  if (v4)
    gather_kernel<T, 4><<<grid, threads, 0, stream()>>>(out, ids, table, N, D);
  else
    gather_kernel<T, 1><<<grid, threads, 0, stream()>>>(out, ids, table, N, D);
  ZAYA_GPU_LAUNCH_CHECK();
}

constexpr int kRankThreads = 128;

// The sort key: the id, or INT_MAX for the skipped row (sorted last, then left out).
__device__ __forceinline__ int32_t key_of(const int32_t* ids, int64_t n, int64_t skip_row) {
  const int32_t id = ids[n];
  return id == skip_row ? INT_MAX : id;
}

// order[rank(n)] = n and skey[rank(n)] = key(n). Every thread walks all tiles (no early return:
// the tiles are loaded by the whole block).
__global__ void __launch_bounds__(kRankThreads)
    rank_kernel(int32_t* order, int32_t* skey, const int32_t* ids, int64_t N, int64_t skip_row) {
  __shared__ int32_t tile[kRankThreads];
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int32_t k = n < N ? key_of(ids, n, skip_row) : 0;
  int64_t rank = 0;
  for (int64_t t0 = 0; t0 < N; t0 += kRankThreads) {
    const int64_t m = t0 + threadIdx.x;
    tile[threadIdx.x] = m < N ? key_of(ids, m, skip_row) : INT_MAX;
    __syncthreads();
    const int64_t cnt = N - t0 < kRankThreads ? N - t0 : kRankThreads;
    for (int64_t j = 0; j < cnt; ++j) {
      const int32_t km = tile[j];
      rank += (km < k) | (km == k && t0 + j < n);
    }
    __syncthreads();
  }
  if (n < N) {
    order[rank] = int32_t(n);
    skey[rank] = k;
  }
}

// Block (r, c): if sorted position r starts a run of one id, dtable[id] += Σ_run dout (columns of
// chunk c), summed in double in token order.
template <int W>
__global__ void scatter_kernel(float* dtable, const float* dout, const int32_t* order,
                               const int32_t* skey, int64_t N, int64_t D) {
  const int64_t r = blockIdx.x;
  const int32_t k = skey[r];
  if (k == INT_MAX || (r > 0 && skey[r - 1] == k)) return;  // the whole block: no sync below
  int64_t e = r + 1;
  while (e < N && skey[e] == k) ++e;
  const int64_t i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;  // vector index in the row
  if (i >= D / W) return;
  double acc[W] = {};
#pragma unroll 4
  for (int64_t p = r; p < e; ++p) {
    const float* d = dout + int64_t(order[p]) * D;
    if constexpr (W == 4) {
      const float4 f = reinterpret_cast<const float4*>(d)[i];
      acc[0] += double(f.x), acc[1] += double(f.y), acc[2] += double(f.z), acc[3] += double(f.w);
    } else {
      acc[0] += double(d[i]);
    }
  }
  float* row = dtable + int64_t(k) * D;
  if constexpr (W == 4) {
    float4 t = reinterpret_cast<float4*>(row)[i];
    t.x += float(acc[0]), t.y += float(acc[1]), t.z += float(acc[2]), t.w += float(acc[3]);
    reinterpret_cast<float4*>(row)[i] = t;
  } else {
    row[i] += float(acc[0]);
  }
}

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table) {
  const int64_t D = table.size(1), N = ids.numel();
  if (N == 0 || D == 0) return;
  const int32_t* ids_N = ids.ptr<int32_t>();
  if (table.dtype == DType::BF16)
    gather(out.ptr<float>(), ids_N, table.ptr<uint16_t>(), N, D);
  else
    gather(out.ptr<float>(), ids_N, table.ptr<float>(), N, D);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t skip_row) {
  const int64_t D = dtable.size(1), N = ids.numel();
  if (N == 0 || D == 0) return;
  ZAYA_ASSERT(N < INT_MAX, "embedding_backward: too many tokens");  // int32 ranks and order
  Scratch sorted(2 * size_t(N) * sizeof(int32_t));
  int32_t* order = sorted.as<int32_t>();
  int32_t* skey = order + N;
  rank_kernel<<<blocks_for(N, kRankThreads, int64_t(1) << 31), kRankThreads, 0, stream()>>>(
      order, skey, ids.ptr<int32_t>(), N, skip_row);
  ZAYA_GPU_LAUNCH_CHECK();
  float* dt = dtable.ptr<float>();
  const float* d = dout.ptr<float>();
  const bool v4 = D % 4 == 0 && aligned(dt, 16) && aligned(d, 16);
  const int64_t nv = v4 ? D / 4 : D;
  const int threads = nv >= 256 ? 256 : (nv >= 128 ? 128 : 64);
  const int64_t chunks = (nv + threads - 1) / threads;
  ZAYA_ASSERT(chunks <= 65535, "embedding_backward: row too wide");  // chunks on the grid's y
  const dim3 grid{unsigned(N), unsigned(chunks)};
  if (v4)
    scatter_kernel<4><<<grid, threads, 0, stream()>>>(dt, d, order, skey, N, D);
  else
    scatter_kernel<1><<<grid, threads, 0, stream()>>>(dt, d, order, skey, N, D);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
