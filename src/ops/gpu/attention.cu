// attention_forward / attention_backward on the GPU: causal GQA flash attention (docs/model.md §4.7,
// §8.5), the same algorithm as ops/cpu/attention.cpp. q[B,T,Hq,d], k,v[B,T,Hk,d], query head h
// reads kv head h/G (G = Hq/Hk); scores S = (q/√d)·kᵀ with q pre-scaled when its tile is loaded;
// online softmax in f32; lse[B,Hq,T] saved for the backward, which recomputes P = exp(S − lse)
// tile by tile. No T×T buffer: shared-memory tiles of Q, K, V and one score tile per block.
//
// A block is 256 threads seen as a 16 × 16 grid (tx = tid % 16, ty = tid / 16). A thread owns RM
// consecutive rows (ty·RM + i) of every product it takes part in and RN columns: in a score
// product (mm_nt, both operands with the head dim contiguous) columns tx + 16·j; in an output
// product (mm_nn, right operand [K][DP]) columns col_of<RN>(j, tx) (float4 groups tx·4 + 64·(j/4)
// when RN ≥ 4, else tx + 16·j). Shared tiles have the head dim zero-padded to DP (16, 32, 64,
// 128 or 256, a template parameter) and rows padded by 4 floats (ld = DP + 4), so the 16 rows a
// quarter-warp reads fall in distinct banks. Row reductions of the softmax are over the 16
// threads of a thread row (16 aligned lanes of one warp, on 32- and 64-lane warps alike).
//
// Kernels (every output element is written by one thread in a fixed order: deterministic):
//   flash_forward_kernel  block (b·Hq + h, query tile), key tiles 0 … the diagonal;
//   row_dot_kernel        Δ[b,h,t] = ⟨dO, O⟩, one warp per row;
//   dkv_kernel            block (b·Hk + g, key tile): the G heads of g, then query tiles from
//                         the diagonal on; dK, dV accumulate in registers (GQA sum inside);
//   dq_kernel             block (b·Hq + h, query tile), key tiles 0 … the diagonal.
// Tile sizes per DP keep shared memory within 64 KiB on AMD (kSmallLds) up to head size 128 (above,
// even 16-row tiles need more: set_smem's error names ZAYA_GPU_ATTENTION=gemm) and use NVIDIA's
// opt-in shared memory (set_smem) above 48 KiB.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "ops/backend.h"
#include "ops/gpu/attention.h"
#include "ops/gpu/common.cuh"

namespace zaya::gpu {

namespace {

constexpr int kThreads = 256;  // 16 × 16
constexpr int kTile = 16;      // the thread grid's side

#if defined(ZAYA_GPU_HIP)
constexpr bool kSmallLds = true;  // 64 KiB of LDS per workgroup on AMD
#else
constexpr bool kSmallLds = false;
#endif

// Column j (of RN) of an output product owned by thread column tx.
template <int RN>
__device__ __forceinline__ int col_of(int j, int tx) {
  if constexpr (RN >= 4) {
    return (j / 4) * 64 + tx * 4 + (j % 4);
  } else {
    return tx + kTile * j;
  }
}

__device__ __forceinline__ float component(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// c[i][j] += Σ_e A[ty·RM + i][e] · B[tx + 16·j][e], e ∈ [0, K) (K % 4 == 0, 16-byte aligned rows).
template <int RM, int RN, int K>
__device__ __forceinline__ void mm_nt(float (&c)[RM][RN], const float* A, int lda, const float* B,
                                      int ldb, int ty, int tx) {
#pragma unroll 4
  for (int e = 0; e < K; e += 4) {
    float4 a[RM], b[RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
      a[i] = *reinterpret_cast<const float4*>(A + (ty * RM + i) * lda + e);
#pragma unroll
    for (int j = 0; j < RN; ++j)
      b[j] = *reinterpret_cast<const float4*>(B + (tx + kTile * j) * ldb + e);
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        c[i][j] = fmaf(a[i].x, b[j].x, c[i][j]);
        c[i][j] = fmaf(a[i].y, b[j].y, c[i][j]);
        c[i][j] = fmaf(a[i].z, b[j].z, c[i][j]);
        c[i][j] = fmaf(a[i].w, b[j].w, c[i][j]);
      }
  }
}

// c[i][j] += Σ_k A[ty·RM + i][k] · B[k][col_of<RN>(j, tx)], k ∈ [0, K) (K % 4 == 0).
template <int RM, int RN, int K>
__device__ __forceinline__ void mm_nn(float (&c)[RM][RN], const float* A, int lda, const float* B,
                                      int ldb, int ty, int tx) {
#pragma unroll 2
  for (int k = 0; k < K; k += 4) {
    float4 a[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i)
      a[i] = *reinterpret_cast<const float4*>(A + (ty * RM + i) * lda + k);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const float* brow = B + (k + kk) * ldb;
      float b[RN];
      if constexpr (RN >= 4) {
#pragma unroll
        for (int j4 = 0; j4 < RN / 4; ++j4) {
          const float4 t = *reinterpret_cast<const float4*>(brow + j4 * 64 + tx * 4);
          b[4 * j4] = t.x, b[4 * j4 + 1] = t.y, b[4 * j4 + 2] = t.z, b[4 * j4 + 3] = t.w;
        }
      } else {
#pragma unroll
        for (int j = 0; j < RN; ++j) b[j] = brow[tx + kTile * j];
      }
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float av = component(a[i], kk);
#pragma unroll
        for (int j = 0; j < RN; ++j) c[i][j] = fmaf(av, b[j], c[i][j]);
      }
    }
  }
}

template <int R, int C>
__device__ __forceinline__ void zero(float (&a)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) a[i][j] = 0.f;
}

