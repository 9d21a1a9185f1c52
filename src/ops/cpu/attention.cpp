// attention_forward / attention_backward on the CPU (docs/model.md §4.7, §8.5 step 1): causal GQA
// attention in the flash-attention style. Queries and keys are cut into kT-row tiles; the forward
// keeps a running max m and sum l per query row (online softmax) and saves lse = m + log l; the
// backward recomputes P = exp(S − lse) tile by tile, once per (query tile, key tile) pair. Extra
// memory is linear in T: packed key/value tiles (2–3 copies of k's size), and in the backward the
// packed queries and output gradients, Di = ⟨dO, O⟩, per-head dK/dV partials and C per-head dQ
// partials (4 + C copies of q's size; C = 1 from kBackwardTasks (batch, head) pairs up, else up to
// kBackwardTasks / (B·Hq)), plus O(kT·d + kT²) per thread. There is no T×T buffer, so 32K contexts
// fit. All scratch is reused from call to call (no allocation in steady state).
//
// Layout: q[B,T,Hq,d], k,v[B,T,Hk,d]; query head h reads kv head h/G, G = Hq/Hk. Scores
// S = (q/√d)·kᵀ; q is pre-scaled when it is packed, so dk = dSᵀ·(q/√d) needs no extra scale.
// Arithmetic is in the tensors' dtype (F32: float with a vectorisable exp, F64: double). The tile
// products run on attention_gemm.h's register-blocked kernel; fully masked tiles (key tile after
// query tile) are never visited.
//
// Sliding window (window W > 0, ops/ops.h): query t sees keys t − W + 1 … t. A (query tile i, key
// tile j) pair is visited only when some query of tile i sees some key of tile j, so a call costs
// O(T·W) (about W/kT + 2 key tiles per query tile); inside the pairs that straddle the window's
// edge the scores outside it are masked exactly as the causal diagonal is. A query may see no key
// of the first tiles its query tile visits, so the running max starts at the lowest finite value
// rather than −inf (e^(m − m') stays 0 or 1, never NaN); every query sees itself, so l > 0 at the
// end. The backward's per-chunk dQ partials then cover only the query tiles their key tiles reach.
//
// Parallel plan (every output element is written by one task in a fixed order, so results are
// bitwise identical for any thread count or schedule):
//   forward   tasks (b, h, query tile i), key tiles 0…i, the longest (last i) first;
//   backward  tasks (b, h, chunk c of key tiles), the chunks a fixed function of the shape; a task
//             walks its key tiles j and the query tiles i ≥ j, accumulating dK_j, dV_j of head h
//             and its chunk's partial dQ_i; a last pass sums dq over the chunks in order and dk,
//             dv over the G heads of each kv head in order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/attention_gemm.h"

namespace zaya::ops::cpu {

namespace {

using attn::gemm;
using attn::kLanes;

constexpr int64_t kT = 64;  // tile rows (queries) = tile columns (keys); a multiple of kLanes
// The backward splits each head's key tiles into chunks until there are about this many tasks.
constexpr int64_t kBackwardTasks = 16;

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// A growable 64-byte-aligned buffer of the calling thread, one per Slot, reused across calls (no
// allocation in steady state). Slots 0–9 hold per-call shared data (owned by the thread that
// calls the op), 10 and up per-thread tile scratch.
template <class T, int Slot>
T* scratch(int64_t n) {
  thread_local std::vector<T> buf;
  constexpr size_t pad = 64 / sizeof(T);
  if (buf.size() < size_t(n) + pad) buf.resize(size_t(n) + pad);
  const auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));
}

// Row reductions over n columns (n a multiple of kLanes), in fixed lanes (vectorisable,
// deterministic).
template <class T>
T row_max(const T* s, int64_t n) {
  constexpr int L = int(kLanes<T>);
  T m[L];
  for (int l = 0; l < L; ++l) m[l] = s[l];
  for (int64_t c = L; c < n; c += L)
    for (int l = 0; l < L; ++l) m[l] = s[c + l] > m[l] ? s[c + l] : m[l];
  T r = m[0];
  for (int l = 1; l < L; ++l) r = m[l] > r ? m[l] : r;
  return r;
}
template <class T>
T row_sum(const T* s, int64_t n) {
  constexpr int L = int(kLanes<T>);
  T a[L] = {};
  for (int64_t c = 0; c < n; c += L)
    for (int l = 0; l < L; ++l) a[l] += s[c + l];
  T r = 0;
  for (int l = 0; l < L; ++l) r += a[l];
  return r;
}

