// cca_conv_forward / cca_conv_backward on the CPU: the two-stage causal convolution of CCA
// (docs/model.md §4.2, backward §8.5 steps 5–6).
//
// Legend: B rows, T positions, C channels, d group width (= head size), G = C/d groups.
// y_BRC has R = T+1 rows per batch row: row r holds stage-0 output at position j = r−1, so row 0 is
// the padding position j = −1 where y = b0 (not 0: the padding-bias subtlety).
// Stage 0:  y_j[c] = b0[c] + w0[c,0,0]·u_{j−1}[c] + w0[c,0,1]·u_j[c]        (u_{<0} = 0)
// Stage 1:  z_t[c] = b1[c] + Σ_i w1[c,i,0]·y_{t−1}[g·d+i] + w1[c,i,1]·y_t[g·d+i],  g = ⌊c/d⌋
// Activations are parallel over (b, position); parameter gradients are reduced per channel in a
// fixed (b, t) order (finally in double), so their bits do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

constexpr int64_t kRows = 32;  // positions per task in the stage-1 loops (weight reuse)

struct ConvDims {
  int64_t B, T, C, d;
};

ConvDims conv_dims(const Tensor& u, const Tensor& w1) {
  return {u.size(0), u.size(1), u.size(2), w1.size(1)};
}

template <class S>
void conv_forward(S* z, S* y, const S* u, const S* w0, const S* b0, const S* w1, const S* b1,
                  ConvDims D) {
  const int64_t B = D.B, T = D.T, C = D.C, d = D.d, R = T + 1;
  // Stage 0, row r of y = position j = r−1 reads u rows r−2 (tap 0) and r−1 (tap 1).
#pragma omp parallel for schedule(static) if (B * R * C > kParallelMin)
  for (int64_t br = 0; br < B * R; ++br) {
    const int64_t b = br / R, r = br % R;
    S* yr = y + br * C;
    const S* u_prev = r >= 2 ? u + (b * T + r - 2) * C : nullptr;
    const S* u_cur = r >= 1 ? u + (b * T + r - 1) * C : nullptr;
    for (int64_t c = 0; c < C; ++c) {
      S v = b0[c];
      if (u_prev) v += w0[2 * c] * u_prev[c];
      if (u_cur) v += w0[2 * c + 1] * u_cur[c];
      yr[c] = v;
    }
  }
  // Stage 1 with tap-major weights wt[k][g][i][cc] = w1[g·d+cc, i, k], contiguous over the output
  // channel cc so the innermost loop vectorises without reassociating a sum.
  thread_local std::vector<S> wt;  // every element is written below; kept between calls
  wt.resize(size_t(2 * C * d));
  for (int64_t c = 0; c < C; ++c) {
    const int64_t g = c / d, cc = c % d;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t k = 0; k < 2; ++k)
        wt[k * C * d + (g * d + i) * d + cc] = w1[(c * d + i) * 2 + k];
  }
  const S* wt0 = wt.data();
  const S* wt1 = wt.data() + C * d;
  // Tasks are (b, chunk of kRows positions); inside, group-major so one group's 2·d² weights stay
  // in cache across the chunk's rows.
  const int64_t chunks = (T + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (B * T * C * d > 65536)
  for (int64_t task = 0; task < B * chunks; ++task) {
    const int64_t b = task / chunks, t0 = (task % chunks) * kRows, t1 = std::min(t0 + kRows, T);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t c = 0; c < C; ++c) z[(b * T + t) * C + c] = b1[c];
    for (int64_t g = 0; g < C / d; ++g)
      for (int64_t t = t0; t < t1; ++t) {
        S* zg = z + (b * T + t) * C + g * d;
        const S* y_prev = y + (b * R + t) * C + g * d;  // position t−1
        const S* y_cur = y_prev + C;                    // position t
        for (int64_t i = 0; i < d; ++i) {
          const S a0 = y_prev[i], a1 = y_cur[i];
          const S* k0 = wt0 + (g * d + i) * d;
          const S* k1 = wt1 + (g * d + i) * d;
          for (int64_t cc = 0; cc < d; ++cc) zg[cc] += k0[cc] * a0 + k1[cc] * a1;
        }
      }
  }
}