// The backward's two score products over the padded head dim (tiles with ld = DP + 4):
// s = A·Bᵀ (scores) and dp = A2·B2ᵀ (output-gradient scores).
template <int RM, int RS, int DP>
__device__ __forceinline__ void score_pair(float (&s)[RM][RS], float (&dp)[RM][RS], const float* A,
                                           const float* B, const float* A2, const float* B2, int ty,
                                           int tx) {
  zero(s);
  zero(dp);
  mm_nt<RM, RS, DP>(s, A, DP + 4, B, DP + 4, ty, tx);
  mm_nt<RM, RS, DP>(dp, A2, DP + 4, B2, DP + 4, ty, tx);
}

// dst[ROWS][DP] (row stride ld) = sc · rows 0…nrows−1 of src (row stride rs, d used columns), zero
// elsewhere. vec: d == DP and src 16-byte aligned with rs % 4 == 0 (float4 loads). All threads.
template <int ROWS, int DP>
__device__ __forceinline__ void load_tile(float* dst, int ld, const float* src, int64_t rs,
                                          int nrows, int d, float sc, bool vec) {
  if (vec) {
    constexpr int V = DP / 4;
    for (int idx = threadIdx.x; idx < ROWS * V; idx += kThreads) {
      const int r = idx / V, e = (idx % V) * 4;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < nrows) {
        x = *reinterpret_cast<const float4*>(src + r * rs + e);
        x.x *= sc, x.y *= sc, x.z *= sc, x.w *= sc;
      }
      *reinterpret_cast<float4*>(dst + r * ld + e) = x;
    }
  } else {
    for (int idx = threadIdx.x; idx < ROWS * DP; idx += kThreads) {
      const int r = idx / DP, e = idx % DP;
      dst[r * ld + e] = (r < nrows && e < d) ? src[r * rs + e] * sc : 0.f;
    }
  }
}

// Max / sum over the 16 threads of a thread row (16 aligned consecutive lanes of one warp).
__device__ __forceinline__ float row16_max(float v) {
  for (int m = kTile / 2; m > 0; m /= 2) v = fmaxf(v, ZAYA_SHFL_XOR(v, m));
  return v;
}
__device__ __forceinline__ float row16_sum(float v) {
  for (int m = kTile / 2; m > 0; m /= 2) v += ZAYA_SHFL_XOR(v, m);
  return v;
}

// Flash forward over one (b, query head, query tile): q[B,Tq,Hq,d], k,v[B,Tk,Hk,d] with Tk ≥ Tq;
// query row t sits at position t + (Tk − Tq) and sees keys τ ≤ that position. o[B,Tq,Hq,d];
// lse[B,Hq,Tq] (may be null). Grid (B·Hq, query tiles), the longest rows first.
// Shared: Q[BQ][DP+4] (scaled), KV[BK][DP+4] (K, then V, of one key tile), P[BQ][BK+4].
template <int DP, int BQ, int BK>
constexpr int forward_smem_floats() {
  return BQ * (DP + 4) + BK * (DP + 4) + BQ * (BK + 4);
}

