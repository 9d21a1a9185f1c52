// attention_forward / attention_backward on the CPU (spec §4.7, §8.5 step 1): causal GQA attention
// in the flash-attention style. Queries and keys are cut into kT-row tiles; the forward keeps a
// running max m and sum l per query row (online softmax) and saves lse = m + log l; the backward
// recomputes P = exp(S − lse) tile by tile. Extra memory is linear in T: packed key/value tiles
// (1–3 copies of k's size) and Di = ⟨dO, O⟩ [B,Hq,T] in the backward, plus O(kT·d + kT²) scratch
// per thread. There is no T×T buffer, so 32K contexts fit.
//
// Layout: q[B,T,Hq,d], k,v[B,T,Hk,d]; query head h reads kv head h/G, G = Hq/Hk. Scores
// S = (q/√d)·kᵀ; q is pre-scaled when its tile is loaded, so dk = dSᵀ·(q/√d) needs no extra scale.
// Arithmetic is in the tensors' dtype (F32: float with a vectorisable exp, F64: double).
//
// Parallel plan (every output element is written by one task in a fixed order, so results are
// bitwise identical for any thread count or schedule):
//   forward          tasks (b, h, query tile i), key tiles 0…i;
//   backward dk, dv  tasks (b, g, key tile j), over the G heads of g and query tiles i ≥ j;
//   backward dq      tasks (b, h, query tile i), key tiles 0…i (recomputes S, P, dP).
// Every tile is zero-padded (rows to kT, d to a multiple of the GEMM block) so one register-blocked
// GEMM kernel serves every product; key/value tiles are packed once per call, query tiles per task.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/exp_vec.h"

