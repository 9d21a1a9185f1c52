// cca_conv_forward / cca_conv_backward on the GPU: the two-stage causal convolution of CCA (spec
// §4.2, backward §8.5 steps 5–6), mirroring ops/cpu/cca_conv.cpp.
//
// Legend: B rows, T positions, C channels, d group width, G = C/d groups, R = T+1 rows of y per
// batch row (row r = position j = r−1; row 0 is the padding position j = −1 where y = b0).
// Stage 0 (elementwise):  y_j[c] = b0[c] + w0[c,0,0]·u_{j−1}[c] + w0[c,0,1]·u_j[c]  (u_{<0} = 0)
// Stage 1 (per group a [rows × 2d]·[2d × d] product, shared-memory tiles):
//   z_t[c] = b1[c] + Σ_i w1[c,i,0]·y_{t−1}[g·d+i] + w1[c,i,1]·y_t[g·d+i]
// Backward: dy (the stage-1 input gradient, the same tiled product with w1 transposed inside each
// group), du += elementwise, dw1 by token-chunk partial products, db1/db0/dw0 by row-chunk partial
// column sums; both parameter reductions finish with a fixed-order pass over the chunks in double,
// so the bits depend only on the shapes (no atomics).
#include "ops/backend.h"
#include "ops/gpu/cca_conv.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

// Tiled group mixing: a block computes kTile output rows × kTile output channels of one group,
// stepping over the group's d input channels kStep at a time (both taps). 256 threads as 16 × 16,
// each 4 rows × 4 channels (rows ty + 16m, channels tx + 16q).
constexpr int kTile = 64, kStep = 16, kPad = 1, kThreads = 256;

// Forward (Back = false): out = z[B·T, C], in = y[B·R, C]; output row n = (b, t) reads y rows
//   n + b (tap 0, position t−1) and n + b + 1 (tap 1, position t); weight (oc, ic, k) =
//   w1[g·d+oc, ic, k]; out = b1 + Σ_ic w(oc,ic,0)·a0 + w(oc,ic,1)·a1.
// Backward (Back = true): out = dy[B·R, C], in = dz[B·T, C]; output row (b, r) reads dz rows
//   b·T + r − 1 (tap 1, when r ≥ 1) and b·T + r (tap 0, when r ≤ T−1); weight (oc, ic, k) =
//   w1[g·d+ic, oc, k]; out = Σ_ic w(oc,ic,1)·a1 + w(oc,ic,0)·a0.
template <bool Back, class W>
__global__ void __launch_bounds__(kThreads)
    group_mix_kernel(float* __restrict__ out, const float* __restrict__ in,
                     const W* __restrict__ w1, const float* __restrict__ bias, int64_t rows,
                     int64_t T, int64_t C, int d) {
  __shared__ float As[2][kStep][kTile + kPad];  // [tap][ic][row]
  __shared__ float Ws[2][kStep][kTile + kPad];  // [tap][ic][oc]
  const int tiles_per_group = (d + kTile - 1) / kTile;
  const int64_t g = blockIdx.y / tiles_per_group;
  const int oc0 = int(blockIdx.y % tiles_per_group) * kTile;
  const int64_t row0 = int64_t(blockIdx.x) * kTile;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t R = T + 1;

  float acc[4][4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int oc = oc0 + tx + 16 * q;
    const float b = !Back && oc < d ? bias[g * d + oc] : 0.0f;
#pragma unroll
    for (int m = 0; m < 4; ++m) acc[m][q] = b;
  }

  for (int ic0 = 0; ic0 < d; ic0 += kStep) {
    // Inputs: element e = (tap, row, ic) with ic fastest (16 consecutive floats of one row).
    for (int e = tid; e < 2 * kTile * kStep; e += kThreads) {
      const int ic = e % kStep, row = (e / kStep) % kTile, tap = e / (kStep * kTile);
      const int64_t orow = row0 + row;
      float v = 0;
      if (orow < rows && ic0 + ic < d) {
        int64_t src;
        if (!Back) {
          src = orow + orow / T + tap;
        } else {
          const int64_t b = orow / R, r = orow % R;
          src = tap == 1 ? (r >= 1 ? b * T + r - 1 : -1) : (r <= T - 1 ? b * T + r : -1);
        }
        if (src >= 0) v = in[src * C + g * d + ic0 + ic];
      }
      As[tap][ic][row] = v;
    }
    // Weights: forward runs over (oc, ic, k) with k fastest, backward over (ic, oc, k): both
    // read w1 contiguously.
    for (int e = tid; e < 2 * kTile * kStep; e += kThreads) {
      const int k = e % 2;
      int oc, ic;
      if (!Back) {
        ic = (e / 2) % kStep;
        oc = e / (2 * kStep);
      } else {
        oc = (e / 2) % kTile;
        ic = e / (2 * kTile);
      }
      float v = 0;
      if (oc0 + oc < d && ic0 + ic < d) {
        const int64_t c_w = g * d + (Back ? ic0 + ic : oc0 + oc);  // w1's channel
        const int64_t i_w = Back ? oc0 + oc : ic0 + ic;            // w1's input index
        v = load_f32(w1, (c_w * d + i_w) * 2 + k);
      }
      Ws[k][ic][oc] = v;
    }
    __syncthreads();
#pragma unroll 4
    for (int ic = 0; ic < kStep; ++ic) {
      float a0[4], a1[4], k0[4], k1[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        a0[m] = As[0][ic][ty + 16 * m];
        a1[m] = As[1][ic][ty + 16 * m];
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        k0[q] = Ws[0][ic][tx + 16 * q];
        k1[q] = Ws[1][ic][tx + 16 * q];
      }
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          acc[m][q] += Back ? k1[q] * a1[m] + k0[q] * a0[m] : k0[q] * a0[m] + k1[q] * a1[m];
    }
    __syncthreads();
  }

#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int64_t orow = row0 + ty + 16 * m;
    if (orow >= rows) continue;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int oc = oc0 + tx + 16 * q;
      if (oc < d) out[orow * C + g * d + oc] = acc[m][q];
    }
  }
}

