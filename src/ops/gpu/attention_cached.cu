// attention_cached_forward on the GPU: causal GQA attention of L new queries over one sequence's
// K/V cache (docs/model.md §4.7–4.8), forward only, F32; the algorithm of ops/cpu/attention_cached.cpp.
// q[L,Hq,d], k,v[S,Hk,d], o[L,Hq,d]; query i sits at position S−L+i and sees keys 0…S−L+i; query
// head h reads kv head g = h/G. Scores (q/√d)·k, softmax in f32.
//
// Decode (L ≤ kSplitMaxL): split-key "flash decoding". The keys of query i are cut into chunks of
// kChunk; one block per (chunk, query, kv head) computes, for the G heads of the group together
// (each K and V row is read once for the group), m = max s, p = e^{s−m}, l = Σ p, acc = Σ p·v into
// a partial buffer; a combine pass merges the partials in chunk order (m' = max(m, m_c),
// acc' = acc·e^{m−m'} + acc_c·e^{m_c−m'}, l likewise) and writes o = acc/l. Fixed chunking and
// merge order: deterministic.
// Prefill over a cache (L > kSplitMaxL): the flash forward of ops/gpu/attention.cu with the
// queries offset by S − L (no lse).
#include <cmath>
#include <cstdint>

#include "ops/backend.h"
#include "ops/gpu/attention.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr int kChunk = kDecodeChunk;     // keys per chunk (as the CPU)
constexpr int kSplitMaxL = kDecodeMaxL;  // more new queries than this: the flash forward

// Number of key chunks query i sees (keys 0 … S−L+i).
__host__ __device__ inline int chunks_of(int i, int L, int S) {
  return (S - L + i) / kChunk + 1;
}

// One chunk's partial for the G heads of kv head g and query i. Block (chunk c, i·Hk + g).
// part = [m[G], l[G], acc[G][d]] at parts + ((i·Hk + g)·max_chunks + c)·G·(d + 2).
// Shared: qs[G][d] (scaled queries), s[G][kChunk] (scores, then probabilities).
__global__ __launch_bounds__(kBlock) void chunk_partial_kernel(float* parts, const float* q,
                                                               const float* k, const float* v,
                                                               int L, int S, int Hq, int Hk, int d,
                                                               int max_chunks, float scale) {
  const int c = blockIdx.x, ig = blockIdx.y, i = ig / Hk, g = ig % Hk, G = Hq / Hk;
  if (c >= chunks_of(i, L, S)) return;  // the whole block: beyond this query's position
  extern __shared__ float4 smem4[];
  float* qs = reinterpret_cast<float*>(smem4);
  float* s = qs + G * d;
  const int tau0 = c * kChunk, n = min(kChunk, S - L + i + 1 - tau0);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int64_t stride = int64_t(Hk) * d;
  const float* qsrc = q + (int64_t(i) * Hq + int64_t(g) * G) * d;
  for (int e = threadIdx.x; e < G * d; e += blockDim.x) qs[e] = qsrc[e] * scale;
  __syncthreads();
  // Pass 1: scores, one warp per key, each key row read once for the G heads.
  for (int t = warp; t < n; t += warps) {
    const float* krow = k + (tau0 + t) * stride + int64_t(g) * d;
    for (int hh = 0; hh < G; ++hh) {
      float acc = 0.f;
      for (int e = lane; e < d; e += kWarp) acc += qs[hh * d + e] * krow[e];
      acc = warp_sum(acc);
      if (lane == 0) s[hh * kChunk + t] = acc;
    }
  }
  __syncthreads();
  float* part = parts + ((int64_t(ig) * max_chunks + c) * G) * (d + 2);
  // Per head (one warp each): m = max s, p = e^{s−m} in place, l = Σ p.
  for (int hh = warp; hh < G; hh += warps) {
    float* sr = s + hh * kChunk;
    float m = -INFINITY;
    for (int t = lane; t < n; t += kWarp) m = fmaxf(m, sr[t]);
    m = warp_max(m);
    float l = 0.f;
    for (int t = lane; t < n; t += kWarp) {
      const float p = expf(sr[t] - m);
      sr[t] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) part[hh] = m, part[G + hh] = l;
  }
  __syncthreads();
  // Pass 2: acc[hh][e] = Σ_t p[hh][t]·v[t][e], each thread one (head, column) at a time.
  for (int idx = threadIdx.x; idx < G * d; idx += blockDim.x) {
    const int hh = idx / d, e = idx % d;
    const float* sr = s + hh * kChunk;
    const float* vcol = v + int64_t(tau0) * stride + int64_t(g) * d + e;
    float acc = 0.f;
    for (int t = 0; t < n; ++t) acc += sr[t] * vcol[t * stride];
    part[2 * G + idx] = acc;
  }
}