template <int DP, int BQ, int BK>
__global__ __launch_bounds__(kThreads) void flash_forward_kernel(float* o, float* lse,
                                                                 const float* q, const float* k,
                                                                 const float* v, int Tq, int Tk,
                                                                 int Hq, int Hk, int d, float scale,
                                                                 bool vec) {
  constexpr int LD = DP + 4, LP = BK + 4, RM = BQ / kTile, RS = BK / kTile, RN = DP / kTile;
  extern __shared__ float4 smem4[];
  float* sQ = reinterpret_cast<float*>(smem4);
  float* sKV = sQ + BQ * LD;
  float* sP = sKV + BK * LD;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int t0 = (gridDim.y - 1 - blockIdx.y) * BQ, nq = min(BQ, Tq - t0);
  const int bh = blockIdx.x, b = bh / Hq, h = bh % Hq, g = h / (Hq / Hk);
  const int off = Tk - Tq;
  const int64_t qrs = int64_t(Hq) * d, krs = int64_t(Hk) * d;
  load_tile<BQ, DP>(sQ, LD, q + ((int64_t(b) * Tq + t0) * Hq + h) * d, qrs, nq, d, scale, vec);

  float acc[RM][RN], m[RM], l[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -INFINITY, l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;
  }
  // Keys 0 … last are visible to some row of the tile; padding rows (t ≥ Tq) see keys ≤ Tk − 1.
  const int last = min(t0 + BQ - 1 + off, Tk - 1);
  const int tiles = last / BK + 1;
  for (int jt = 0; jt < tiles; ++jt) {
    const int tau0 = jt * BK, nk = min(BK, Tk - tau0);
    const int64_t kv0 = ((int64_t(b) * Tk + tau0) * Hk + g) * d;
    __syncthreads();  // the previous tile's P·V is done with sKV and sP
    load_tile<BK, DP>(sKV, LD, k + kv0, krs, nk, d, 1.f, vec);
    __syncthreads();
    float s[RM][RS];
    zero(s);
    mm_nt<RM, RS, DP>(s, sQ, LD, sKV, LD, ty, tx);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int lim = min(t0 + ty * RM + i + off, Tk - 1);  // last key this row sees
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < RS; ++j) {
        if (tau0 + tx + kTile * j > lim) s[i][j] = -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      const float m_new = fmaxf(m[i], row16_max(mx));  // finite: key 0 is in the first tile
      const float alpha = expf(m[i] - m_new);          // 0 on the first tile
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < RS; ++j) {
        const float p = expf(s[i][j] - m_new);
        sum += p;
        sP[(ty * RM + i) * LP + tx + kTile * j] = p;
      }
      l[i] = l[i] * alpha + row16_sum(sum);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < RN; ++j) acc[i][j] *= alpha;
    }
    __syncthreads();  // every thread is done reading K
    load_tile<BK, DP>(sKV, LD, v + kv0, krs, nk, d, 1.f, vec);
    __syncthreads();
    mm_nn<RM, RN, BK>(acc, sP, LP, sKV, LD, ty, tx);
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int t = t0 + ty * RM + i;
    if (t >= Tq) continue;
    const float inv = 1.0f / l[i];
    float* orow = o + ((int64_t(b) * Tq + t) * Hq + h) * d;
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const int e = col_of<RN>(j, tx);
      if (e < d) orow[e] = acc[i][j] * inv;
    }
    if (lse && tx == 0) lse[int64_t(bh) * Tq + t] = m[i] + logf(l[i]);
  }
}

// Δ[b,h,t] = Σ_e dO[b,t,h,e]·O[b,t,h,e]: one warp per row r = (b·T + t)·Hq + h.
__global__ void row_dot_kernel(float* D, const float* dout, const float* o, int64_t rows, int T,
                               int Hq, int d) {
  const int lane = threadIdx.x % kWarp;
  const int64_t stride = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; r < rows;
       r += stride) {
    const float* a = dout + r * d;
    const float* c = o + r * d;
    float acc = 0.f;
    for (int e = lane; e < d; e += kWarp) acc += a[e] * c[e];
    acc = warp_sum(acc);
    if (lane == 0) {
      const int64_t h = r % Hq, bt = r / Hq, b = bt / T, t = bt % T;
      D[(b * Hq + h) * T + t] = acc;
    }
  }
}

