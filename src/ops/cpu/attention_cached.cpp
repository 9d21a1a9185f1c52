// attention_cached_forward on the CPU: causal GQA attention of L new queries over one sequence's
// K/V cache (docs/model.md §4.7–4.8), forward only, F32.
//
// Layout: q[L,Hq,d], k,v[S,Hk,d], o[L,Hq,d]; query i sits at position p_i = S−L+i and sees keys
// lo_i…p_i, lo_i = 0, or max(0, p_i − W + 1) with a sliding window of W keys (ops/ops.h); query
// head h reads kv head g = h/G, G = Hq/Hk. Scores s = (q/√d)·k, softmax in f32.
//
// Algorithm (split-key online softmax, "flash decoding"): the keys of query i are cut into chunks
// at multiples of kChunk (the first one starting at lo_i, so a window costs O(W) per query). One
// chunk, for the G heads of a kv head together (so each K and V row is read once for the whole
// group), is two passes over a score buffer: scores for the chunk, then per head m = max s, p =
// e^{s−m}, l = Σ p, acc = Σ p·v. Chunk partials (m, l, acc) are then merged in chunk order: m' =
// max(m, m_c), acc' = acc·e^{m−m'} + acc_c·e^{m_c−m'} (l likewise), o = acc/l. The chunking is
// fixed (not derived from the thread count) and every merge runs in chunk order, so the bits do not
// depend on the thread count or on how tasks are scheduled.
//
// Parallel plan: few queries (decode, L·Hk small) → one task per (query, kv head, chunk), partials
// in a buffer, then a merge pass, both on the decode team of ops/cpu/stealing.h; many queries
// (prefill over a cache) → one task per (query, kv head), chunks merged as they are produced. Both
// run the same arithmetic.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/exp_vec.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/stealing.h"

namespace zaya::ops::cpu {

namespace {

constexpr int64_t kChunk = 256;  // keys per chunk: G·kChunk scores stay in L1
constexpr int kLanes = 16;       // fixed accumulator lanes: vectorises, order is fixed

// Σ_e a[e]·b[e]: kLanes fixed lanes, the tail, then a pairwise tree over the lanes.
inline float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[e + l] * b[e + l];
  for (int l = 0; e < n; ++e, ++l) acc[l] += a[e] * b[e];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

inline float max_lanes(const float* s, int64_t n) {
  float m[kLanes];
  std::fill(m, m + kLanes, -std::numeric_limits<float>::infinity());
  int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes)
    for (int l = 0; l < kLanes; ++l) m[l] = s[e + l] > m[l] ? s[e + l] : m[l];
  for (int l = 0; e < n; ++e, ++l) m[l] = s[e] > m[l] ? s[e] : m[l];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) m[l] = m[l + w] > m[l] ? m[l + w] : m[l];
  return m[0];
}

// s[e] = e^{s[e] − m} in place; returns Σ s (lanes, then tree).
inline float exp_sum_lanes(float* s, int64_t n, float m) {
  float acc[kLanes] = {};
  int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      s[e + l] = exp_vec(s[e + l] - m);
      acc[l] += s[e + l];
    }
  for (int l = 0; e < n; ++e, ++l) {
    s[e] = exp_vec(s[e] - m);
    acc[l] += s[e];
  }
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

struct Dims {
  int64_t L, S, Hq, Hk, d;
  int64_t W;  // keys a query sees, itself included; 0 = all earlier keys
  int64_t G() const { return Hq / Hk; }
  int64_t pos(int64_t i) const { return S - L + i; }
  int64_t first_key(int64_t i) const { return W == 0 ? 0 : std::max<int64_t>(0, pos(i) - W + 1); }
  // Chunks of query i's keys first_key(i) … pos(i): those of the multiples of kChunk they span.
  int64_t chunks(int64_t i) const { return pos(i) / kChunk - first_key(i) / kChunk + 1; }
  // Keys [tau0, tau1) of query i's chunk c.
  int64_t chunk_begin(int64_t i, int64_t c) const {
    return std::max(first_key(i), (first_key(i) / kChunk + c) * kChunk);
  }
  int64_t chunk_end(int64_t i, int64_t c) const {
    return std::min((first_key(i) / kChunk + c + 1) * kChunk, pos(i) + 1);
  }
};

