// linear_forward / linear_backward on the GPU (ops.h "linear"), as ops/cpu/linear.cpp: GEMMs
// through gemm.h plus the bias terms. A BF16 weight (inference; x, y, b F32) goes to the same
// GEMM with a BF16 B operand (mixed dtypes: the tiled kernel widens it as it loads); it has no
// backward. db += Σ_n dy is a deterministic two-pass column sum (per-chunk partials, then a
// fixed-order pass), no atomics.
#include <algorithm>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gemm.h"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

// y[n,o] = (accumulate ? y[n,o] : 0) + b[o].
__global__ void bias_kernel(float* y, const float* b, int64_t N, int64_t O, bool accumulate) {
  ZAYA_GPU_FOR(i, N * O) y[i] = (accumulate ? y[i] : 0.0f) + b[i % O];
}

constexpr int kSumCols = 32, kSumRowsPerPass = kBlock / kSumCols;

// Column sums of dy[N,O] over rows [chunk·rows_per_chunk, …) of each y-block: out[chunk·O + o] =
// the sum, or out[o] += it when add (one chunk).
__global__ void __launch_bounds__(kBlock)
    column_sum_kernel(float* out, const float* dy, int64_t N, int64_t O, int64_t rows_per_chunk,
                      bool add) {
  __shared__ float part[kSumRowsPerPass][kSumCols + 1];
  const int tx = int(threadIdx.x) % kSumCols, ty = int(threadIdx.x) / kSumCols;
  const int64_t o = int64_t(blockIdx.x) * kSumCols + tx;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
  float s = 0.0f;
  if (o < O)
    for (int64_t r = r0 + ty; r < r1; r += kSumRowsPerPass) s += dy[r * O + o];
  part[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && o < O) {
    float t = part[0][tx];
    for (int k = 1; k < kSumRowsPerPass; ++k) t += part[k][tx];
    if (add)
      out[o] += t;
    else
      out[int64_t(blockIdx.y) * O + o] = t;
  }
}

// db[o] += Σ_c partial[c·O + o], c in order.
__global__ void add_partials_kernel(float* db, const float* partial, int64_t chunks, int64_t O) {
  ZAYA_GPU_FOR(o, O) {
    float t = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) t += partial[c * O + o];
    db[o] += t;
  }
}

// db[O] += Σ_n dy[n, :].
void column_sum_add(float* db, const float* dy, int64_t N, int64_t O) {
  if (N == 0 || O == 0) return;
  const int64_t rows_per_chunk = std::max<int64_t>(256, (N + 127) / 128);
  const int64_t chunks = (N + rows_per_chunk - 1) / rows_per_chunk;  // ≤ 128
  const dim3 grid(unsigned((O + kSumCols - 1) / kSumCols), unsigned(chunks));
  if (chunks == 1) {
    column_sum_kernel<<<grid, kBlock, 0, stream()>>>(db, dy, N, O, rows_per_chunk, true);
    ZAYA_GPU_LAUNCH_CHECK();
    return;
  }
  Scratch partial(size_t(chunks * O) * sizeof(float));
  column_sum_kernel<<<grid, kBlock, 0, stream()>>>(partial.as<float>(), dy, N, O, rows_per_chunk,
                                                   false);
  ZAYA_GPU_LAUNCH_CHECK();
  add_partials_kernel<<<blocks_for(O), kBlock, 0, stream()>>>(db, partial.as<float>(), chunks, O);
  ZAYA_GPU_LAUNCH_CHECK();
}

GemmOperand operand(const Tensor& t, int64_t ld, bool transposed) {
  return GemmOperand{t.data, t.dtype, ld, transposed};
}

}  // namespace

void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  if (N == 0 || O == 0) return;
  float beta = accumulate ? 1.0f : 0.0f;
  if (b.defined()) {  // y = (y or 0) + b first, then the GEMM adds onto it
    bias_kernel<<<blocks_for(N * O), kBlock, 0, stream()>>>(y.ptr<float>(), b.ptr<float>(), N, O,
                                                            accumulate);
    ZAYA_GPU_LAUNCH_CHECK();
    beta = 1.0f;
  }
  Gemm g;
  g.M = N, g.N = O, g.K = I;
  g.a = operand(x, I, false);
  g.b = operand(w, I, true);
  g.c = y.ptr<float>(), g.ldc = O;
  g.alpha = 1.0f, g.beta = beta;
  gemm(g);
}

void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                     const Tensor& x, const Tensor& w, bool accumulate_dx) {
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  if (N == 0) return;
  if (dx.defined()) {  // dx[N,I] (+)= dy[N,O] · w[O,I]
    Gemm g;
    g.M = N, g.N = I, g.K = O;
    g.a = operand(dy, O, false);
    g.b = operand(w, I, false);
    g.c = dx.ptr<float>(), g.ldc = I;
    g.alpha = 1.0f, g.beta = accumulate_dx ? 1.0f : 0.0f;
    gemm(g);
  }
  if (dw.defined()) {  // dw[O,I] += dy[N,O]ᵀ · x[N,I]
    Gemm g;
    g.M = O, g.N = I, g.K = N;
    g.a = operand(dy, O, true);
    g.b = operand(x, I, false);
    g.c = dw.ptr<float>(), g.ldc = I;
    g.alpha = 1.0f, g.beta = 1.0f;
    gemm(g);
  }
  if (db.defined()) column_sum_add(db.ptr<float>(), dy.ptr<float>(), N, O);
}

}  // namespace zaya::ops::gpu