namespace zaya::ops::cpu {

namespace {

constexpr int64_t kT = 64;  // tile rows (queries) = tile columns (keys)

// One 64-byte SIMD vector (GCC/Clang vector extension; split into halves without AVX-512).
template <class T>
struct Simd {
  typedef T vec __attribute__((vector_size(64)));
  static constexpr int kLanes = 64 / int(sizeof(T));
};
// GEMM register block: kMR rows × (2 vectors) columns, 16 accumulators.
constexpr int kMR = 8;
template <class T>
constexpr int64_t kNB = 2 * Simd<T>::kLanes;  // 32 floats or 16 doubles

// C[M,N] (+)= A[M,K]·B[K,N], row-major with leading dims. M % kMR == 0, N % kNB<T> == 0 (tiles
// are zero-padded); K is free. The accumulator block stays in registers; A is broadcast.
template <class T>
void gemm_nn(T* C, int64_t ldc, const T* A, int64_t lda, const T* B, int64_t ldb, int64_t M,
             int64_t N, int64_t K, bool accumulate) {
  using V = typename Simd<T>::vec;
  constexpr int W = Simd<T>::kLanes;
  for (int64_t i = 0; i < M; i += kMR)
    for (int64_t j = 0; j < N; j += 2 * W) {
      V acc[kMR][2];
      for (int r = 0; r < kMR; ++r)
        for (int c = 0; c < 2; ++c) {
          if (accumulate) {
            std::memcpy(&acc[r][c], C + (i + r) * ldc + j + c * W, sizeof(V));
          } else {
            acc[r][c] = V{};
          }
        }
      for (int64_t p = 0; p < K; ++p) {
        V b0, b1;
        std::memcpy(&b0, B + p * ldb + j, sizeof(V));
        std::memcpy(&b1, B + p * ldb + j + W, sizeof(V));
        for (int r = 0; r < kMR; ++r) {
          const T a = A[(i + r) * lda + p];
          acc[r][0] += a * b0;
          acc[r][1] += a * b1;
        }
      }
      for (int r = 0; r < kMR; ++r)
        for (int c = 0; c < 2; ++c)
          std::memcpy(C + (i + r) * ldc + j + c * W, &acc[r][c], sizeof(V));
    }
}

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// exp_vec(float) is in exp_vec.h; the double overload keeps libm's exp for the F64 references.
inline double exp_vec(double x) {
  return std::exp(x);
}

// Row reductions over a full kT-wide row, in fixed lanes (vectorisable, deterministic).
template <class T>
T row_max(const T* s) {
  constexpr int L = kNB<T>;
  T m[L];
  for (int l = 0; l < L; ++l) m[l] = s[l];
  for (int64_t c = L; c < kT; c += L)
    for (int l = 0; l < L; ++l) m[l] = s[c + l] > m[l] ? s[c + l] : m[l];
  T r = m[0];
  for (int l = 1; l < L; ++l) r = m[l] > r ? m[l] : r;
  return r;
}
template <class T>
T row_sum(const T* s) {
  constexpr int L = kNB<T>;
  T a[L] = {};
  for (int64_t c = 0; c < kT; c += L)
    for (int l = 0; l < L; ++l) a[l] += s[c + l];
  T r = 0;
  for (int l = 0; l < L; ++l) r += a[l];
  return r;
}

// dst[kT, dp] = sc · rows 0…n−1 of src (row stride `stride`, d used columns), zero elsewhere.
template <class T>
void load_rows(T* dst, const T* src, int64_t stride, int64_t n, int64_t d, int64_t dp, T sc) {
  for (int64_t r = 0; r < n; ++r) {
    T* out = dst + r * dp;
    const T* in = src + r * stride;
    for (int64_t e = 0; e < d; ++e) out[e] = in[e] * sc;
    for (int64_t e = d; e < dp; ++e) out[e] = T(0);
  }
  std::fill(dst + n * dp, dst + kT * dp, T(0));
}
// dst[dp, kT] = transpose of rows 0…n−1 of src, zero elsewhere.
template <class T>
void load_cols(T* dst, const T* src, int64_t stride, int64_t n, int64_t d, int64_t dp) {
  for (int64_t e = 0; e < dp; ++e)
    for (int64_t c = 0; c < kT; ++c)
      dst[e * kT + c] = (c < n && e < d) ? src[c * stride + e] : T(0);
}
// dst[kT, kT] = srcᵀ for the first m rows of src (the rest of dst is unused by the callers).
template <class T>
void transpose_tile(T* dst, const T* src, int64_t m) {
  for (int64_t c = 0; c < kT; ++c)
    for (int64_t r = 0; r < m; ++r) dst[c * kT + r] = src[r * kT + c];
}

struct Dims {
  int64_t B, T, Hq, Hk, d;
  int64_t G() const { return Hq / Hk; }
  int64_t tiles() const { return (T + kT - 1) / kT; }
  // Threads only pay off above ~1 ms of work (≈ 16K·d flops per tile pair); tiny calls stay on
  // the calling thread, which also avoids barrier stalls on an oversubscribed machine.
  bool parallel() const { return B * Hq * tiles() * (tiles() + 1) / 2 * d >= 1024; }
};

// Validates shapes and returns the dimensions.
Dims attention_dims(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
}

// Key/value tiles packed once per call, zero-padded, one contiguous block per tile:
// transposed → [B, Hk, nt, dp, kT] (GEMM right operand for S = Q·Kᵀ, dP = dO·Vᵀ), else
// [B, Hk, nt, kT, dp] (right operand for O = P·V, dQ = dS·K). O(T·d) memory; the inner loops then
// never transpose or copy a key tile.
template <class T>
std::vector<T> pack_kv(const T* x, const Dims& s, int64_t dp, bool transposed) {
  const int64_t nt = s.tiles(), tile = dp * kT;
  std::vector<T> out(size_t(s.B * s.Hk * nt * tile));
#pragma omp parallel for schedule(static) if (s.parallel())
  for (int64_t task = 0; task < s.B * s.Hk * nt; ++task) {  // task = (b·Hk + g)·nt + j
    const int64_t b = task / (s.Hk * nt), g = task / nt % s.Hk, j = task % nt;
    const int64_t nk = std::min(kT, s.T - j * kT);
    const T* src = x + ((b * s.T + j * kT) * s.Hk + g) * s.d;
    if (transposed) {
      load_cols(out.data() + task * tile, src, s.Hk * s.d, nk, s.d, dp);
    } else {
      load_rows(out.data() + task * tile, src, s.Hk * s.d, nk, s.d, dp, T(1));
    }
  }
  return out;
}

// The P/dS recomputation shared by both backward passes, for one (query tile, key tile) pair:
// S = Qs·Kt, dP = dOs·Vt, P = exp(S − lse) on τ ≤ t (else 0), dS = P ⊙ (dP − D). Rows ≥ nq of P
// and dS up to mq (the GEMM row count) are zero. S becomes P, dP becomes dS.
template <class T>
void probs_and_dscores(T* S, T* dP, const T* Qs, const T* dOs, const T* Kt, const T* Vt,
                       const T* lse, const T* D, int64_t nq, int64_t mq, int64_t nk, int64_t t0,
                       int64_t tau0, int64_t dp) {
  const int64_t nkp = round_up(nk, kNB<T>);
  gemm_nn(S, kT, Qs, dp, Kt, kT, mq, nkp, dp, false);
  gemm_nn(dP, kT, dOs, dp, Vt, kT, mq, nkp, dp, false);
  for (int64_t r = 0; r < mq; ++r) {
    T* sr = S + r * kT;
    T* ds = dP + r * kT;
    // keys c < cmax are visible to query t0 + r (causal: tau0 + c ≤ t0 + r)
    const int64_t cmax = r < nq ? std::min(nk, t0 + r - tau0 + 1) : 0;
    const T m = r < nq ? lse[r] : T(0), Dr = r < nq ? D[r] : T(0);
    for (int64_t c = 0; c < kT; ++c) {
      const T p = exp_vec(sr[c] - m);
      sr[c] = c < cmax ? p : T(0);
      ds[c] = c < cmax ? p * (ds[c] - Dr) : T(0);
    }
  }
}

// ------------------------------------------------------------------------------ forward
template <class T>
void forward_impl(T* o, T* lse, const T* q, const T* k, const T* v, const Dims& s) {
  const int64_t d = s.d, dp = round_up(d, kNB<T>), G = s.G(), nt = s.tiles(), tile = dp * kT;
  const T scale = T(1) / std::sqrt(T(d));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const std::vector<T> kt = pack_kv(k, s, dp, true), vs = pack_kv(v, s, dp, false);
  const int64_t tasks = s.B * s.Hq * nt;
#pragma omp parallel if (s.parallel())
  {
    // Qs[kT,dp] scaled queries, S[kT,kT] scores then probabilities, acc[kT,dp] unnormalised
    // output, m/l[kT] running max and sum.
    std::vector<T> Qs(kT * dp), S(kT * kT), acc(kT * dp), m(kT), l(kT);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / nt, i = nt - 1 - task % nt;  // longest rows first
      const int64_t b = bh / s.Hq, h = bh % s.Hq, g = h / G;
      const int64_t t0 = i * kT, nq = std::min(kT, s.T - t0), mq = round_up(nq, kMR);
      load_rows(Qs.data(), q + ((b * s.T + t0) * s.Hq + h) * d, s.Hq * d, nq, d, dp, scale);
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(m.begin(), m.end(), neg_inf);
      std::fill(l.begin(), l.end(), T(0));
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t tau0 = j * kT, nk = std::min(kT, s.T - tau0);
        const int64_t kv = ((b * s.Hk + g) * nt + j) * tile;
        gemm_nn(S.data(), kT, Qs.data(), dp, kt.data() + kv, kT, mq, round_up(nk, kNB<T>), dp,
                false);
        for (int64_t r = 0; r < mq; ++r) {
          T* sr = S.data() + r * kT;
          if (r >= nq) {  // padding row: contributes nothing
            std::fill(sr, sr + kT, T(0));
            continue;
          }
          const int64_t cmax = std::min(nk, t0 + r - tau0 + 1);
          for (int64_t c = cmax; c < kT; ++c) sr[c] = neg_inf;
          const T m_new = std::max(m[r], row_max(sr));
          const T alpha = std::exp(m[r] - m_new);  // 0 on the first tile (m = −inf)
          for (int64_t c = 0; c < kT; ++c) sr[c] = exp_vec(sr[c] - m_new);
          l[r] = l[r] * alpha + row_sum(sr);
          m[r] = m_new;
          if (alpha != T(1))
            for (int64_t e = 0; e < dp; ++e) acc[r * dp + e] *= alpha;
        }
        gemm_nn(acc.data(), dp, S.data(), kT, vs.data() + kv, dp, mq, dp, nk, true);
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
template <class T>
void backward_impl(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                   const T* o, const T* lse, const Dims& s) {
  const int64_t d = s.d, dp = round_up(d, kNB<T>), G = s.G(), nt = s.tiles(), tile = dp * kT;
  const T scale = T(1) / std::sqrt(T(d));
  const std::vector<T> kt = pack_kv(k, s, dp, true), ks = pack_kv(k, s, dp, false),
                       vt = pack_kv(v, s, dp, true);

  // Di[B,Hq,T] = ⟨dO_t[h], O_t[h]⟩ = Σ_τ P ⊙ dP, the softmax-backward row term.
  std::vector<T> Di(s.B * s.Hq * s.T);
#pragma omp parallel for schedule(static) if (s.parallel())
  for (int64_t bt = 0; bt < s.B * s.T; ++bt)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const T* a = dout + (bt * s.Hq + h) * d;
      const T* b = o + (bt * s.Hq + h) * d;
      T acc = 0;
      for (int64_t e = 0; e < d; ++e) acc += a[e] * b[e];
      Di[((bt / s.T) * s.Hq + h) * s.T + bt % s.T] = acc;
    }

#pragma omp parallel if (s.parallel())
  {
    // Qs/dOs[kT,dp] query tile (scaled) and its output gradient, S/dP[kT,kT] scores → P and
    // dP → dS, Pt/dSt[kT,kT] their transposes, acc1/acc2[kT,dp] gradient accumulators.
    std::vector<T> Qs(kT * dp), dOs(kT * dp), S(kT * kT), dP(kT * kT), Pt(kT * kT), dSt(kT * kT);
    std::vector<T> acc1(kT * dp), acc2(kT * dp);

    auto load_query_tile = [&](int64_t b, int64_t h, int64_t t0, int64_t nq) {
      const int64_t off = ((b * s.T + t0) * s.Hq + h) * d;
      load_rows(Qs.data(), q + off, s.Hq * d, nq, d, dp, scale);
      load_rows(dOs.data(), dout + off, s.Hq * d, nq, d, dp, T(1));
    };

    // dk, dv: one task per (b, kv head g, key tile j); sums over the group's heads and i ≥ j.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < s.B * s.Hk * nt; ++task) {  // task = (b·Hk + g)·nt + j
      const int64_t b = task / (s.Hk * nt), g = task / nt % s.Hk, j = task % nt;
      const int64_t tau0 = j * kT, nk = std::min(kT, s.T - tau0), nkp = round_up(nk, kNB<T>);
      std::fill(acc1.begin(), acc1.end(), T(0));  // dK
      std::fill(acc2.begin(), acc2.end(), T(0));  // dV
      for (int64_t h = g * G; h < (g + 1) * G; ++h)
        for (int64_t i = j; i < nt; ++i) {
          const int64_t t0 = i * kT, nq = std::min(kT, s.T - t0), mq = round_up(nq, kMR);
          load_query_tile(b, h, t0, nq);
          const int64_t row0 = (b * s.Hq + h) * s.T + t0;
          probs_and_dscores(S.data(), dP.data(), Qs.data(), dOs.data(), kt.data() + task * tile,
                            vt.data() + task * tile, lse + row0, Di.data() + row0, nq, mq, nk, t0,
                            tau0, dp);
          transpose_tile(Pt.data(), S.data(), mq);
          transpose_tile(dSt.data(), dP.data(), mq);
          gemm_nn(acc1.data(), dp, dSt.data(), kT, Qs.data(), dp, nkp, dp, mq, true);
          gemm_nn(acc2.data(), dp, Pt.data(), kT, dOs.data(), dp, nkp, dp, mq, true);
        }
      for (int64_t c = 0; c < nk; ++c) {
        const int64_t off = ((b * s.T + tau0 + c) * s.Hk + g) * d;
        for (int64_t e = 0; e < d; ++e) {
          dk[off + e] = acc1[c * dp + e];
          dv[off + e] = acc2[c * dp + e];
        }
      }
    }

    // dq: one task per (b, query head h, query tile i), over key tiles j ≤ i.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < s.B * s.Hq * nt; ++task) {
      const int64_t bh = task / nt, i = nt - 1 - task % nt;
      const int64_t b = bh / s.Hq, h = bh % s.Hq, g = h / G;
      const int64_t t0 = i * kT, nq = std::min(kT, s.T - t0), mq = round_up(nq, kMR);
      load_query_tile(b, h, t0, nq);
      const int64_t row0 = (b * s.Hq + h) * s.T + t0;
      std::fill(acc1.begin(), acc1.end(), T(0));  // dQ / scale
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t tau0 = j * kT, nk = std::min(kT, s.T - tau0);
        const int64_t kv = ((b * s.Hk + g) * nt + j) * tile;
        probs_and_dscores(S.data(), dP.data(), Qs.data(), dOs.data(), kt.data() + kv,
                          vt.data() + kv, lse + row0, Di.data() + row0, nq, mq, nk, t0, tau0, dp);
        gemm_nn(acc1.data(), dp, dP.data(), kT, ks.data() + kv, dp, mq, dp, nk, true);
      }
      for (int64_t r = 0; r < nq; ++r) {
        T* row = dq + ((b * s.T + t0 + r) * s.Hq + h) * d;
        for (int64_t e = 0; e < d; ++e) row[e] = acc1[r * dp + e] * scale;
      }
    }
  }
}

}  // namespace

void attention_forward(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v) {
  const Dims s = attention_dims(q, k);
  ZAYA_DISPATCH_FLOAT(q.dtype,
                      forward_impl(o.ptr<scalar_t>(), lse.ptr<scalar_t>(), q.ptr<scalar_t>(),
                                   k.ptr<scalar_t>(), v.ptr<scalar_t>(), s));
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& do_,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse) {
  const Dims s = attention_dims(q, k);
  ZAYA_DISPATCH_FLOAT(q.dtype,
                      backward_impl(dq.ptr<scalar_t>(), dk.ptr<scalar_t>(), dv.ptr<scalar_t>(),
                                    do_.ptr<scalar_t>(), q.ptr<scalar_t>(), k.ptr<scalar_t>(),
                                    v.ptr<scalar_t>(), o.ptr<scalar_t>(), lse.ptr<scalar_t>(), s));
}

}  // namespace zaya::ops::cpu