template <bool Back, class W>
void group_mix(float* out, const float* in, const W* w1, const float* bias, int64_t rows, int64_t T,
               int64_t C, int64_t d) {
  const int64_t tiles_y = (C / d) * ((d + kTile - 1) / kTile);
  const int64_t tiles_x = (rows + kTile - 1) / kTile;
  ZAYA_ASSERT(tiles_y <= 65535 && tiles_x < (int64_t(1) << 31),
              "cca_conv: too many channel tiles for the grid");
  group_mix_kernel<Back, W><<<dim3(unsigned(tiles_x), unsigned(tiles_y)), kThreads, 0, stream()>>>(
      out, in, w1, bias, rows, T, C, int(d));
  ZAYA_GPU_LAUNCH_CHECK();
}

// Stage 0: y[B·R, C], one thread per element.
__global__ void stage0_kernel(float* __restrict__ y, const float* __restrict__ u,
                              const float* __restrict__ w0, const float* __restrict__ b0, int64_t B,
                              int64_t T, int64_t C) {
  const int64_t R = T + 1;
  ZAYA_GPU_FOR(e, B * R * C) {
    const int64_t br = e / C, c = e % C, b = br / R, r = br % R;
    float v = b0[c];
    if (r >= 2) v += w0[2 * c] * u[(b * T + r - 2) * C + c];
    if (r >= 1) v += w0[2 * c + 1] * u[(b * T + r - 1) * C + c];
    y[e] = v;
  }
}

// du_t[c] += w0[c,0,1]·dy_t[c] + w0[c,0,0]·dy_{t+1}[c]  (dy_T = 0); dy row b·R + t + 1 is
// position t.
__global__ void du_kernel(float* __restrict__ du, const float* __restrict__ dy,
                          const float* __restrict__ w0, int64_t B, int64_t T, int64_t C) {
  const int64_t R = T + 1;
  ZAYA_GPU_FOR(e, B * T * C) {
    const int64_t bt = e / C, c = e % C, b = bt / T, t = bt % T;
    const float* dy_t = dy + (b * R + t + 1) * C + c;
    float v = w0[2 * c + 1] * dy_t[0];
    if (t + 1 < T) v += w0[2 * c] * dy_t[C];
    du[e] += v;
  }
}

