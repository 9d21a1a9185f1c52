// newton_schulz on the GPU (ops.h "optimizer math"), as ops/cpu/muon.cpp: Muon's quintic
// Newton–Schulz orthogonalisation on the short side first. X [m,n] (m ≤ n) = G/(‖G‖_F + 1e-7)
// (the sum of squares in double: per-block partials and one fixed-order final block, the scale
// rounded to f32 on the device), then per step
//   A = X·Xᵀ,  B = b·A + c·A·A,  X ← a·X + B·X,   (a,b,c) = (3.4445, −4.7750, 2.0315),
// with the Gram products as symmetric rank-k updates (syrk_tiled: the tiles on and above the
// diagonal, mirrored) when `symmetric`, else general GEMMs (gemm.h).
#include <utility>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gemm.h"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
constexpr int kSumBlocks = 1024;  // partials of the sum of squares (fixed: deterministic)

__global__ void __launch_bounds__(kBlock)
    sumsq_partial_kernel(double* partial, const float* g, int64_t n) {
  __shared__ double red[kMaxWarpsPerBlock];
  double s = 0;
  ZAYA_GPU_FOR(i, n) {
    const double v = g[i];
    s += v * v;
  }
  s = block_sum(s, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// scale = float(1 / (√Σ partial + 1e-7)).
__global__ void __launch_bounds__(kBlock)
    scale_kernel(float* scale, const double* partial, int count) {
  __shared__ double red[kMaxWarpsPerBlock];
  double s = 0;
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) s += partial[i];
  s = block_sum(s, red);
  if (threadIdx.x == 0) *scale = float(1.0 / (sqrt(s) + 1e-7));
}

__global__ void scaled_copy_kernel(float* dst, const float* src, int64_t n, const float* scale) {
  const float s = *scale;
  ZAYA_GPU_FOR(i, n) dst[i] = src[i] * s;
}

__global__ void scale_by_kernel(float* dst, const float* src, int64_t n, float s) {
  ZAYA_GPU_FOR(i, n) dst[i] = s * src[i];
}

constexpr int kTr = 32, kTrRows = 8;  // 32×32 tiles, 32×8 threads

// dst[c·R + r] = src[r·C + c] (· *scale when scale is not null), src [R,C], through shared tiles.
__global__ void __launch_bounds__(kTr* kTrRows)
    transpose_kernel(float* dst, const float* src, int64_t R, int64_t C, const float* scale) {
  __shared__ float tile[kTr][kTr + 1];
  const float s = scale ? *scale : 1.0f;
  const int tx = int(threadIdx.x) % kTr, ty = int(threadIdx.x) / kTr;
  const int64_t c0 = int64_t(blockIdx.x) * kTr, r0 = int64_t(blockIdx.y) * kTr;
  for (int k = ty; k < kTr; k += kTrRows) {
    const int64_t r = r0 + k, c = c0 + tx;
    if (r < R && c < C) tile[k][tx] = src[r * C + c] * s;
  }
  __syncthreads();
  for (int k = ty; k < kTr; k += kTrRows) {
    const int64_t c = c0 + k, r = r0 + tx;
    if (r < R && c < C) dst[c * R + r] = tile[tx][k];
  }
}

void transpose(float* dst, const float* src, int64_t R, int64_t C, const float* scale) {
  const int64_t by = (R + kTr - 1) / kTr;
  ZAYA_ASSERT(by <= 65535, "newton_schulz: too many rows for the transpose grid");
  const dim3 grid(unsigned((C + kTr - 1) / kTr), unsigned(by));
  transpose_kernel<<<grid, kTr * kTrRows, 0, stream()>>>(dst, src, R, C, scale);
  ZAYA_GPU_LAUNCH_CHECK();
}

// C[p,q] = alpha · X[p,k] · op(Y) + beta · C, all F32 row-major and contiguous; Y [k,q] or,
// transposed, [q,k].
void gemm_f32(int64_t p, int64_t q, int64_t k, float alpha, const float* x, const float* y,
              bool y_transposed, float beta, float* c) {
  Gemm g;
  g.M = p, g.N = q, g.K = k;
  g.a = GemmOperand{x, DType::F32, k, false};
  g.b = GemmOperand{y, DType::F32, y_transposed ? k : q, y_transposed};
  g.c = c, g.ldc = q;
  g.alpha = alpha, g.beta = beta;
  gemm(g);
}

}  // namespace

void newton_schulz(const Tensor& out, const Tensor& g, int steps, bool symmetric) {
  ZAYA_ASSERT(g.dtype == DType::F32 && out.dtype == DType::F32,
              "newton_schulz: the GPU computes in F32");
  ZAYA_ASSERT(g.ndim == 2 && out.numel() == g.numel(), "newton_schulz: out and g must match");
  const int64_t rows = g.shape[0], cols = g.shape[1], total = rows * cols;
  if (total == 0) return;
  const bool transposed = rows > cols;
  const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;

  Scratch partial(kSumBlocks * sizeof(double)), scale(sizeof(float));
  Scratch xs(size_t(m * n) * sizeof(float)), ys(size_t(m * n) * sizeof(float));
  Scratch as(size_t(m * m) * sizeof(float)), bs(size_t(m * m) * sizeof(float));
  float* x = xs.as<float>();
  float* y = ys.as<float>();
  float* a = as.as<float>();
  float* b = bs.as<float>();

  sumsq_partial_kernel<<<kSumBlocks, kBlock, 0, stream()>>>(partial.as<double>(), g.ptr<float>(),
                                                            total);
  ZAYA_GPU_LAUNCH_CHECK();
  scale_kernel<<<1, kBlock, 0, stream()>>>(scale.as<float>(), partial.as<double>(), kSumBlocks);
  ZAYA_GPU_LAUNCH_CHECK();
  if (transposed) {
    transpose(x, g.ptr<float>(), rows, cols, scale.as<float>());  // x[c,r] = g[r,c] · scale
  } else {
    scaled_copy_kernel<<<blocks_for(total), kBlock, 0, stream()>>>(x, g.ptr<float>(), total,
                                                                   scale.as<float>());
    ZAYA_GPU_LAUNCH_CHECK();
  }

  for (int s = 0; s < steps; ++s) {
    if (symmetric) {
      syrk_tiled(m, n, 1.0f, x, n, 0.0f, a, m);  // A = X·Xᵀ
    } else {
      gemm_f32(m, m, n, 1.0f, x, x, true, 0.0f, a);
    }
    scale_by_kernel<<<blocks_for(m * m), kBlock, 0, stream()>>>(b, a, m * m, float(kB));
    ZAYA_GPU_LAUNCH_CHECK();
    if (symmetric) {
      syrk_tiled(m, m, float(kC), a, m, 1.0f, b, m);  // B += c·A·Aᵀ (A symmetric)
    } else {
      gemm_f32(m, m, m, float(kC), a, a, false, 1.0f, b);
    }
    ZAYA_GPU_CHECK(
        cudaMemcpyAsync(y, x, size_t(m * n) * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
    gemm_f32(m, n, m, 1.0f, b, x, false, float(kA), y);  // Y = a·X + B·X
    std::swap(x, y);
  }

  if (transposed) {
    transpose(out.ptr<float>(), x, m, n, nullptr);  // out[r,c] = x[c,r]
  } else {
    ZAYA_GPU_CHECK(cudaMemcpyAsync(out.data, x, size_t(total) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream()));
  }
}

}  // namespace zaya::ops::gpu
