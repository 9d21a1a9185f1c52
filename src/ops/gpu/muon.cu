// newton_schulz on the GPU (ops.h "optimizer math"), as ops/cpu/muon.cpp: Muon's quintic
// Newton–Schulz orthogonalisation on the short side. For G [rows,cols], m = min, n = max:
// X [m,n] = G/(‖G‖_F + 1e-7) (the sum of squares in double: per-block partials and one fixed-order
// final block per matrix, the scale rounded to f32 on the device), then per step
//   A = X·Xᵀ,  B = a·I + b·A + c·A·A,  X ← B·X,   (a,b,c) = (3.4445, −4.7750, 2.0315)
// (a·X + (b·A + c·A·A)·X as one product, as the CPU does). A tall G (rows > cols) is not
// transposed: W = G's layout stands for Xᵀ, A = Wᵀ·W and W ← W·B (B is symmetric), the transposes
// being operand flags of gemm(). symmetric: A and c·A·A as syrk_upper (syrk.h: the upper
// triangle's block rows, library GEMMs) then sym_fill; else each a general gemm(). g [E,rows,cols]:
// the E norms in one pair of kernels, then each matrix's steps back to back, into out's slice.
//
// Kernels and passes per step, fp32 symmetric (m² = the Gram matrix, mn = the iterate):
//   syrk A (writes the triangle, ~m²/2) · sym_fill: A's upper read, its lower and B = b·A + a·I
//   written (2m²) · syrk B += c·A·A (reads and writes B's triangle) · sym_fill mirrors B (m²) ·
//   gemm X ← B·X (beta 0: C not read; the last step writes out).
// Before: syrk A · scale_by B = b·A (2m²) · syrk B · memcpy Y = X (2mn) · gemm Y = a·Y + B·X (reads
// Y: mn), plus a transpose of a tall G in and out (4mn) and a final copy of a wide one (2mn). So
// the per-step passes outside the products went from 2m² + 3mn to 3m² (m = n: 5m² → 3m²), and the
// input/output transposes and copies are gone (the first scaled copy and the last product read g
// and write out directly). The plain path is the same with full gemm()s and no mirror of B.
//
// bf16: the products' operands X, A, B are BF16 copies (F32 accumulation and outputs): the scaled
// copy writes X in BF16 only, sym_fill writes A's and B's BF16 copies (instead of mirroring), and
// after each product but the last a conversion writes the next X in BF16 (mn read, mn/2 written).
// The rounding of every operand to 8 bits of mantissa is the error bf16 adds
// (tests/ops/gpu/test_muon.cpp).
#include "ops/backend.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gemm.h"
#include "ops/gpu/syrk.h"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
constexpr int kSumBlocks =
    1024;  // partials of the sum of squares per matrix (fixed: deterministic)

// Block (x, e): partial x of matrix e's sum of squares.
__global__ void __launch_bounds__(kBlock)
    sumsq_partial_kernel(double* partial, const float* g, int64_t n) {
  __shared__ double red[kMaxWarpsPerBlock];
  g += int64_t(blockIdx.y) * n;
  double s = 0;
  ZAYA_GPU_FOR(i, n) {
    const double v = g[i];
    s += v * v;
  }
  s = block_sum(s, red);
  if (threadIdx.x == 0) partial[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = s;
}

// Block e: scale[e] = float(1 / (√Σ partial[e] + 1e-7)).
__global__ void __launch_bounds__(kBlock)
    scale_kernel(float* scale, const double* partial, int count) {
  __shared__ double red[kMaxWarpsPerBlock];
  partial += int64_t(blockIdx.x) * count;
  double s = 0;
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) s += partial[i];
  s = block_sum(s, red);
  if (threadIdx.x == 0) scale[blockIdx.x] = float(1.0 / (sqrt(s) + 1e-7));
}

// dst32 (F32) or dst16 (BF16 bits), whichever is not null, = src · *scale.
__global__ void scaled_copy_kernel(float* dst32, uint16_t* dst16, const float* src, int64_t n,
                                   const float* scale) {
  const float s = *scale;
  ZAYA_GPU_FOR(i, n) {
    const float v = src[i] * s;
    if (dst32) {
      dst32[i] = v;
    } else {
      dst16[i] = float_to_bf16_bits(v);
    }
  }
}

__global__ void to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  ZAYA_GPU_FOR(i, n) dst[i] = float_to_bf16_bits(src[i]);
}

// A matrix operand of gemm(): F32 or BF16 (bits) data [rows, ld] as stored.
GemmOperand operand(const void* data, bool bf16, int64_t ld, bool transposed) {
  return GemmOperand{data, bf16 ? DType::BF16 : DType::F32, ld, transposed};
}

// The scratch of one call: the iterate (F32 or BF16), the next one (F32: a product's output),
// A and B (F32) and, for bf16, A's and B's BF16 copies.
struct Work {
  int64_t m, n;
  bool tall, symmetric, bf16;
  Scratch xs, ys, as, bs, a16s, b16s;
  Work(int64_t m_, int64_t n_, bool tall_, bool symmetric_, bool bf16_)
      : m(m_),
        n(n_),
        tall(tall_),
        symmetric(symmetric_),
        bf16(bf16_),
        xs(size_t(m * n) * (bf16 ? 2 : 4)),
        ys(size_t(m * n) * 4),
        as(size_t(m * m) * 4),
        bs(size_t(m * m) * 4),
        a16s(bf16 ? size_t(m * m) * 2 : 0),
        b16s(bf16 ? size_t(m * m) * 2 : 0) {}
  void* x = xs.as<void>();
  float* y = ys.as<float>();
};