// dst[n, dp] = sc · rows 0…n−1 of src (row stride `stride`, d used columns, zero up to dp).
template <class T>
void load_rows(T* dst, const T* src, int64_t stride, int64_t n, int64_t d, int64_t dp, T sc) {
  for (int64_t r = 0; r < n; ++r) {
    T* out = dst + r * dp;
    const T* in = src + r * stride;
    for (int64_t e = 0; e < d; ++e) out[e] = in[e] * sc;
    for (int64_t e = d; e < dp; ++e) out[e] = T(0);
  }
}
// dst[dp, kT] = sc · transpose of rows 0…n−1 of src, zero elsewhere.
template <class T>
void load_cols(T* dst, const T* src, int64_t stride, int64_t n, int64_t d, int64_t dp,
               T sc = T(1)) {
  for (int64_t e = 0; e < dp; ++e)
    for (int64_t c = 0; c < kT; ++c)
      dst[e * kT + c] = (c < n && e < d) ? src[c * stride + e] * sc : T(0);
}

struct Dims {
  int64_t B, T, Hq, Hk, d;
  int64_t W;  // keys a query sees, itself included; 0 = all earlier keys
  int64_t G() const { return Hq / Hk; }
  int64_t tiles() const { return (T + kT - 1) / kT; }
  // The first key tile some query of query tile i sees: the one holding key i·kT − W + 1.
  int64_t first_key_tile(int64_t i) const {
    const int64_t lo = i * kT - W + 1;
    return W == 0 || lo <= 0 ? 0 : lo / kT;
  }
  // The last query tile some query of which sees a key of key tile j (the inverse of the above).
  int64_t last_query_tile(int64_t j) const {
    return W == 0 ? tiles() - 1 : std::min(tiles() - 1, ((j + 1) * kT + W - 2) / kT);
  }
  // Visited (query tile, key tile) pairs.
  int64_t pairs() const {
    int64_t n = 0;
    for (int64_t i = 0; i < tiles(); ++i) n += i - first_key_tile(i) + 1;
    return n;
  }
  // Threads only pay off above ~1 ms of work (≈ 16K·d flops per tile pair); tiny calls stay on
  // the calling thread, which also avoids barrier stalls on an oversubscribed machine.
  bool parallel() const { return B * Hq * pairs() * d >= 1024; }
};

// Validates shapes and returns the dimensions.
Dims attention_dims(const Tensor& q, const Tensor& k, int64_t window) {
  // A window of T or more keys hides nothing: the plain causal path.
  const int64_t W = window >= q.size(1) ? 0 : window;
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), W};
}

// On scores St[nk, kT] of query tile t0 against key tile tau0 (key-major, St[c·kT + r]): −inf where
// query r is further than W − 1 positions past key c. Only called on pairs that straddle the edge.
template <class T>
void mask_window(T* St, int64_t nk, int64_t nq, int64_t delta, int64_t W) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < nk; ++c)
    for (int64_t r = std::max<int64_t>(0, W + c - delta); r < nq; ++r) St[c * kT + r] = neg_inf;
}

// Key/value tiles packed once per call into out, zero-padded, one contiguous block per tile:
// transposed → [B, Hk, nt, dp, kT] (GEMM right operand for S = Q·Kᵀ, dP = dO·Vᵀ), else
// [B, Hk, nt, kT, dp] (right operand for O = P·V, dQ = dS·K). O(T·d) memory; the inner loops then
// never transpose or copy a key tile.
template <class T>
void pack_kv(T* out, const T* x, const Dims& s, int64_t dp, bool transposed) {
  const int64_t nt = s.tiles(), tile = dp * kT;
#pragma omp parallel for schedule(static) if (s.parallel())
  for (int64_t task = 0; task < s.B * s.Hk * nt; ++task) {  // task = (b·Hk + g)·nt + j
    const int64_t b = task / (s.Hk * nt), g = task / nt % s.Hk, j = task % nt;
    const int64_t nk = std::min(kT, s.T - j * kT);
    const T* src = x + ((b * s.T + j * kT) * s.Hk + g) * s.d;
    T* dst = out + task * tile;
    if (transposed) {
      load_cols(dst, src, s.Hk * s.d, nk, s.d, dp);
    } else {
      load_rows(dst, src, s.Hk * s.d, nk, s.d, dp, T(1));
      std::fill(dst + nk * dp, dst + tile, T(0));
    }
  }
}