// dw1 partial products: block (tile, s) sums over the tokens of chunk s, for kTile channels c ×
// kTile inputs i of one group and both taps, into part[s][C·d·2] (dw1's layout). 16 × 16
// threads, each 4 channels (ty + 16m) × 4 inputs (tx + 16q) × 2 taps.
__global__ void __launch_bounds__(kThreads)
    dw1_partial_kernel(float* __restrict__ part, const float* __restrict__ dz,
                       const float* __restrict__ y, int64_t N, int64_t T, int64_t C, int d,
                       int64_t chunk) {
  __shared__ float Dz[kStep][kTile];     // [token][c]
  __shared__ float Ys[2][kStep][kTile];  // [tap][token][i]
  const int tiles = (d + kTile - 1) / kTile;
  const int64_t g = blockIdx.x / (tiles * tiles);
  const int c0 = int(blockIdx.x / tiles % tiles) * kTile, i0 = int(blockIdx.x % tiles) * kTile;
  const int64_t n_begin = int64_t(blockIdx.y) * chunk;
  const int64_t n_end = n_begin + chunk < N ? n_begin + chunk : N;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;

  float acc[4][4][2] = {};
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kStep) {
    for (int e = tid; e < kStep * kTile; e += kThreads) {
      const int cc = e % kTile, t = e / kTile;
      const int64_t n = n0 + t;
      Dz[t][cc] = n < n_end && c0 + cc < d ? dz[n * C + g * d + c0 + cc] : 0.0f;
    }
    for (int e = tid; e < 2 * kStep * kTile; e += kThreads) {
      const int ii = e % kTile, t = (e / kTile) % kStep, tap = e / (kTile * kStep);
      const int64_t n = n0 + t;
      // Token n = (b, t') reads y rows n + b (position t'−1, tap 0) and n + b + 1 (tap 1).
      Ys[tap][t][ii] = n < n_end && i0 + ii < d ? y[(n + n / T + tap) * C + g * d + i0 + ii] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int t = 0; t < kStep; ++t) {
      float a[4], y0[4], y1[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) a[m] = Dz[t][ty + 16 * m];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        y0[q] = Ys[0][t][tx + 16 * q];
        y1[q] = Ys[1][t][tx + 16 * q];
      }
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          acc[m][q][0] += a[m] * y0[q];
          acc[m][q][1] += a[m] * y1[q];
        }
    }
    __syncthreads();
  }
  float* p = part + int64_t(blockIdx.y) * C * d * 2;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int c = c0 + ty + 16 * m;
    if (c >= d) continue;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = i0 + tx + 16 * q;
      if (i >= d) continue;
      const int64_t at = ((g * d + c) * d + i) * 2;
      p[at] = acc[m][q][0];
      p[at + 1] = acc[m][q][1];
    }
  }
}

// dst[e] += Σ_s part[s][e] (s in order, in double), e < n.
__global__ void sum_chunks_kernel(float* __restrict__ dst, const float* __restrict__ part,
                                  int64_t n, int64_t chunks) {
  ZAYA_GPU_FOR(e, n) {
    double s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += double(part[k * n + e]);
    dst[e] += float(s);
  }
}

// Column sums over the rows of chunk s of dy[B·R, C] (one thread per channel, in double):
// sums[s][0][c] = Σ dz (db1: dz row b·T + r − 1 for r ≥ 1), [1] = Σ dy (db0, every row including
// the padding row), [2] = Σ dy·u_{j−1} (dw0 tap 0, r ≥ 2), [3] = Σ dy·u_j (dw0 tap 1, r ≥ 1).
__global__ void column_partial_kernel(double* __restrict__ sums, const float* __restrict__ dy,
                                      const float* __restrict__ dz, const float* __restrict__ u,
                                      int64_t B, int64_t T, int64_t C, int64_t chunk) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t R = T + 1, rows = B * R;
  const int64_t begin = int64_t(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < rows ? begin + chunk : rows;
  double s_b1 = 0, s_b0 = 0, s_w00 = 0, s_w01 = 0;
  int64_t b = begin / R, r = begin % R;
  for (int64_t br = begin; br < end; ++br) {
    const double gy = dy[br * C + c];
    s_b0 += gy;
    if (r >= 1) {
      const int64_t n = b * T + r - 1;  // position j = r − 1
      s_b1 += double(dz[n * C + c]);
      s_w01 += gy * double(u[n * C + c]);
      if (r >= 2) s_w00 += gy * double(u[(n - 1) * C + c]);
    }
    if (++r == R) r = 0, ++b;
  }
  double* out = sums + int64_t(blockIdx.y) * 4 * C;
  out[c] = s_b1;
  out[C + c] = s_b0;
  out[2 * C + c] = s_w00;
  out[3 * C + c] = s_w01;
}

__global__ void column_finish_kernel(float* __restrict__ db1, float* __restrict__ db0,
                                     float* __restrict__ dw0, const double* __restrict__ sums,
                                     int64_t C, int64_t chunks) {
  ZAYA_GPU_FOR(e, 4 * C) {
    const int64_t q = e / C, c = e % C;
    double s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += sums[(k * 4 + q) * C + c];
    if (q == 0)
      db1[c] += float(s);
    else if (q == 1)
      db0[c] += float(s);
    else
      dw0[2 * c + (q - 2)] += float(s);
  }
}

struct ConvDims {
  int64_t B, T, C, d;
};

ConvDims conv_dims(const Tensor& u, const Tensor& w1) {
  return {u.size(0), u.size(1), u.size(2), w1.size(1)};
}

// Chunks of n items for a deterministic two-pass reduction: at least `min_chunk` items each
// (rounded to kStep), at most `max_chunks` chunks. Depends only on n.
int64_t chunk_size(int64_t n, int64_t min_chunk, int64_t max_chunks) {
  int64_t chunk = (n + max_chunks - 1) / max_chunks;
  if (chunk < min_chunk) chunk = min_chunk;
  return (chunk + kStep - 1) / kStep * kStep;
}

}  // namespace