// C [m,m] = alpha · P·Pᵀ + beta · C, P the [m,k] operand x: the triangle or a general GEMM.
void gram(const Work& w, int64_t k, float alpha, const GemmOperand& x, float beta, float* c) {
  if (w.symmetric) return syrk_upper(w.m, k, alpha, x, beta, c, w.m, syrk_block(w.m));
  Gemm g;
  g.M = w.m, g.N = w.m, g.K = k;
  g.a = x;
  g.b = GemmOperand{x.data, x.dtype, x.ld, !x.transposed};
  g.c = c, g.ldc = w.m;
  g.alpha = alpha, g.beta = beta;
  gemm(g);
}

// One matrix's steps: X (already scaled into w.x) → out.
void iterate(Work& w, float* out, int steps) {
  const int64_t m = w.m, n = w.n;
  float* a = w.as.as<float>();
  float* b = w.bs.as<float>();
  uint16_t* a16 = w.a16s.as<uint16_t>();
  uint16_t* b16 = w.b16s.as<uint16_t>();
  // X's layout: wide X [m,n] (row stride n), tall W = Xᵀ [n,m] (row stride m, read transposed).
  const int64_t ld = w.tall ? m : n;
  for (int s = 0; s < steps; ++s) {
    const GemmOperand x = operand(w.x, w.bf16, ld, w.tall);
    gram(w, n, 1.0f, x, 0.0f, a);  // A = X·Xᵀ (its upper triangle when symmetric)
    // B = b·A + a·I; A mirrored (F32) or rounded (BF16) for the next product
    sym_fill(a, m, {w.bf16 ? nullptr : a, b, kB, kA, w.bf16 ? a16 : nullptr});
    gram(w, m, kC, operand(w.bf16 ? (const void*)a16 : a, w.bf16, m, false), 1.0f, b);
    if (w.bf16) {
      sym_fill(b, m, {nullptr, nullptr, 1, 0, b16});
    } else if (w.symmetric) {
      sym_fill(b, m, {b, nullptr, 1, 0, nullptr});
    }
    const GemmOperand bo = operand(w.bf16 ? (const void*)b16 : b, w.bf16, m, false);
    const GemmOperand xo = operand(w.x, w.bf16, ld, false);
    Gemm g;  // X ← B·X [m,n], or W ← W·B [n,m]
    g.M = w.tall ? n : m, g.N = w.tall ? m : n, g.K = m;
    g.a = w.tall ? xo : bo;
    g.b = w.tall ? bo : xo;
    g.c = s + 1 == steps ? out : w.y, g.ldc = ld;
    gemm(g);
    if (s + 1 == steps) break;
    if (w.bf16) {
      to_bf16_kernel<<<blocks_for(m * n), kBlock, 0, stream()>>>(static_cast<uint16_t*>(w.x), w.y,
                                                                 m * n);
      ZAYA_GPU_LAUNCH_CHECK();
    } else {  // the output is the next iterate
      float* next = w.y;
      w.y = static_cast<float*>(w.x);
      w.x = next;
    }
  }
}

}  // namespace

void newton_schulz(const Tensor& out, const Tensor& g, int steps, bool symmetric, bool bf16) {
  const bool batched = g.ndim == 3;
  const int64_t count = batched ? g.shape[0] : 1;
  const int64_t rows = g.shape[batched ? 1 : 0], cols = g.shape[batched ? 2 : 1];
  const int64_t each = rows * cols;
  ZAYA_ASSERT(count <= 65535, "newton_schulz: {} matrices in one call (at most 65535)", count);
  if (each == 0 || count == 0) return;
  const bool tall = rows > cols;
  const int64_t m = tall ? cols : rows, n = tall ? rows : cols;

  Scratch partial(size_t(count) * kSumBlocks * sizeof(double)), scales(size_t(count) * 4);
  sumsq_partial_kernel<<<dim3(kSumBlocks, unsigned(count)), kBlock, 0, stream()>>>(
      partial.as<double>(), g.ptr<float>(), each);
  ZAYA_GPU_LAUNCH_CHECK();
  scale_kernel<<<unsigned(count), kBlock, 0, stream()>>>(scales.as<float>(), partial.as<double>(),
                                                         kSumBlocks);
  ZAYA_GPU_LAUNCH_CHECK();

  Work w(steps > 0 ? m : 0, n, tall, symmetric, bf16);
  for (int64_t e = 0; e < count; ++e) {
    const float* src = g.ptr<float>() + e * each;
    float* dst = out.ptr<float>() + e * each;
    const float* scale = scales.as<float>() + e;
    if (steps == 0) {  // only the normalisation, in g's layout
      scaled_copy_kernel<<<blocks_for(each), kBlock, 0, stream()>>>(dst, nullptr, src, each, scale);
      ZAYA_GPU_LAUNCH_CHECK();
      continue;
    }
    scaled_copy_kernel<<<blocks_for(each), kBlock, 0, stream()>>>(
        bf16 ? nullptr : static_cast<float*>(w.x), bf16 ? static_cast<uint16_t*>(w.x) : nullptr,
        src, each, scale);
    ZAYA_GPU_LAUNCH_CHECK();
    iterate(w, dst, steps);
  }
}

}  // namespace zaya::ops::gpu