// One chunk's partial for the G heads of a group: keys [tau0, tau1) of kv head g.
// qs[G,d] scaled queries; s[G,kChunk] scratch; out m[G], l[G], acc[G,d].
void chunk_partial(float* m, float* l, float* acc, float* s, const float* qs, const float* k,
                   const float* v, const Dims& D, int64_t g, int64_t tau0, int64_t tau1) {
  const int64_t G = D.G(), d = D.d, n = tau1 - tau0, stride = D.Hk * D.d;
  for (int64_t t = 0; t < n; ++t) {  // pass 1: scores, each key row read once for the group
    const float* krow = k + (tau0 + t) * stride + g * d;
    for (int64_t hh = 0; hh < G; ++hh) s[hh * kChunk + t] = dot_lanes(qs + hh * d, krow, d);
  }
  for (int64_t hh = 0; hh < G; ++hh) {
    m[hh] = max_lanes(s + hh * kChunk, n);
    l[hh] = exp_sum_lanes(s + hh * kChunk, n, m[hh]);
  }
  std::fill(acc, acc + G * d, 0.0f);
  for (int64_t t = 0; t < n; ++t) {  // pass 2: acc += p·v, each value row read once
    const float* vrow = v + (tau0 + t) * stride + g * d;
    for (int64_t hh = 0; hh < G; ++hh) {
      const float p = s[hh * kChunk + t];
      float* a = acc + hh * d;
      for (int64_t e = 0; e < d; ++e) a[e] += p * vrow[e];
    }
  }
}

// Running (m, l, acc)[G] ← merge with a chunk partial (mc, lc, accc); the first chunk copies.
void merge_partial(float* m, float* l, float* acc, const float* mc, const float* lc,
                   const float* accc, int64_t G, int64_t d, bool first) {
  for (int64_t hh = 0; hh < G; ++hh) {
    float* a = acc + hh * d;
    const float* ac = accc + hh * d;
    if (first) {
      m[hh] = mc[hh], l[hh] = lc[hh];
      std::copy_n(ac, d, a);
      continue;
    }
    const float m_new = std::max(m[hh], mc[hh]);
    const float alpha = std::exp(m[hh] - m_new), beta = std::exp(mc[hh] - m_new);
    l[hh] = l[hh] * alpha + lc[hh] * beta;
    m[hh] = m_new;
    for (int64_t e = 0; e < d; ++e) a[e] = a[e] * alpha + ac[e] * beta;
  }
}

// o[G,d] of query i, heads g·G … g·G+G−1 = acc / l.
void write_output(float* o, const float* l, const float* acc, const Dims& D, int64_t i, int64_t g) {
  const int64_t G = D.G(), d = D.d;
  float* out = o + (i * D.Hq + g * G) * d;
  for (int64_t hh = 0; hh < G; ++hh) {
    const float inv = 1.0f / l[hh];
    for (int64_t e = 0; e < d; ++e) out[hh * d + e] = acc[hh * d + e] * inv;
  }
}

void load_queries(float* qs, const float* q, const Dims& D, int64_t i, int64_t g, float scale) {
  const int64_t G = D.G(), d = D.d;
  const float* src = q + (i * D.Hq + g * G) * d;
  for (int64_t e = 0; e < G * d; ++e) qs[e] = src[e] * scale;
}