void cca_stage1_forward(float* z, const float* y, const float* w1, const float* b1, int64_t B,
                        int64_t T, int64_t C, int64_t d) {
  if (B * T > 0) group_mix<false>(z, y, w1, b1, B * T, T, C, d);
}

void cca_stage1_forward(float* z, const float* y, const uint16_t* w1, const float* b1, int64_t B,
                        int64_t T, int64_t C, int64_t d) {
  if (B * T > 0) group_mix<false>(z, y, w1, b1, B * T, T, C, d);
}

void cca_conv_forward(const Tensor& z, const Tensor& y, const Tensor& u, const Tensor& w0,
                      const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  const ConvDims D = conv_dims(u, w1);
  const int64_t ny = D.B * (D.T + 1) * D.C;
  if (ny == 0) return;
  stage0_kernel<<<blocks_for(ny), kBlock, 0, stream()>>>(
      y.ptr<float>(), u.ptr<float>(), w0.ptr<float>(), b0.ptr<float>(), D.B, D.T, D.C);
  ZAYA_GPU_LAUNCH_CHECK();
  cca_stage1_forward(z.ptr<float>(), y.ptr<float>(), w1.ptr<float>(), b1.ptr<float>(), D.B, D.T,
                     D.C, D.d);
}

void cca_conv_backward(const Tensor& du, const Tensor& dw0, const Tensor& db0, const Tensor& dw1,
                       const Tensor& db1, const Tensor& dz, const Tensor& u, const Tensor& y,
                       const Tensor& w0, const Tensor& w1) {
  const ConvDims D = conv_dims(u, w1);
  const int64_t B = D.B, T = D.T, C = D.C, d = D.d, R = T + 1, N = B * T;
  // With no positions every gradient is a sum of nothing (dy is zero): nothing to add.
  if (N == 0 || C == 0) return;
  // dy[B·R, C]: the stage-1 input gradient, every row written by the tiled product.
  Scratch dy_buf(size_t(B * R * C) * sizeof(float));
  float* dy = dy_buf.as<float>();
  group_mix<true>(dy, dz.ptr<float>(), w1.ptr<float>(), static_cast<const float*>(nullptr), B * R,
                  T, C, d);
  du_kernel<<<blocks_for(N * C), kBlock, 0, stream()>>>(du.ptr<float>(), dy, w0.ptr<float>(), B, T,
                                                        C);
  ZAYA_GPU_LAUNCH_CHECK();

  // dw1: ≥ 1024 tokens per chunk, ≤ 64 chunks.
  {
    const int64_t chunk = chunk_size(N, 1024, 64), chunks = (N + chunk - 1) / chunk;
    const int64_t tiles = (d + kTile - 1) / kTile, blocks = (C / d) * tiles * tiles;
    ZAYA_ASSERT(blocks < (int64_t(1) << 31), "cca_conv_backward: too many dw1 tiles");
    const int64_t n = C * d * 2;
    Scratch part(size_t(chunks * n) * sizeof(float));
    dw1_partial_kernel<<<dim3(unsigned(blocks), unsigned(chunks)), kThreads, 0, stream()>>>(
        part.as<float>(), dz.ptr<float>(), y.ptr<float>(), N, T, C, int(d), chunk);
    ZAYA_GPU_LAUNCH_CHECK();
    sum_chunks_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(dw1.ptr<float>(), part.as<float>(), n,
                                                              chunks);
    ZAYA_GPU_LAUNCH_CHECK();
  }
  // db1, db0, dw0: ≥ 256 rows of dy per chunk, ≤ 128 chunks.
  {
    const int64_t rows = B * R;
    const int64_t chunk = chunk_size(rows, 256, 128), chunks = (rows + chunk - 1) / chunk;
    Scratch sums(size_t(chunks * 4 * C) * sizeof(double));
    column_partial_kernel<<<dim3(blocks_for(C, kBlock, int64_t(1) << 31), unsigned(chunks)), kBlock,
                            0, stream()>>>(sums.as<double>(), dy, dz.ptr<float>(), u.ptr<float>(),
                                           B, T, C, chunk);
    ZAYA_GPU_LAUNCH_CHECK();
    column_finish_kernel<<<blocks_for(4 * C), kBlock, 0, stream()>>>(
        db1.ptr<float>(), db0.ptr<float>(), dw0.ptr<float>(), sums.as<double>(), C, chunks);
    ZAYA_GPU_LAUNCH_CHECK();
  }
}

}  // namespace zaya::ops::gpu