// ------------------------------------------------------------------------------ forward

// One key tile's online-softmax step on key-major scores St[nk, kT]: per query lane r the new max
// m' = max(m, St[·, r]), alpha = e^(m − m') (0 on the first tile, m = −inf), l = l·alpha + Σ_c p,
// St becomes p = e^(St − m'), m becomes m'. Whole SIMD vectors of queries at a time.
template <class T>
void online_softmax_tile(T* St, int64_t nk, T* m, T* l, T* alpha) {
  using V = typename attn::Simd<T>::vec;
  constexpr int64_t W = kLanes<T>, NQ = kT / W;
  V mx[NQ], lv[NQ];
  for (int64_t v = 0; v < NQ; ++v) mx[v] = attn::load(m + v * W);
  for (int64_t c = 0; c < nk; ++c)
    for (int64_t v = 0; v < NQ; ++v) {
      const V x = attn::load(St + c * kT + v * W);
      mx[v] = x > mx[v] ? x : mx[v];
    }
  for (int64_t v = 0; v < NQ; ++v) {
    const V a = attn::exp_simd<T>(attn::load(m + v * W) - mx[v]);
    attn::store(alpha + v * W, a);
    lv[v] = attn::load(l + v * W) * a;
    attn::store(m + v * W, mx[v]);
  }
  for (int64_t c = 0; c < nk; ++c)
    for (int64_t v = 0; v < NQ; ++v) {
      const V p = attn::exp_simd<T>(attn::load(St + c * kT + v * W) - mx[v]);
      attn::store(St + c * kT + v * W, p);
      lv[v] += p;
    }
  for (int64_t v = 0; v < NQ; ++v) attn::store(l + v * W, lv[v]);
}

// Scores are computed transposed, St[key c, query r] = K_j·Qsᵀ, so that each SIMD vector holds
// kLanes queries of one key: the running max, the rescale factor and the sums are then plain
// element-wise vector operations over fixed-length rows (no horizontal reductions, no per-row
// scalar work), and O += P·V reads Pᵀ through the GEMM's strided A.
template <class T>
void forward_impl(T* o, T* lse, const T* q, const T* k, const T* v, const Dims& s) {
  const int64_t d = s.d, dp = round_up(d, kLanes<T>), G = s.G(), nt = s.tiles(), tile = dp * kT;
  const T scale = T(1) / std::sqrt(T(d));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T m_start = std::numeric_limits<T>::lowest();  // the running max's start (see the top)
  const int64_t kv_size = s.B * s.Hk * nt * tile;
  T* kr = scratch<T, 0>(kv_size);
  T* vr = scratch<T, 1>(kv_size);
  pack_kv(kr, k, s, dp, false);
  pack_kv(vr, v, s, dp, false);
  const int64_t tasks = s.B * s.Hq * nt;
#pragma omp parallel if (s.parallel())
  {
    // Qt[dp,kT] scaled queries transposed, St[kT,kT] scores then probabilities (key-major),
    // acc[kT,dp] unnormalised output, m/l[kT] running max and sum per query, alpha[kT] the
    // tile's rescale factor.
    T* Qt = scratch<T, 10>(dp * kT);
    T* St = scratch<T, 11>(kT * kT);
    T* acc = scratch<T, 12>(kT * dp);
    T* m = scratch<T, 13>(kT);
    T* l = scratch<T, 14>(kT);
    T* alpha = scratch<T, 15>(kT);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task % (s.B * s.Hq), i = nt - 1 - task / (s.B * s.Hq);  // longest first
      const int64_t b = bh / s.Hq, h = bh % s.Hq, g = h / G;
      const int64_t t0 = i * kT, nq = std::min(kT, s.T - t0);
      load_cols(Qt, q + ((b * s.T + t0) * s.Hq + h) * d, s.Hq * d, nq, d, dp, scale);
      std::fill(m, m + kT, m_start);
      std::fill(l, l + kT, T(0));
      const int64_t j0 = s.first_key_tile(i);
      for (int64_t j = j0; j <= i; ++j) {
        // Key tiles before the diagonal are full and unmasked but for the window's edge; the
        // diagonal one (τ0 = t0) hides keys c > r from query r.
        const int64_t nk = j < i ? kT : nq, kv = ((b * s.Hk + g) * nt + j) * tile;
        const int64_t delta = t0 - j * kT;  // query row r is at key column r + delta
        gemm(St, kT, kr + kv, dp, 1, Qt, kT, nk, kT, dp, false);
        if (j == i)
          for (int64_t c = 1; c < nk; ++c)
            for (int64_t r = 0; r < c; ++r) St[c * kT + r] = neg_inf;
        if (s.W > 0 && delta + nq - 1 >= s.W) mask_window(St, nk, nq, delta, s.W);
        online_softmax_tile(St, nk, m, l, alpha);
        if (j > j0)
          for (int64_t r = 0; r < nq; ++r)
            for (int64_t e = 0; e < dp; ++e) acc[r * dp + e] *= alpha[r];
        gemm(acc, dp, St, 1, kT, vr + kv, dp, nq, dp, nk, j > j0);  // acc += Pᵀᵀ·V
      }
      for (int64_t r = 0; r < nq; ++r) {
        T* orow = o + ((b * s.T + t0 + r) * s.Hq + h) * d;
        const T inv = T(1) / l[r];
        for (int64_t e = 0; e < d; ++e) orow[e] = acc[r * dp + e] * inv;
        lse[(b * s.Hq + h) * s.T + t0 + r] = m[r] + std::log(l[r]);
      }
    }
  }
}

