// Causal GQA attention through GEMMs (ZAYA_GPU_ATTENTION=gemm; attention.h): the flash kernels of
// attention.cu run their products as scalar FMAs, while here every product is a gemm() — cuBLASLt
// on NVIDIA (tensor cores under train.precision = bf16), the tiled kernel elsewhere — with the
// score rows materialised a block at a time. The same math and the same saved lse as the flash
// path, so either backward follows either forward.
//
// Per batch row b and query head h (kv head g = h / (Hq/Hk)), per block of query rows
// [r0, r1) (≤ kScoreFloats / T rows: the score block stays ≤ 256 MiB), over the keys c0 … r1 − 1
// (c0 = 0; with a window W, c0 = max(0, r0 − W + 1), the first key of the block's first row):
//   forward   S = (1/√d)·Q_blk·K[c0, r1)ᵀ [rows, r1 − c0]; softmax_rows: P = softmax over the
//             visible keys (t − W < τ ≤ t; 0 elsewhere), lse; O_blk = P·V[c0, r1).
//   backward  S again, P = exp(S − lse) (masked); dV += Pᵀ·dO_blk; dP = dO_blk·Vᵀ;
//             dS = P ⊙ (dP − Δ) with Δ = ⟨dO, O⟩ per row (attention.cu's row_dot_kernel);
//             dQ_blk = (1/√d)·dS·K; dK += (1/√d)·dSᵀ·Q_blk (all over keys [c0, r1)). dK, dV start
//             at zero and sum over the blocks and the Hq/Hk query heads of g (fixed order:
//             deterministic).
// Windowed blocks have max(256, W) rows (fewer where rows × (rows + W − 1) scores would pass the
// 256 MiB), so a call computes about T·(rows + W) scores: O(T·W) for W ≥ 256, and never more than
// the unwindowed T²/2 plus a block.
// Q, K, V, O and their gradients are [B, T, H, d]: one head's rows are a matrix of row stride H·d.
// The masked upper triangle of the last key columns (and, windowed, the lower one of the first)
// is computed and discarded (at most one block's rows × rows each); blocks skip the keys after
// their last row and before their first row's window.
#include <cmath>
#include <cstdint>

#include "ops/gpu/attention.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gemm.h"
#include "ops/gpu/runtime.h"

namespace zaya::gpu {

namespace {

constexpr int64_t kScoreFloats = int64_t(1) << 26;  // one score block: 256 MiB of f32

// Column j of a score block is key c0 + j and row i is query position r0 + i; with rel = r0 − c0,
// row i counts columns first_col(rel + i, w) … rel + i (w = 0: every earlier key).
__device__ __forceinline__ int64_t first_col(int64_t last, int64_t w) {
  return w > 0 && last - w + 1 > 0 ? last - w + 1 : 0;
}

// Softmax of the counted scores of each row of the block [rows, cols] at S (row stride cols) in
// place (0 elsewhere) and lse[i].
__global__ void softmax_rows_kernel(float* S, float* lse, int64_t rows, int64_t cols, int64_t rel,
                                    int64_t w) {
  __shared__ float partials[kMaxWarpsPerBlock];
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    float* s = S + i * cols;
    const int64_t n = rel + i + 1 < cols ? rel + i + 1 : cols;  // the counted keys end here
    const int64_t j0 = first_col(rel + i, w);                   // and start here
    float m = -INFINITY;
    for (int64_t j = j0 + threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, s[j]);
    m = block_max(m, partials);
    float sum = 0.f;
    for (int64_t j = j0 + threadIdx.x; j < n; j += blockDim.x) sum += expf(s[j] - m);
    sum = block_sum(sum, partials);
    const float inv = 1.f / sum;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      s[j] = j >= j0 && j < n ? expf(s[j] - m) * inv : 0.f;
    if (threadIdx.x == 0) lse[i] = m + logf(sum);
  }
}

// P = exp(S − lse) on the counted keys (0 elsewhere), in place: the backward's probabilities.
__global__ void probs_kernel(float* S, const float* lse, int64_t rows, int64_t cols, int64_t rel,
                             int64_t w) {
  ZAYA_GPU_FOR(e, rows * cols) {
    const int64_t i = e / cols, j = e % cols;
    S[e] = j <= rel + i && j >= first_col(rel + i, w) ? expf(S[e] - lse[i]) : 0.f;
  }
}

// dS = P ⊙ (dP − Δ) in place of dP (P is 0 on the masked keys, so dS is too).
__global__ void dscores_kernel(float* dP, const float* P, const float* delta, int64_t rows,
                               int64_t cols) {
  ZAYA_GPU_FOR(e, rows * cols) dP[e] = P[e] * (dP[e] - delta[e / cols]);
}

GemmOperand f32(const float* p, int64_t ld, bool transposed = false) {
  return GemmOperand{p, DType::F32, ld, transposed};
}

void run(int64_t M, int64_t N, int64_t K, GemmOperand a, GemmOperand b, float* c, int64_t ldc,
         float alpha, float beta) {
  Gemm g;
  g.M = M, g.N = N, g.K = K, g.a = a, g.b = b, g.c = c, g.ldc = ldc;
  g.alpha = alpha, g.beta = beta;
  gemm(g);
}

struct Shape {
  int64_t B, T, Hq, Hk, d;
  int64_t w;  // kernel_window(): 0 = every earlier key
  // Query rows per score block.
  int64_t block_rows() const {
    if (w > 0) {
      int64_t r = w > 256 ? w : 256;
      while (r > 1 && r * (r + w - 1) > kScoreFloats) r /= 2;
      return r < T ? r : T;
    }
    const int64_t r = kScoreFloats / (T > 0 ? T : 1);
    return r < 1 ? 1 : (r < T ? r : T);
  }
  // The widest score block: its keys [first_key(r0), r0 + rows).
  int64_t block_cols() const {
    const int64_t c = w > 0 ? block_rows() + w - 1 : T;
    return c < T ? c : T;
  }
  // The first key of the block starting at query row r0.
  int64_t first_key(int64_t r0) const { return w > 0 && r0 - w + 1 > 0 ? r0 - w + 1 : 0; }
  int64_t q_ld() const { return Hq * d; }
  int64_t kv_ld() const { return Hk * d; }
  // Offsets of (b, t, head) in [B,T,H,d] tensors.
  int64_t q_at(int64_t b, int64_t t, int64_t h) const { return ((b * T + t) * Hq + h) * d; }
  int64_t kv_at(int64_t b, int64_t t, int64_t g) const { return ((b * T + t) * Hk + g) * d; }
};

// For each (b, h) and each block [r0, r1) of query rows: f(b, h, g, r0, rows).
template <class F>
void for_each_block(const Shape& s, F&& f) {
  const int64_t R = s.block_rows(), group = s.Hq / s.Hk;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t r0 = 0; r0 < s.T; r0 += R) f(b, h, h / group, r0, R < s.T - r0 ? R : s.T - r0);
}

}  // namespace