template <class S>
void conv_backward(S* du, S* dw0, S* db0, S* dw1, S* db1, const S* dz, const S* u, const S* y,
                   const S* w0, const S* w1, ConvDims D) {
  const int64_t B = D.B, T = D.T, C = D.C, d = D.d, R = T + 1;
  // Stage-1 input gradient dy_BRC (row r = position r−1, r = 0 … T):
  // dy_j[g·d+i] = Σ_{c∈g} w1[c,i,1]·dz_j[c] + w1[c,i,0]·dz_{j+1}[c], dz outside 0…T−1 is 0.
  thread_local std::vector<S> wr;  // wr[k][c][i] = w1[c,i,k]: contiguous over i (all written)
  wr.resize(size_t(2 * C * d));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t k = 0; k < 2; ++k) wr[k * C * d + c * d + i] = w1[(c * d + i) * 2 + k];
  const S* wr0 = wr.data();
  const S* wr1 = wr.data() + C * d;
  thread_local std::vector<S> dy_buf;  // kept between calls: no allocation per step once warm
  if (dy_buf.size() < size_t(B * R * C)) dy_buf.resize(size_t(B * R * C));
  S* dy = dy_buf.data();  // every row is filled below before it is read
  const int64_t chunks = (R + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (B * R * C * d > 65536)
  for (int64_t task = 0; task < B * chunks; ++task) {
    const int64_t b = task / chunks, r0 = (task % chunks) * kRows, r1 = std::min(r0 + kRows, R);
    std::fill(dy + (b * R + r0) * C, dy + (b * R + r1) * C, S(0));
    for (int64_t g = 0; g < C / d; ++g)
      for (int64_t r = r0; r < r1; ++r) {
        S* dyg = dy + (b * R + r) * C + g * d;
        const S* dz_tap1 = r >= 1 ? dz + (b * T + r - 1) * C : nullptr;  // z at position j
        const S* dz_tap0 = r <= T - 1 ? dz + (b * T + r) * C : nullptr;  // z at position j+1
        for (int64_t c = g * d; c < (g + 1) * d; ++c) {
          const S a1 = dz_tap1 ? dz_tap1[c] : S(0), a0 = dz_tap0 ? dz_tap0[c] : S(0);
          const S* k0 = wr0 + c * d;
          const S* k1 = wr1 + c * d;
          for (int64_t i = 0; i < d; ++i) dyg[i] += k1[i] * a1 + k0[i] * a0;
        }
      }
  }
  // du_t[c] += w0[c,0,1]·dy_t[c] + w0[c,0,0]·dy_{t+1}[c]  (dy_T = 0).
#pragma omp parallel for schedule(static) if (B * T * C > kParallelMin)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    const S* dy_t = dy + (b * R + t + 1) * C;
    const S* dy_next = t + 1 < T ? dy_t + C : nullptr;
    S* dur = du + bt * C;
    for (int64_t c = 0; c < C; ++c) {
      S v = w0[2 * c + 1] * dy_t[c];
      if (dy_next) v += w0[2 * c] * dy_next[c];
      dur[c] += v;
    }
  }
  // Parameter gradients: one task per block of ≤ 16 channels of one group, so each y row slice is
  // loaded once for the whole block. Sums run over (b, t) in a fixed order: chunks of kChunk
  // tokens in scalar_t (vectorised), each chunk's partial sum added into a double accumulator.
  constexpr int64_t kBlock = 16, kChunk = 32;
  const int64_t block = std::min(d, kBlock), blocks_per_group = (d + block - 1) / block;
  const int64_t tasks = (C / d) * blocks_per_group;