// ------------------------------------------------------------------------------ backward

// The backward's split of each head's key tiles into C chunks of about equal work (key tile j
// meets the query tiles j … last_query_tile(j)): chunk c holds key tiles [start(c), start(c + 1)).
// A function of the shape only, so the summation order of dq does not depend on the thread count.
struct Chunks {
  int64_t C;
  std::vector<int64_t> start;  // C + 1 entries
  Chunks(const Dims& s) {
    const int64_t nt = s.tiles(), heads = std::max(s.B * s.Hq, int64_t(1));
    C = std::clamp((kBackwardTasks + heads - 1) / heads, int64_t(1), std::max(nt, int64_t(1)));
    start.assign(size_t(C + 1), nt);
    const int64_t total = s.pairs();
    int64_t done = 0, c = 1;
    start[0] = 0;
    for (int64_t j = 0; j < nt && c < C; ++j) {
      done += s.last_query_tile(j) - j + 1;
      if (done * C >= c * total) start[size_t(c++)] = j + 1;
    }
    for (; c < C; ++c) start[size_t(c)] = nt;  // (unreached: the loop fills every boundary)
  }
};

// For one (query tile, key tile) pair: S = Qs·Kt, dP = dOs·Vt, P = exp(S − lse) on visible keys
// (else 0), dS = P ⊙ (dP − D) on rows < nq. S becomes P, dP becomes dS. Query row r sits at key
// column r + delta (delta = t0 − tau0) and sees columns c with r + delta − W < c ≤ r + delta (no
// lower bound when W = 0). A key tile before the diagonal (tau0 < t0) is full and, away from the
// window's edge, unmasked.
template <class T>
void probs_and_dscores(T* S, T* dP, const T* Qs, const T* dOs, const T* Kt, const T* Vt,
                       const T* lse, const T* D, int64_t nq, int64_t nk, int64_t delta, int64_t W,
                       int64_t dp) {
  const bool masked = delta == 0 || (W > 0 && delta + nq - 1 >= W);
  gemm(S, kT, Qs, dp, 1, Kt, kT, nq, round_up(nk, kLanes<T>), dp, false);
  gemm(dP, kT, dOs, dp, 1, Vt, kT, nq, round_up(nk, kLanes<T>), dp, false);
  using V = typename attn::Simd<T>::vec;
  constexpr int64_t L = kLanes<T>;
  V iota;
  for (int64_t c = 0; c < L; ++c) iota[c] = T(c);
  for (int64_t r = 0; r < nq; ++r) {
    const V m = attn::splat(lse[r]), Dr = attn::splat(D[r]);
    // Visible columns: lo ≤ c ≤ hi (the window's first key, the query's own position).
    const V hi = attn::splat(T(r + delta)), lo = attn::splat(T(W > 0 ? r + delta - W + 1 : -1));
    for (int64_t c = 0; c < kT; c += L) {
      const V p = attn::exp_simd<T>(attn::load(S + r * kT + c) - m);
      const V ds = p * (attn::load(dP + r * kT + c) - Dr);
      if (!masked) {
        attn::store(S + r * kT + c, p);
        attn::store(dP + r * kT + c, ds);
      } else {  // columns past round_up(nk) hold stale scratch: the select drops them
        const V col = iota + T(c);
        const auto visible = (col <= hi) & (col >= lo);
        attn::store(S + r * kT + c, visible ? p : V{});
        attn::store(dP + r * kT + c, visible ? ds : V{});
      }
    }
  }
}

