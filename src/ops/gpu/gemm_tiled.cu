// The portable tiled GEMM (gemm.h): C[M,N] = alpha · op(A) · op(B) + beta · C, row-major, A and B
// each F32 or BF16 (widened to f32 as they are loaded; F32 rounded to bf16 first when
// g.bf16_inputs), products accumulated in f32 with fmaf.
//
// A block computes a BM×BN tile of C from BK-deep slices of op(A) [BM,BK] and op(B) [BK,BN], held
// k-major in shared memory (two buffers: the next slice is loaded into registers while the current
// one is multiplied, then stored into the other buffer, one barrier per slice). Each of the 256
// threads keeps a (4·SM)×(4·SN) micro-tile of C in registers, as SM×SN 4×4 sub-tiles spaced
// BM/SM rows and BN/SN columns apart, so the float4 reads of shared memory by neighbouring
// threads are contiguous (no bank conflicts) and the stores of C are coalesced.
//
// Operands are read through one loader: op(A) is [M,K] and op(B)ᵀ is [N,K], each stored either
// k-contiguous (A as is, B transposed) or row-contiguous (A transposed, B as is); the loader's
// thread mapping follows the contiguous direction, so global reads are coalesced either way.
// Every element is bounds-checked (any M, N, K ≥ 0; K = 0 leaves C = beta · C), offsets are int64.
//
// Where the tiles leave the device mostly idle and K is long, K is split into slices whose
// partial tiles a second pass sums in fixed order (deterministic). Few rows with both operands
// k-contiguous (decode's x · wᵀ) take a warp-per-column kernel instead (small_m_kernel).
#include "core/assert.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gemm.h"

namespace zaya::gpu {

namespace {

constexpr int kPad = 4;  // shared rows padded by a float4 (keeps float4 alignment)

template <int BM_, int BN_, int BK_, int SM_, int SN_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, SM = SM_, SN = SN_;
  static constexpr int kThreadsY = BM / (4 * SM), kThreadsX = BN / (4 * SN);
  static constexpr int kThreads = kThreadsX * kThreadsY;
  static_assert(kThreads % kMaxWarp == 0, "whole warps on every target");
  static_assert(BM * BK % kThreads == 0 && BN * BK % kThreads == 0, "even tile loads");
};
using LargeTile = Tile<128, 128, 16, 2, 2>;  // 8×8 per thread
using SmallTile = Tile<64, 64, 16, 1, 1>;    // 4×4 per thread

// Register stage of one operand slice: element (row, k) of a matrix stored at p[row·ld + k]
// (K_CONTIG) or p[k·ld + row]; rows r0 … r0+ROWS, k0 … k0+BK, zero outside rows < R, k < K (the
// end of this block's k range).
template <class T, int ROWS, int BK, int THREADS, bool K_CONTIG>
struct Loader {
  static constexpr int kPer = ROWS * BK / THREADS;
  float v[kPer];

  __device__ __forceinline__ static void coords(int idx, int& rr, int& kk) {
    if (K_CONTIG) {
      kk = idx % BK;
      rr = idx / BK;
    } else {
      rr = idx % ROWS;
      kk = idx / ROWS;
    }
  }

  __device__ __forceinline__ void load(const T* p, int64_t ld, int64_t r0, int64_t k0, int64_t R,
                                       int64_t K) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      int rr, kk;
      coords(int(threadIdx.x) + i * THREADS, rr, kk);
      const int64_t r = r0 + rr, k = k0 + kk;
      float x = 0.0f;
      if (r < R && k < K) x = load_f32(p, K_CONTIG ? r * ld + k : k * ld + r);
      v[i] = x;
    }
  }

  // Into shared s[BK][ROWS + kPad] (k-major).
  __device__ __forceinline__ void store(float* s) const {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      int rr, kk;
      coords(int(threadIdx.x) + i * THREADS, rr, kk);
      s[kk * (ROWS + kPad) + rr] = v[i];
    }
  }
};

template <class Cfg>
struct alignas(16) Smem {  // float4 reads
  float a[2][Cfg::BK][Cfg::BM + kPad];
  float b[2][Cfg::BK][Cfg::BN + kPad];
};

// The micro-tile's row (or column) of C for accumulator index i, within the block tile.
template <int SPAN, int S>
__device__ __forceinline__ int micro_offset(int i, int t) {
  return (i / 4) * (SPAN / S) + t * 4 + (i % 4);
}