void gemm_attention_forward(float* o, float* lse, const float* q, const float* k, const float* v,
                            int64_t B, int64_t T, int64_t Hq, int64_t Hk, int64_t d,
                            int64_t window) {
  const Shape s{B, T, Hq, Hk, d, kernel_window(window, T)};
  const float scale = 1.0f / std::sqrt(float(d));
  Scratch scores(size_t(s.block_rows()) * size_t(s.block_cols()) * sizeof(float));
  float* S = scores.as<float>();
  for_each_block(s, [&](int64_t b, int64_t h, int64_t g, int64_t r0, int64_t rows) {
    const int64_t c0 = s.first_key(r0), cols = r0 + rows - c0;  // keys c0 … the last row
    run(rows, cols, d, f32(q + s.q_at(b, r0, h), s.q_ld()),
        f32(k + s.kv_at(b, c0, g), s.kv_ld(), true), S, cols, scale, 0.f);
    softmax_rows_kernel<<<blocks_for(rows, 1), kBlock, 0, stream()>>>(
        S, lse + (b * Hq + h) * T + r0, rows, cols, r0 - c0, s.w);
    ZAYA_GPU_LAUNCH_CHECK();
    run(rows, d, cols, f32(S, cols), f32(v + s.kv_at(b, c0, g), s.kv_ld()), o + s.q_at(b, r0, h),
        s.q_ld(), 1.f, 0.f);
  });
}

void gemm_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                             const float* k, const float* v, const float* lse, const float* delta,
                             int64_t B, int64_t T, int64_t Hq, int64_t Hk, int64_t d,
                             int64_t window) {
  const Shape s{B, T, Hq, Hk, d, kernel_window(window, T)};
  const float scale = 1.0f / std::sqrt(float(d));
  const size_t block = size_t(s.block_rows()) * size_t(s.block_cols());
  Scratch probs(block * sizeof(float)), dscores(block * sizeof(float));
  float* P = probs.as<float>();
  float* dS = dscores.as<float>();
  const size_t kv_bytes = size_t(B * T * Hk * d) * sizeof(float);
  ZAYA_GPU_CHECK(cudaMemsetAsync(dk, 0, kv_bytes, stream()));
  ZAYA_GPU_CHECK(cudaMemsetAsync(dv, 0, kv_bytes, stream()));
  for_each_block(s, [&](int64_t b, int64_t h, int64_t g, int64_t r0, int64_t rows) {
    const int64_t c0 = s.first_key(r0), cols = r0 + rows - c0, row0 = (b * Hq + h) * T + r0;
    const float* q_blk = q + s.q_at(b, r0, h);
    const float* do_blk = dout + s.q_at(b, r0, h);
    const float* k_g = k + s.kv_at(b, c0, g);
    const float* v_g = v + s.kv_at(b, c0, g);
    run(rows, cols, d, f32(q_blk, s.q_ld()), f32(k_g, s.kv_ld(), true), P, cols, scale, 0.f);
    const int64_t n = rows * cols;
    probs_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(P, lse + row0, rows, cols, r0 - c0, s.w);
    ZAYA_GPU_LAUNCH_CHECK();
    // dV[c0, c0 + cols) += Pᵀ · dO_blk
    run(cols, d, rows, f32(P, cols, true), f32(do_blk, s.q_ld()), dv + s.kv_at(b, c0, g), s.kv_ld(),
        1.f, 1.f);
    // dP = dO_blk · Vᵀ, then dS in place
    run(rows, cols, d, f32(do_blk, s.q_ld()), f32(v_g, s.kv_ld(), true), dS, cols, 1.f, 0.f);
    dscores_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dS, P, delta + row0, rows, cols);
    ZAYA_GPU_LAUNCH_CHECK();
    // dQ_blk = scale · dS · K;  dK[c0, c0 + cols) += scale · dSᵀ · Q_blk
    run(rows, d, cols, f32(dS, cols), f32(k_g, s.kv_ld()), dq + s.q_at(b, r0, h), s.q_ld(), scale,
        0.f);
    run(cols, d, rows, f32(dS, cols, true), f32(q_blk, s.q_ld()), dk + s.kv_at(b, c0, g), s.kv_ld(),
        scale, 1.f);
  });
}

}  // namespace zaya::gpu