template <class T>
void backward_impl(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                   const T* o, const T* lse, const Dims& s) {
  const int64_t d = s.d, dp = round_up(d, kLanes<T>), G = s.G(), nt = s.tiles(), tile = dp * kT;
  const int64_t BH = s.B * s.Hq, rows = s.T * dp;  // rows: one head's packed [T, dp]
  const T scale = T(1) / std::sqrt(T(d));
  const Chunks chunks(s);
  const int64_t C = chunks.C, kv_size = s.B * s.Hk * nt * tile;
  T* kt = scratch<T, 0>(kv_size);
  T* vt = scratch<T, 1>(kv_size);
  T* kr = scratch<T, 2>(kv_size);
  pack_kv(kt, k, s, dp, true);
  pack_kv(vt, v, s, dp, true);
  pack_kv(kr, k, s, dp, false);
  // Per head bh = b·Hq + h: Qs, dOs [T, dp] packed (q scaled), Di[T] = ⟨dO_t, O_t⟩ (the softmax
  // backward's row term Σ_τ P ⊙ dP), dK, dV partials [T, dp]; per (head, chunk) dQ partial [T, dp].
  T* Qs = scratch<T, 3>(BH * rows);
  T* dOs = scratch<T, 4>(BH * rows);
  T* Di = scratch<T, 5>(BH * s.T);
  T* dKp = scratch<T, 6>(BH * rows);
  T* dVp = scratch<T, 7>(BH * rows);
  T* dQp = scratch<T, 8>(BH * C * rows);

#pragma omp parallel if (s.parallel())
  {
#pragma omp for schedule(static)
    for (int64_t task = 0; task < BH * nt; ++task) {  // task = bh·nt + i
      const int64_t bh = task / nt, b = bh / s.Hq, h = bh % s.Hq, t0 = task % nt * kT;
      const int64_t nq = std::min(kT, s.T - t0), off = ((b * s.T + t0) * s.Hq + h) * d;
      load_rows(Qs + bh * rows + t0 * dp, q + off, s.Hq * d, nq, d, dp, scale);
      load_rows(dOs + bh * rows + t0 * dp, dout + off, s.Hq * d, nq, d, dp, T(1));
      for (int64_t r = 0; r < nq; ++r) {
        const T* a = dout + off + r * s.Hq * d;
        const T* b2 = o + off + r * s.Hq * d;
        T acc = 0;
        for (int64_t e = 0; e < d; ++e) acc += a[e] * b2[e];
        Di[bh * s.T + t0 + r] = acc;
      }
    }

    // S/dP[kT,kT]: scores → P and dP → dS of the current pair.
    T* S = scratch<T, 10>(kT * kT);
    T* dP = scratch<T, 11>(kT * kT);
    // Tasks (bh, c), the chunks holding the most work first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < BH * C; ++task) {
      const int64_t bh = task % BH, c = task / BH, b = bh / s.Hq, g = bh % s.Hq / G;
      const T* Qh = Qs + bh * rows;
      const T* dOh = dOs + bh * rows;
      const T* lse_h = lse + bh * s.T;
      const T* D_h = Di + bh * s.T;
      T* dQh = dQp + (bh * C + c) * rows;
      const int64_t j0 = chunks.start[size_t(c)], j1 = chunks.start[size_t(c + 1)];
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t tau0 = j * kT, nk = std::min(kT, s.T - tau0);
        const int64_t kv = ((b * s.Hk + g) * nt + j) * tile;
        T* dKj = dKp + bh * rows + tau0 * dp;
        T* dVj = dVp + bh * rows + tau0 * dp;
        for (int64_t i = j, i1 = s.last_query_tile(j); i <= i1; ++i) {
          const int64_t t0 = i * kT, nq = std::min(kT, s.T - t0);
          const T* Qi = Qh + t0 * dp;
          const T* dOi = dOh + t0 * dp;
          probs_and_dscores(S, dP, Qi, dOi, kt + kv, vt + kv, lse_h + t0, D_h + t0, nq, nk,
                            t0 - tau0, s.W, dp);
          gemm(dVj, dp, S, 1, kT, dOi, dp, nk, dp, nq, i > j);  // dV_j += Pᵀ·dO_i
          gemm(dKj, dp, dP, 1, kT, Qi, dp, nk, dp, nq, i > j);  // dK_j += dSᵀ·Qs_i
          // dQ_i += dS·K_j; the chunk's first key tile reaching query tile i overwrites.
          const bool first = j == std::max(j0, s.first_key_tile(i));
          gemm(dQh + t0 * dp, dp, dP, kT, 1, kr + kv, dp, nq, dp, nk, !first);
        }
      }
    }

    // dq = scale · Σ_c dQ partials (chunks c holding a key tile the row's tile reaches: first key
    // tile ≤ the row's tile, last ≥ first_key_tile of it), dk, dv = Σ over the G heads of the kv
    // head; both in a fixed order.