// dQ over one (b, query head h, query tile): key tiles 0 … the diagonal. Shared: Q (scaled) and
// dO [BQ][DP+4] of the tile, K and V [BK][DP+4] of a key tile, dS [BQ][BK+4].
// dQ = scale · Σ_j dS_j · K_j with dS = P ⊙ (dP − Δ), P = exp(S − lse) on τ ≤ t, dP = dO·Vᵀ.
template <int DP, int BQ, int BK>
constexpr int dq_smem_floats() {
  return 2 * BQ * (DP + 4) + 2 * BK * (DP + 4) + BQ * (BK + 4);
}

template <int DP, int BQ, int BK>
__global__ __launch_bounds__(kThreads) void dq_kernel(float* dq, const float* dout, const float* q,
                                                      const float* k, const float* v,
                                                      const float* lse, const float* D, int T,
                                                      int Hq, int Hk, int d, float scale,
                                                      bool vec) {
  constexpr int LD = DP + 4, LP = BK + 4, RM = BQ / kTile, RS = BK / kTile, RN = DP / kTile;
  extern __shared__ float4 smem4[];
  float* sQ = reinterpret_cast<float*>(smem4);
  float* sdO = sQ + BQ * LD;
  float* sK = sdO + BQ * LD;
  float* sV = sK + BK * LD;
  float* sdS = sV + BK * LD;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int t0 = (gridDim.y - 1 - blockIdx.y) * BQ, nq = min(BQ, T - t0);
  const int bh = blockIdx.x, b = bh / Hq, h = bh % Hq, g = h / (Hq / Hk);
  const int64_t qrs = int64_t(Hq) * d, krs = int64_t(Hk) * d;
  const int64_t q0 = ((int64_t(b) * T + t0) * Hq + h) * d;
  load_tile<BQ, DP>(sQ, LD, q + q0, qrs, nq, d, scale, vec);
  load_tile<BQ, DP>(sdO, LD, dout + q0, qrs, nq, d, 1.f, vec);
  float lse_r[RM], D_r[RM], acc[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int t = t0 + ty * RM + i;
    lse_r[i] = t < T ? lse[int64_t(bh) * T + t] : 0.f;
    D_r[i] = t < T ? D[int64_t(bh) * T + t] : 0.f;
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;
  }
  const int tiles = (t0 + nq - 1) / BK + 1;
  for (int jt = 0; jt < tiles; ++jt) {
    const int tau0 = jt * BK, nk = min(BK, T - tau0);
    const int64_t kv0 = ((int64_t(b) * T + tau0) * Hk + g) * d;
    __syncthreads();  // the previous tile's dS·K is done with sK and sdS
    load_tile<BK, DP>(sK, LD, k + kv0, krs, nk, d, 1.f, vec);
    load_tile<BK, DP>(sV, LD, v + kv0, krs, nk, d, 1.f, vec);
    __syncthreads();
    float s[RM][RS], dp[RM][RS];
    score_pair<RM, RS, DP>(s, dp, sQ, sK, sdO, sV, ty, tx);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int t = t0 + ty * RM + i;
#pragma unroll
      for (int j = 0; j < RS; ++j) {
        const bool visible = tau0 + tx + kTile * j <= t && t < T;
        const float p = visible ? expf(s[i][j] - lse_r[i]) : 0.f;
        sdS[(ty * RM + i) * LP + tx + kTile * j] = visible ? p * (dp[i][j] - D_r[i]) : 0.f;
      }
    }
    __syncthreads();
    mm_nn<RM, RN, BK>(acc, sdS, LP, sK, LD, ty, tx);
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int t = t0 + ty * RM + i;
    if (t >= T) continue;
    float* row = dq + ((int64_t(b) * T + t) * Hq + h) * d;
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const int e = col_of<RN>(j, tx);
      if (e < d) row[e] = acc[i][j] * scale;
    }
  }
}