// o of query i, heads g·G … g·G+G−1: the partials of its chunks merged in chunk order, = acc / l.
// Block i·Hk + g; each thread one (head, column) at a time (the m, l merge is recomputed per
// column, with the same arithmetic as the CPU's).
__global__ __launch_bounds__(kBlock) void combine_kernel(float* o, const float* parts, int L, int S,
                                                         int Hq, int Hk, int d, int max_chunks) {
  const int ig = blockIdx.x, i = ig / Hk, g = ig % Hk, G = Hq / Hk;
  const int nc = chunks_of(i, L, S);
  const int64_t part = int64_t(G) * (d + 2);
  const float* base = parts + int64_t(ig) * max_chunks * part;
  float* out = o + (int64_t(i) * Hq + int64_t(g) * G) * d;
  for (int idx = threadIdx.x; idx < G * d; idx += blockDim.x) {
    const int hh = idx / d;
    float m = base[hh], l = base[G + hh], a = base[2 * G + idx];
    for (int c = 1; c < nc; ++c) {
      const float* pc = base + c * part;
      const float mc = pc[hh], lc = pc[G + hh], ac = pc[2 * G + idx];
      const float m_new = fmaxf(m, mc);
      const float alpha = expf(m - m_new), beta = expf(mc - m_new);
      l = l * alpha + lc * beta;
      m = m_new;
      a = a * alpha + ac * beta;
    }
    out[idx] = a * (1.0f / l);
  }
}

}  // namespace

void attention_cached_forward(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v,
                              int64_t window) {
  if (window > 0) fail("attention_cached_forward: window {}: no GPU sliding-window kernel", window);
  const int64_t L = q.size(0), S = k.size(0), Hq = q.size(1), Hk = k.size(1), d = q.size(2);
  ZAYA_ASSERT(S < (int64_t(1) << 30), "attention_cached_forward: S ≥ 2^30 (int offsets)");
  if (L > kSplitMaxL) {
    flash_attention_forward(o.ptr<float>(), nullptr, q.ptr<float>(), k.ptr<float>(), v.ptr<float>(),
                            1, L, S, Hq, Hk, d);
    return;
  }
  const int64_t G = Hq / Hk;
  const size_t smem = sizeof(float) * size_t(G * (d + kChunk));
  // Within kDecodeMaxSmem (ops/gpu/support.h); L·Hk blocks on the grid's y.
  ZAYA_ASSERT(L * Hk <= 65535, "attention_cached_forward: L·Hk > 65535 (the launch grid)");
  const int max_chunks = chunks_of(int(L - 1), int(L), int(S));
  Scratch parts(sizeof(float) * size_t(L * Hk * max_chunks * G * (d + 2)));
  chunk_partial_kernel<<<dim3(unsigned(max_chunks), unsigned(L * Hk)), kBlock, smem, stream()>>>(
      parts.as<float>(), q.ptr<float>(), k.ptr<float>(), v.ptr<float>(), int(L), int(S), int(Hq),
      int(Hk), int(d), max_chunks, 1.0f / std::sqrt(float(d)));
  ZAYA_GPU_LAUNCH_CHECK();
  combine_kernel<<<unsigned(L * Hk), kBlock, 0, stream()>>>(
      o.ptr<float>(), parts.as<float>(), int(L), int(S), int(Hq), int(Hk), int(d), max_chunks);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