#pragma omp for schedule(static)
    for (int64_t bt = 0; bt < s.B * s.T; ++bt) {
      const int64_t b = bt / s.T, t = bt % s.T, i = t / kT, jlo = s.first_key_tile(i);
      for (int64_t h = 0; h < s.Hq; ++h) {
        const int64_t bh = b * s.Hq + h;
        T* row = dq + (bt * s.Hq + h) * d;
        const T* p0 = dQp + bh * C * rows + t * dp;
        bool any = false;
        for (int64_t c = 0; c < C && chunks.start[size_t(c)] <= i; ++c) {
          if (chunks.start[size_t(c + 1)] <= jlo) continue;  // every key tile before the window
          for (int64_t e = 0; e < d; ++e)
            row[e] = any ? row[e] + p0[c * rows + e] : p0[c * rows + e];
          any = true;
        }
        for (int64_t e = 0; e < d; ++e) row[e] *= scale;
      }
      for (int64_t g = 0; g < s.Hk; ++g) {
        const int64_t bh0 = b * s.Hq + g * G, off = (bt * s.Hk + g) * d;
        for (int64_t e = 0; e < d; ++e) {
          T sk = dKp[bh0 * rows + t * dp + e], sv = dVp[bh0 * rows + t * dp + e];
          for (int64_t x = 1; x < G; ++x) {
            sk += dKp[(bh0 + x) * rows + t * dp + e];
            sv += dVp[(bh0 + x) * rows + t * dp + e];
          }
          dk[off + e] = sk;
          dv[off + e] = sv;
        }
      }
    }
  }
}

}  // namespace

void attention_forward(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window) {
  const Dims s = attention_dims(q, k, window);
  ZAYA_DISPATCH_FLOAT(q.dtype,
                      forward_impl(o.ptr<scalar_t>(), lse.ptr<scalar_t>(), q.ptr<scalar_t>(),
                                   k.ptr<scalar_t>(), v.ptr<scalar_t>(), s));
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& do_,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, int64_t window) {
  const Dims s = attention_dims(q, k, window);
  ZAYA_DISPATCH_FLOAT(q.dtype,
                      backward_impl(dq.ptr<scalar_t>(), dk.ptr<scalar_t>(), dv.ptr<scalar_t>(),
                                    do_.ptr<scalar_t>(), q.ptr<scalar_t>(), k.ptr<scalar_t>(),
                                    v.ptr<scalar_t>(), o.ptr<scalar_t>(), lse.ptr<scalar_t>(), s));
}

}  // namespace zaya::ops::cpu