// dK, dV over one (b, kv head g, key tile): the G query heads of g, each over the query tiles from
// the diagonal on. Rows are keys here: Sᵀ = K·Qsᵀ, dPᵀ = V·dOᵀ, then dV += Pᵀ·dO and
// dK += dSᵀ·Qs (Qs already carries 1/√d). Shared: K, V [BK][DP+4]; Q (scaled), dO [BQ][DP+4] of a
// query tile; Pᵀ, dSᵀ [BK][BQ+4]; lse and Δ of the query tile [BQ].
template <int DP, int BK, int BQ>
constexpr int dkv_smem_floats() {
  return 2 * BK * (DP + 4) + 2 * BQ * (DP + 4) + 2 * BK * (BQ + 4) + 2 * BQ;
}

template <int DP, int BK, int BQ>
__global__ __launch_bounds__(kThreads) void dkv_kernel(float* dk, float* dv, const float* dout,
                                                       const float* q, const float* k,
                                                       const float* v, const float* lse,
                                                       const float* D, int T, int Hq, int Hk, int d,
                                                       float scale, bool vec) {
  constexpr int LD = DP + 4, LQ = BQ + 4, RM = BK / kTile, RS = BQ / kTile, RN = DP / kTile;
  extern __shared__ float4 smem4[];
  float* sK = reinterpret_cast<float*>(smem4);
  float* sV = sK + BK * LD;
  float* sQ = sV + BK * LD;
  float* sdO = sQ + BQ * LD;
  float* sPt = sdO + BQ * LD;
  float* sdSt = sPt + BK * LQ;
  float* sL = sdSt + BK * LQ;
  float* sD = sL + BQ;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int tau0 = blockIdx.y * BK, nk = min(BK, T - tau0);  // key tile 0 (most work) first
  const int bg = blockIdx.x, b = bg / Hk, g = bg % Hk, G = Hq / Hk;
  const int64_t qrs = int64_t(Hq) * d, krs = int64_t(Hk) * d;
  const int64_t kv0 = ((int64_t(b) * T + tau0) * Hk + g) * d;
  load_tile<BK, DP>(sK, LD, k + kv0, krs, nk, d, 1.f, vec);
  load_tile<BK, DP>(sV, LD, v + kv0, krs, nk, d, 1.f, vec);
  float dK[RM][RN], dV[RM][RN];
  zero(dK);
  zero(dV);
  const int qtiles = (T + BQ - 1) / BQ, i0 = tau0 / BQ;
  for (int h = g * G; h < (g + 1) * G; ++h) {
    for (int it = i0; it < qtiles; ++it) {
      const int t0 = it * BQ, nq = min(BQ, T - t0);
      const int64_t q0 = ((int64_t(b) * T + t0) * Hq + h) * d;
      const int64_t row0 = (int64_t(b) * Hq + h) * T + t0;
      __syncthreads();  // the previous query tile's products are done with its shared tiles
      load_tile<BQ, DP>(sQ, LD, q + q0, qrs, nq, d, scale, vec);
      load_tile<BQ, DP>(sdO, LD, dout + q0, qrs, nq, d, 1.f, vec);
      for (int r = threadIdx.x; r < BQ; r += kThreads) {
        sL[r] = r < nq ? lse[row0 + r] : 0.f;
        sD[r] = r < nq ? D[row0 + r] : 0.f;
      }
      __syncthreads();
      float st[RM][RS], dpt[RM][RS];
      score_pair<RM, RS, DP>(st, dpt, sK, sQ, sV, sdO, ty, tx);
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const int key = tau0 + ty * RM + i;
#pragma unroll
        for (int j = 0; j < RS; ++j) {
          const int c = tx + kTile * j, t = t0 + c;
          const bool visible = key <= t && t < T;
          const float p = visible ? expf(st[i][j] - sL[c]) : 0.f;
          sPt[(ty * RM + i) * LQ + c] = p;
          sdSt[(ty * RM + i) * LQ + c] = visible ? p * (dpt[i][j] - sD[c]) : 0.f;
        }
      }
      __syncthreads();
      mm_nn<RM, RN, BQ>(dV, sPt, LQ, sdO, LD, ty, tx);
      mm_nn<RM, RN, BQ>(dK, sdSt, LQ, sQ, LD, ty, tx);
    }
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int key = tau0 + ty * RM + i;
    if (key >= T) continue;
    const int64_t off = ((int64_t(b) * T + key) * Hk + g) * d;
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const int e = col_of<RN>(j, tx);
      if (e < d) {
        dk[off + e] = dK[i][j];
        dv[off + e] = dV[i][j];
      }
    }
  }
}