void forward_impl(float* o, const float* q, const float* k, const float* v, const Dims& D) {
  const int64_t G = D.G(), d = D.d, L = D.L, Hk = D.Hk;
  const float scale = 1.0f / std::sqrt(float(d));
  const int64_t keys = D.W == 0 ? D.S : std::min(D.S, D.W);  // the most keys one query sees
  const bool parallel = double(L) * double(keys) * double(D.Hq * d) > double(kParallelMin);
  int64_t max_chunks = 0;
  for (int64_t i = 0; i < L; ++i) max_chunks = std::max(max_chunks, D.chunks(i));
  const int64_t part = G * (d + 2);  // one partial: m[G], l[G], acc[G,d]
  if (L * Hk < 16) {
    // Few (query, kv head) pairs: split their keys across tasks, then merge in chunk order.
    std::vector<float> parts(size_t(L * Hk * max_chunks * part));
    const int64_t tasks = L * Hk * max_chunks;
    // On the decode team (ops/cpu/stealing.h) rather than an OpenMP region: decode runs one of
    // these per attention layer per token, between the GEMVs that use that team.
    for_chunks_stealing(tasks, 1, parallel, [&](int64_t t0, int64_t t1) {
      thread_local std::vector<float> qs, s;
      qs.resize(size_t(G * d));
      s.resize(size_t(G * kChunk));
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t ig = task / max_chunks, c = task % max_chunks, i = ig / Hk, g = ig % Hk;
        if (c >= D.chunks(i)) continue;  // beyond this query's keys
        const int64_t tau0 = D.chunk_begin(i, c), tau1 = D.chunk_end(i, c);
        float* pm = parts.data() + task * part;
        load_queries(qs.data(), q, D, i, g, scale);
        chunk_partial(pm, pm + G, pm + 2 * G, s.data(), qs.data(), k, v, D, g, tau0, tau1);
      }
    });
    for_chunks_stealing(L * Hk, 1, parallel && max_chunks > 1, [&](int64_t p0, int64_t p1) {
      for (int64_t ig = p0; ig < p1; ++ig) {
        const int64_t i = ig / Hk, g = ig % Hk;
        float* run = parts.data() + ig * max_chunks * part;  // chunk 0's partial is the start
        for (int64_t c = 1; c < D.chunks(i); ++c) {
          const float* pc = run + c * part;
          merge_partial(run, run + G, run + 2 * G, pc, pc + G, pc + 2 * G, G, d, false);
        }
        write_output(o, run + G, run + 2 * G, D, i, g);
      }
    });
    return;
  }
  // Many pairs: one task per (query, kv head), chunks merged in order as they are produced.
#pragma omp parallel if (parallel)
  {
    std::vector<float> qs(G * d), s(G * kChunk), run(part), pc(part);
#pragma omp for schedule(dynamic, 4)
    for (int64_t ig = 0; ig < L * Hk; ++ig) {
      const int64_t i = ig / Hk, g = ig % Hk;
      load_queries(qs.data(), q, D, i, g, scale);
      for (int64_t c = 0; c < D.chunks(i); ++c) {
        const int64_t tau0 = D.chunk_begin(i, c), tau1 = D.chunk_end(i, c);
        chunk_partial(pc.data(), pc.data() + G, pc.data() + 2 * G, s.data(), qs.data(), k, v, D, g,
                      tau0, tau1);
        merge_partial(run.data(), run.data() + G, run.data() + 2 * G, pc.data(), pc.data() + G,
                      pc.data() + 2 * G, G, d, c == 0);
      }
      write_output(o, run.data() + G, run.data() + 2 * G, D, i, g);
    }
  }
}

}  // namespace

void attention_cached_forward(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v,
                              int64_t window) {
  // A window of S or more keys hides nothing: the plain causal path.
  const Dims D{q.size(0), k.size(0), q.size(1),
               k.size(1), q.size(2), window >= k.size(0) ? 0 : window};
  forward_impl(o.ptr<float>(), q.ptr<float>(), k.ptr<float>(), v.ptr<float>(), D);
}

}  // namespace zaya::ops::cpu