// acc = op(A)[m0 …, k_begin … k_end) · op(B)[k_begin … k_end, n0 …] for this thread's
// micro-tile. All threads of the block
// must call it (it synchronises).
template <class Cfg, class TA, class TB, bool A_KC, bool B_KC>
__device__ __forceinline__ void tile_product(float (&acc)[4 * Cfg::SM][4 * Cfg::SN], Smem<Cfg>& sm,
                                             const TA* a, int64_t lda, const TB* b, int64_t ldb,
                                             int64_t M, int64_t N, int64_t k_begin, int64_t k_end,
                                             int64_t m0, int64_t n0) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, SM = Cfg::SM, SN = Cfg::SN;
  const int tx = int(threadIdx.x) % Cfg::kThreadsX, ty = int(threadIdx.x) / Cfg::kThreadsX;
#pragma unroll
  for (int i = 0; i < 4 * SM; ++i)
#pragma unroll
    for (int j = 0; j < 4 * SN; ++j) acc[i][j] = 0.0f;

  Loader<TA, BM, BK, Cfg::kThreads, A_KC> la;
  Loader<TB, BN, BK, Cfg::kThreads, B_KC> lb;
  la.load(a, lda, m0, k_begin, M, k_end);
  lb.load(b, ldb, n0, k_begin, N, k_end);
  la.store(&sm.a[0][0][0]);
  lb.store(&sm.b[0][0][0]);
  __syncthreads();

  const int64_t tiles = (k_end - k_begin + BK - 1) / BK;
  for (int64_t t = 0; t < tiles; ++t) {
    const int cur = int(t & 1);
    const bool more = t + 1 < tiles;  // uniform over the block
    if (more) {
      la.load(a, lda, m0, k_begin + (t + 1) * BK, M, k_end);
      lb.load(b, ldb, n0, k_begin + (t + 1) * BK, N, k_end);
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float ra[4 * SM], rb[4 * SN];
#pragma unroll
      for (int s = 0; s < SM; ++s) {
        const float4 v = *reinterpret_cast<const float4*>(&sm.a[cur][kk][s * (BM / SM) + ty * 4]);
        ra[s * 4 + 0] = v.x, ra[s * 4 + 1] = v.y, ra[s * 4 + 2] = v.z, ra[s * 4 + 3] = v.w;
      }
#pragma unroll
      for (int s = 0; s < SN; ++s) {
        const float4 v = *reinterpret_cast<const float4*>(&sm.b[cur][kk][s * (BN / SN) + tx * 4]);
        rb[s * 4 + 0] = v.x, rb[s * 4 + 1] = v.y, rb[s * 4 + 2] = v.z, rb[s * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < 4 * SM; ++i)
#pragma unroll
        for (int j = 0; j < 4 * SN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
    if (more) {  // the other buffer was last read before the previous barrier
      la.store(&sm.a[cur ^ 1][0][0]);
      lb.store(&sm.b[cur ^ 1][0][0]);
    }
    __syncthreads();
  }
}

__device__ __forceinline__ float epilogue(float acc, float alpha, float beta, const float* c) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// Writes the micro-tile to C[m0 …, n0 …] (float4 where four columns are in range and aligned).
template <class Cfg>
__device__ __forceinline__ void store_tile(const float (&acc)[4 * Cfg::SM][4 * Cfg::SN], float* c,
                                           int64_t ldc, int64_t M, int64_t N, int64_t m0,
                                           int64_t n0, float alpha, float beta) {
  const int tx = int(threadIdx.x) % Cfg::kThreadsX, ty = int(threadIdx.x) / Cfg::kThreadsX;
#pragma unroll
  for (int i = 0; i < 4 * Cfg::SM; ++i) {
    const int64_t row = m0 + micro_offset<Cfg::BM, Cfg::SM>(i, ty);
    if (row >= M) continue;
    float* crow = c + row * ldc;
#pragma unroll
    for (int s = 0; s < Cfg::SN; ++s) {
      const int64_t col = n0 + s * (Cfg::BN / Cfg::SN) + tx * 4;
      float* p = crow + col;
      if (col + 3 < N && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
        float4 v;
        if (beta == 0.0f) {
          v = make_float4(0, 0, 0, 0);
        } else {
          v = *reinterpret_cast<const float4*>(p);
        }
        v.x = epilogue(acc[i][s * 4 + 0], alpha, beta, &v.x);
        v.y = epilogue(acc[i][s * 4 + 1], alpha, beta, &v.y);
        v.z = epilogue(acc[i][s * 4 + 2], alpha, beta, &v.z);
        v.w = epilogue(acc[i][s * 4 + 3], alpha, beta, &v.w);
        *reinterpret_cast<float4*>(p) = v;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (col + j < N) p[j] = epilogue(acc[i][s * 4 + j], alpha, beta, p + j);
      }
    }
  }
}

// Block (x, y, z): column tile x, row tiles y, y + gridDim.y, …, and the k range
// [z·k_split, (z+1)·k_split) written to c + z·c_split (split-K partials; one split: C itself).
template <class Cfg, class TA, class TB, bool A_KC, bool B_KC>
__global__ void __launch_bounds__(Cfg::kThreads)
    gemm_kernel(const TA* a, int64_t lda, const TB* b, int64_t ldb, float* c, int64_t ldc,
                int64_t c_split, int64_t M, int64_t N, int64_t K, int64_t k_split, float alpha,
                float beta) {
  __shared__ Smem<Cfg> sm;
  const int64_t m_tiles = (M + Cfg::BM - 1) / Cfg::BM;
  const int64_t n0 = int64_t(blockIdx.x) * Cfg::BN;
  const int64_t k_begin = int64_t(blockIdx.z) * k_split;
  const int64_t k_end = k_begin + k_split < K ? k_begin + k_split : K;
  c += int64_t(blockIdx.z) * c_split;
  for (int64_t mt = blockIdx.y; mt < m_tiles; mt += gridDim.y) {  // uniform over the block
    float acc[4 * Cfg::SM][4 * Cfg::SN];
    tile_product<Cfg, TA, TB, A_KC, B_KC>(acc, sm, a, lda, b, ldb, M, N, k_begin, k_end,
                                          mt * Cfg::BM, n0);
    store_tile<Cfg>(acc, c, ldc, M, N, mt * Cfg::BM, n0, alpha, beta);
  }
}

// C[m,n] = Σ_z partial[z][m,n] (z in order) + beta · C: the split-K partials, alpha applied.
__global__ void split_sum_kernel(float* c, int64_t ldc, const float* partial, int64_t splits,
                                 int64_t M, int64_t N, float beta) {
  ZAYA_GPU_FOR(i, M * N) {
    const int64_t m = i / N, n = i % N;
    float s = 0.0f;
    for (int64_t z = 0; z < splits; ++z) s += partial[z * M * N + i];
    float* p = c + m * ldc + n;
    *p = epilogue(s, 1.0f, beta, p);
  }
}

// Few rows (decode: M ≤ kSmallM tokens) with both operands k-contiguous (x · wᵀ): a tile would
// be mostly empty rows, so instead one warp per column n streams row n of op(B)ᵀ once for all M
// rows of op(A) (small, cache-resident) and reduces across its lanes (fixed order). VEC: four
// elements per lane per load (K, the strides and the bases allow it).
constexpr int kSmallM = 8;

__device__ __forceinline__ void load4(const float* p, float (&v)[4]) {
  const float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
__device__ __forceinline__ void load4(const RoundedF32* p, float (&v)[4]) {
  const float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = round_to_bf16(x.x), v[1] = round_to_bf16(x.y);
  v[2] = round_to_bf16(x.z), v[3] = round_to_bf16(x.w);
}
__device__ __forceinline__ void load4(const uint16_t* p, float (&v)[4]) {
  const uint2 x = *reinterpret_cast<const uint2*>(p);  // little-endian: element 0 is low
  v[0] = bf16_bits_to_float(uint16_t(x.x & 0xffffu));
  v[1] = bf16_bits_to_float(uint16_t(x.x >> 16));
  v[2] = bf16_bits_to_float(uint16_t(x.y & 0xffffu));
  v[3] = bf16_bits_to_float(uint16_t(x.y >> 16));
}

template <class TA, class TB, bool VEC>
__global__ void __launch_bounds__(kBlock)
    small_m_kernel(const TA* a, int64_t lda, const TB* b, int64_t ldb, float* c, int64_t ldc, int M,
                   int64_t N, int64_t K, float alpha, float beta) {
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int warps = int(blockDim.x) / kWarp;
  // n is the same for all lanes of a warp, so every lane reaches the shuffles of warp_sum.
  for (int64_t n = int64_t(blockIdx.x) * warps + warp; n < N; n += int64_t(gridDim.x) * warps) {
    float acc[kSmallM];
#pragma unroll
    for (int m = 0; m < kSmallM; ++m) acc[m] = 0.0f;
    const TB* brow = b + n * ldb;
    if (VEC) {
#pragma unroll 2
      for (int64_t k = int64_t(lane) * 4; k < K; k += int64_t(kWarp) * 4) {
        float bv[4];
        load4(brow + k, bv);
#pragma unroll
        for (int m = 0; m < kSmallM; ++m)
          if (m < M) {
            float av[4];
            load4(a + m * lda + k, av);
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[m] = fmaf(av[q], bv[q], acc[m]);
          }
      }
    } else {
      for (int64_t k = lane; k < K; k += kWarp) {
        const float bv = load_f32(brow, k);
#pragma unroll
        for (int m = 0; m < kSmallM; ++m)
          if (m < M) acc[m] = fmaf(load_f32(a, m * lda + k), bv, acc[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < kSmallM; ++m)
      if (m < M) {  // uniform
        const float sum = warp_sum(acc[m]);
        if (lane == 0) {
          float* p = c + m * ldc + n;
          *p = epilogue(sum, alpha, beta, p);
        }
      }
  }
}

template <class T>
bool aligned_for_vec(const T* p, int64_t ld) {
  return ld % 4 == 0 && reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

template <class TA, class TB>
void launch_small_m(const Gemm& g) {
  const auto* a = static_cast<const TA*>(g.a.data);
  const auto* b = static_cast<const TB*>(g.b.data);
  const bool vec = g.K % 4 == 0 && aligned_for_vec(a, g.a.ld) && aligned_for_vec(b, g.b.ld);
  // Warps per block as the host counts them (32 lanes); with 64-lane warps the grid-stride loop
  // gives each warp two columns.
  const unsigned blocks = blocks_for(g.N, kBlock / 32);
  if (vec)
    small_m_kernel<TA, TB, true><<<blocks, kBlock, 0, stream()>>>(
        a, g.a.ld, b, g.b.ld, g.c, g.ldc, int(g.M), g.N, g.K, g.alpha, g.beta);
  else
    small_m_kernel<TA, TB, false><<<blocks, kBlock, 0, stream()>>>(
        a, g.a.ld, b, g.b.ld, g.c, g.ldc, int(g.M), g.N, g.K, g.alpha, g.beta);
  ZAYA_GPU_LAUNCH_CHECK();
}

// Splits of K for a grid of `tiles` blocks: where the tiles leave most multiprocessors idle and
// K is long, up to 16 slices of ≥ 256 (a multiple of the k-step), else 1. Depends only on the
// shape and the device, so a call's bits are the same every time.
template <class Cfg>
int64_t k_splits(int64_t tiles, int64_t K, int64_t& k_split) {
  const int64_t sms = multiprocessor_count();
  int64_t splits = 1;
  if (tiles < sms && K >= 1024) {
    splits = (2 * sms + tiles - 1) / tiles;
    if (splits > K / 256) splits = K / 256;
    if (splits > 16) splits = 16;
  }
  k_split = (K + splits - 1) / splits;
  k_split = (k_split + Cfg::BK - 1) / Cfg::BK * Cfg::BK;
  return splits <= 1 ? 1 : (K + k_split - 1) / k_split;
}

template <class Cfg, class TA, class TB, bool A_KC, bool B_KC>
void launch(const Gemm& g) {
  const int64_t m_tiles = (g.M + Cfg::BM - 1) / Cfg::BM, n_tiles = (g.N + Cfg::BN - 1) / Cfg::BN;
  ZAYA_ASSERT(n_tiles <= 0x7fffffff, "gemm_tiled: N too large");
  int64_t k_split = 0;
  const int64_t splits = k_splits<Cfg>(m_tiles * n_tiles, g.K, k_split);
  const dim3 grid(unsigned(n_tiles), unsigned(m_tiles < 65535 ? m_tiles : 65535), unsigned(splits));
  const auto* a = static_cast<const TA*>(g.a.data);
  const auto* b = static_cast<const TB*>(g.b.data);
  if (splits == 1) {
    gemm_kernel<Cfg, TA, TB, A_KC, B_KC><<<grid, Cfg::kThreads, 0, stream()>>>(
        a, g.a.ld, b, g.b.ld, g.c, g.ldc, 0, g.M, g.N, g.K, g.K, g.alpha, g.beta);
    ZAYA_GPU_LAUNCH_CHECK();
    return;
  }
  const int64_t mn = g.M * g.N;
  Scratch partial(size_t(splits * mn) * sizeof(float));
  gemm_kernel<Cfg, TA, TB, A_KC, B_KC><<<grid, Cfg::kThreads, 0, stream()>>>(
      a, g.a.ld, b, g.b.ld, partial.as<float>(), g.N, mn, g.M, g.N, g.K, k_split, g.alpha, 0.0f);
  ZAYA_GPU_LAUNCH_CHECK();
  split_sum_kernel<<<blocks_for(mn), kBlock, 0, stream()>>>(g.c, g.ldc, partial.as<float>(), splits,
                                                            g.M, g.N, g.beta);
  ZAYA_GPU_LAUNCH_CHECK();
}

template <class Cfg, class TA, class TB>
void launch_layouts(const Gemm& g) {
  // op(A) is k-contiguous unless A is transposed; op(B)ᵀ is k-contiguous when B is transposed.
  const bool a_kc = !g.a.transposed, b_kc = g.b.transposed;
  if (a_kc && b_kc) return launch<Cfg, TA, TB, true, true>(g);
  if (a_kc) return launch<Cfg, TA, TB, true, false>(g);
  if (b_kc) return launch<Cfg, TA, TB, false, true>(g);
  launch<Cfg, TA, TB, false, false>(g);
}

template <class Cfg>
struct LaunchTiles {
  template <class TA, class TB>
  static void run(const Gemm& g) {
    launch_layouts<Cfg, TA, TB>(g);
  }
};
struct LaunchSmallM {
  template <class TA, class TB>
  static void run(const Gemm& g) {
    launch_small_m<TA, TB>(g);
  }
};

// L::run<TA, TB>(g) with the element types of g's operands: F32 is read as RoundedF32 (rounded
// to bf16 as it is loaded) when g.bf16_inputs.
template <class L>
void launch_dtypes(const Gemm& g) {
  const bool a16 = g.a.dtype == DType::BF16, b16 = g.b.dtype == DType::BF16;
  if (a16 && b16) return L::template run<uint16_t, uint16_t>(g);
  if (g.bf16_inputs) {
    if (a16) return L::template run<uint16_t, RoundedF32>(g);
    if (b16) return L::template run<RoundedF32, uint16_t>(g);
    return L::template run<RoundedF32, RoundedF32>(g);
  }
  if (a16) return L::template run<uint16_t, float>(g);
  if (b16) return L::template run<float, uint16_t>(g);
  L::template run<float, float>(g);
}

bool operand_ok(const GemmOperand& x) {
  return x.dtype == DType::F32 || x.dtype == DType::BF16;
}

// The large tile where it still gives every multiprocessor a block, else the small one.
template <class Cfg>
bool fills_device(int64_t rows, int64_t cols) {
  const int64_t tiles = ((rows + Cfg::BM - 1) / Cfg::BM) * ((cols + Cfg::BN - 1) / Cfg::BN);
  return tiles >= multiprocessor_count();
}

}  // namespace

void gemm_tiled(const Gemm& g) {
  ZAYA_ASSERT(g.M >= 0 && g.N >= 0 && g.K >= 0, "gemm_tiled: negative size");
  ZAYA_ASSERT(operand_ok(g.a) && operand_ok(g.b), "gemm_tiled: A and B must be F32 or BF16");
  if (g.M == 0 || g.N == 0) return;
  if (g.M <= kSmallM && g.K > 0 && !g.a.transposed && g.b.transposed)
    launch_dtypes<LaunchSmallM>(g);
  else if (fills_device<LargeTile>(g.M, g.N))
    launch_dtypes<LaunchTiles<LargeTile>>(g);
  else
    launch_dtypes<LaunchTiles<SmallTile>>(g);
}

}  // namespace zaya::gpu