// Tile sizes per padded head size (rows of the block's own tile first). Tiles are ≥ 16 rows and
// lie on the grid's y (≤ 65535 blocks).
constexpr int64_t kMaxT = int64_t(16) * 65535;
template <int DP>
struct ForwardTiles {  // query rows, keys
  static constexpr int BQ = 64, BK = DP <= 64 ? 64 : 32;
};
template <int DP>
struct DqTiles {  // query rows, keys
  static constexpr int BQ = DP <= 64 ? 64 : (kSmallLds ? 16 : 32), BK = DP <= 32 ? 64 : 32;
};
template <int DP>
struct DkvTiles {  // keys, query columns
  static constexpr int BK = DP <= 32 || (DP == 64 && !kSmallLds) ? 64 : 32;
  static constexpr int BQ = DP >= 128 && kSmallLds ? 16 : 32;
};

// Asks for `bytes` of dynamic shared memory for `kernel`: opts in above 48 KiB on NVIDIA (AMD
// allows its 64 KiB without); a zaya::Error where the device has less per block (AMD at head
// sizes above 128).
void set_smem(const void* kernel, size_t bytes) {
  static const int limit = [] {
    int dev = 0, v = 0;
    ZAYA_GPU_CHECK(cudaGetDevice(&dev));
    ZAYA_GPU_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    // AMD: 64 KiB of LDS per workgroup without opt-in, should the runtime report less here.
    const int base = kSmallLds ? 64 * 1024 : 48 * 1024;
    return v > base ? v : base;
  }();
  if (bytes > size_t(limit))
    fail(
        "attention on the GPU: this head size's flash-attention tiles need {} bytes of shared "
        "memory per block and the device has {}; ZAYA_GPU_ATTENTION=gemm computes the attention "
        "through GEMMs instead",
        bytes, limit);
  if (!kSmallLds && bytes > 48 * 1024)
    ZAYA_GPU_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// Whether float4 loads of [rows, H, d] tensors are valid: d == DP and 16-byte aligned bases
// (row strides H·d are then multiples of 4).
bool vec_ok(int64_t d, int DP, std::initializer_list<const void*> ptrs) {
  if (d != DP) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Calls f(std::integral_constant<int, DP>{}) with the padded head size DP ≥ d (16 … 256; d ≤
// kFlashMaxHead, ops/gpu/support.h).
template <class F>
void with_padded_head(int64_t d, F&& f) {
  if (d <= 16) return f(std::integral_constant<int, 16>{});
  if (d <= 32) return f(std::integral_constant<int, 32>{});
  if (d <= 64) return f(std::integral_constant<int, 64>{});
  if (d <= 128) return f(std::integral_constant<int, 128>{});
  return f(std::integral_constant<int, 256>{});
}

struct Dims {
  int64_t B, T, Hq, Hk, d;
};

// The shapes of q [B,T,Hq,d] and k [B,T,Hk,d].
Dims attention_dims(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
}

// The launch grids: query or key tiles on the grid's y (at most 65535), B·Hq (B·Hk) on its x.
void check_grid(int64_t T, int64_t B, int64_t H) {
  ZAYA_ASSERT(T <= kMaxT && B * H < (int64_t(1) << 31),
              "flash attention: T ≤ 16·65535 and B·H < 2^31 (the launch grid)");
}

}  // namespace

void flash_attention_forward(float* o, float* lse, const float* q, const float* k, const float* v,
                             int64_t B, int64_t Tq, int64_t Tk, int64_t Hq, int64_t Hk, int64_t d) {
  check_grid(Tk, B, Hq);
  with_padded_head(d, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    constexpr int BQ = ForwardTiles<DP>::BQ, BK = ForwardTiles<DP>::BK;
    const size_t smem = sizeof(float) * forward_smem_floats<DP, BQ, BK>();
    set_smem(reinterpret_cast<const void*>(&flash_forward_kernel<DP, BQ, BK>), smem);
    const dim3 grid(unsigned(B * Hq), unsigned((Tq + BQ - 1) / BQ));
    flash_forward_kernel<DP, BQ, BK><<<grid, kThreads, smem, stream()>>>(
        o, lse, q, k, v, int(Tq), int(Tk), int(Hq), int(Hk), int(d), 1.0f / std::sqrt(float(d)),
        vec_ok(d, DP, {q, k, v}));
    ZAYA_GPU_LAUNCH_CHECK();
  });
}

}  // namespace zaya::gpu