#pragma omp parallel if (tasks > 1 && B * T * C * d > 65536)
  {
    std::vector<double> acc(block * 2 * d);  // acc[cc][k·d + i] → dw1[c_begin+cc, i, k]
    std::vector<S> part(block * 2 * d);      // the current chunk's share of acc
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t g = task / blocks_per_group;
      const int64_t c_begin = g * d + (task % blocks_per_group) * block;
      const int64_t nc = std::min(c_begin + block, (g + 1) * d) - c_begin;
      std::fill(acc.begin(), acc.end(), 0.0);
      double acc_b1[kBlock] = {}, acc_b0[kBlock] = {}, acc_w00[kBlock] = {}, acc_w01[kBlock] = {};
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t0 = 0; t0 < T; t0 += kChunk) {
          std::fill(part.begin(), part.end(), S(0));
          for (int64_t t = t0; t < std::min(t0 + kChunk, T); ++t) {
            const S* y_prev = y + (b * R + t) * C + g * d;  // position t−1 (tap 0)
            const S* y_cur = y_prev + C;                    // position t (tap 1)
            const S* dzr = dz + (b * T + t) * C + c_begin;
            for (int64_t cc = 0; cc < nc; ++cc) {
              const S a = dzr[cc];
              S* p0 = part.data() + cc * 2 * d;
              S* p1 = p0 + d;
              for (int64_t i = 0; i < d; ++i) {
                p0[i] += a * y_prev[i];
                p1[i] += a * y_cur[i];
              }
              acc_b1[cc] += double(a);
            }
          }
          for (int64_t e = 0; e < nc * 2 * d; ++e) acc[e] += double(part[e]);
        }
      // Stage 0: Σ over j = −1 … T−1 (row r = j+1), including the padding position j = −1.
      for (int64_t b = 0; b < B; ++b)
        for (int64_t r = 0; r < R; ++r) {
          const S* dyr = dy + (b * R + r) * C + c_begin;
          const S* u_prev = r >= 2 ? u + (b * T + r - 2) * C + c_begin : nullptr;
          const S* u_cur = r >= 1 ? u + (b * T + r - 1) * C + c_begin : nullptr;
          for (int64_t cc = 0; cc < nc; ++cc) {
            const double g_y = dyr[cc];
            acc_b0[cc] += g_y;
            if (u_prev) acc_w00[cc] += g_y * double(u_prev[cc]);
            if (u_cur) acc_w01[cc] += g_y * double(u_cur[cc]);
          }
        }
      for (int64_t cc = 0; cc < nc; ++cc) {
        const int64_t c = c_begin + cc;
        for (int64_t i = 0; i < d; ++i)
          for (int64_t k = 0; k < 2; ++k)
            dw1[(c * d + i) * 2 + k] += S(acc[cc * 2 * d + k * d + i]);
        db1[c] += S(acc_b1[cc]);
        db0[c] += S(acc_b0[cc]);
        dw0[2 * c] += S(acc_w00[cc]);
        dw0[2 * c + 1] += S(acc_w01[cc]);
      }
    }
  }
}

}  // namespace

void cca_conv_forward(const Tensor& z, const Tensor& y, const Tensor& u, const Tensor& w0,
                      const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  const ConvDims D = conv_dims(u, w1);
  ZAYA_DISPATCH_FLOAT(
      u.dtype, conv_forward<scalar_t>(z.ptr<scalar_t>(), y.ptr<scalar_t>(), u.ptr<scalar_t>(),
                                      w0.ptr<scalar_t>(), b0.ptr<scalar_t>(), w1.ptr<scalar_t>(),
                                      b1.ptr<scalar_t>(), D));
}

void cca_conv_backward(const Tensor& du, const Tensor& dw0, const Tensor& db0, const Tensor& dw1,
                       const Tensor& db1, const Tensor& dz, const Tensor& u, const Tensor& y,
                       const Tensor& w0, const Tensor& w1) {
  const ConvDims D = conv_dims(u, w1);
  ZAYA_DISPATCH_FLOAT(
      u.dtype, conv_backward<scalar_t>(du.ptr<scalar_t>(), dw0.ptr<scalar_t>(), db0.ptr<scalar_t>(),
                                       dw1.ptr<scalar_t>(), db1.ptr<scalar_t>(), dz.ptr<scalar_t>(),
                                       u.ptr<scalar_t>(), y.ptr<scalar_t>(), w0.ptr<scalar_t>(),
                                       w1.ptr<scalar_t>(), D));
}

}  // namespace zaya::ops::cpu