namespace zaya::ops::gpu {

using namespace zaya::gpu;

void attention_forward(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window) {
  if (window > 0) fail("attention_forward: window {}: no GPU sliding-window kernel yet", window);
  const Dims s = attention_dims(q, k);
  check_grid(s.T, s.B, s.Hq);
  if (gpu_attention_path() == GpuAttentionPath::Gemm)
    return gemm_attention_forward(o.ptr<float>(), lse.ptr<float>(), q.ptr<float>(), k.ptr<float>(),
                                  v.ptr<float>(), s.B, s.T, s.Hq, s.Hk, s.d);
  flash_attention_forward(o.ptr<float>(), lse.ptr<float>(), q.ptr<float>(), k.ptr<float>(),
                          v.ptr<float>(), s.B, s.T, s.T, s.Hq, s.Hk, s.d);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& do_,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, int64_t window) {
  if (window > 0) fail("attention_backward: window {}: no GPU sliding-window kernel yet", window);
  const Dims s = attention_dims(q, k);
  check_grid(s.T, s.B, s.Hq);
  const int64_t rows = s.B * s.T * s.Hq;
  Scratch delta(size_t(rows) * sizeof(float));
  row_dot_kernel<<<blocks_for(rows, kBlock / 32), kBlock, 0, stream()>>>(
      delta.as<float>(), do_.ptr<float>(), o.ptr<float>(), rows, int(s.T), int(s.Hq), int(s.d));
  ZAYA_GPU_LAUNCH_CHECK();
  if (gpu_attention_path() == GpuAttentionPath::Gemm)
    return gemm_attention_backward(dq.ptr<float>(), dk.ptr<float>(), dv.ptr<float>(),
                                   do_.ptr<float>(), q.ptr<float>(), k.ptr<float>(), v.ptr<float>(),
                                   lse.ptr<float>(), delta.as<float>(), s.B, s.T, s.Hq, s.Hk, s.d);
  const float scale = 1.0f / std::sqrt(float(s.d));
  with_padded_head(s.d, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    const bool vec = vec_ok(s.d, DP, {do_.data, q.data, k.data, v.data, dq.data, dk.data, dv.data});
    {
      constexpr int BK = DkvTiles<DP>::BK, BQ = DkvTiles<DP>::BQ;
      const size_t smem = sizeof(float) * dkv_smem_floats<DP, BK, BQ>();
      set_smem(reinterpret_cast<const void*>(&dkv_kernel<DP, BK, BQ>), smem);
      const dim3 grid(unsigned(s.B * s.Hk), unsigned((s.T + BK - 1) / BK));
      dkv_kernel<DP, BK, BQ><<<grid, kThreads, smem, stream()>>>(
          dk.ptr<float>(), dv.ptr<float>(), do_.ptr<float>(), q.ptr<float>(), k.ptr<float>(),
          v.ptr<float>(), lse.ptr<float>(), delta.as<float>(), int(s.T), int(s.Hq), int(s.Hk),
          int(s.d), scale, vec);
      ZAYA_GPU_LAUNCH_CHECK();
    }
    {
      constexpr int BQ = DqTiles<DP>::BQ, BK = DqTiles<DP>::BK;
      const size_t smem = sizeof(float) * dq_smem_floats<DP, BQ, BK>();
      set_smem(reinterpret_cast<const void*>(&dq_kernel<DP, BQ, BK>), smem);
      const dim3 grid(unsigned(s.B * s.Hq), unsigned((s.T + BQ - 1) / BQ));
      dq_kernel<DP, BQ, BK><<<grid, kThreads, smem, stream()>>>(
          dq.ptr<float>(), do_.ptr<float>(), q.ptr<float>(), k.ptr<float>(), v.ptr<float>(),
          lse.ptr<float>(), delta.as<float>(), int(s.T), int(s.Hq), int(s.Hk), int(s.d), scale,
          vec);
      ZAYA_GPU_LAUNCH_CHECK();
    }
  });
}

}  // namespace zaya::ops::gpu
