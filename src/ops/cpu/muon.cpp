// newton_schulz on the CPU: Muon's quintic Newton–Schulz orthogonalisation (docs/training.md).
//
// On the short side first: for G [rows,cols] with rows ≤ cols, X [m,n] = G/(‖G‖_F + 1e-7)
// (m = rows) and each step is
//   A = X·Xᵀ                  [m,m]   symmetric
//   B = a·I + b·A + c·A·A     [m,m]   symmetric (A·A = A·Aᵀ because A is)
//   X ← B·X                   [m,n]   (= a·X + (b·A + c·A·A)·X, one product)
// with (a,b,c) = (3.4445, −4.7750, 2.0315). For rows > cols the same iteration runs on Xᵀ without
// transposing anything: W [rows,cols] = G/(‖G‖_F + 1e-7) stands for Xᵀ, A = Wᵀ·W and W ← W·B
// (B is symmetric), so G's own layout is kept throughout (a strided transpose of a tall matrix
// cost as much as a Newton–Schulz step here).
//
// The symmetric path computes both Gram products with sym_product (syrk.h: the upper triangle's
// tiles, mirrored); the plain path uses a GEMM for all three products. Both give the same result
// up to rounding. Per step the symmetric path does m²n/2 + m³/2 + m²n multiply-adds (plus
// ?syrk's own share of its diagonal blocks) against 2m²n + m³ for the plain one: 1.5x fewer on a
// square matrix, ~1.385x at 4:1.
//
// Gram space (symmetric path, n ≥ 1.5·m): every iterate is X_k = Q_k·X₀ with Q_k a polynomial in
// A₀ = X₀·X₀ᵀ, so all the m×m matrices are symmetric and commute. Per step
//   B_k = a·I + b·A_k + c·A_k²,   Q_{k+1} = B_k·Q_k  (Q₁ = B₀),   A_{k+1} = B_k·A_k·B_k
// (A_{k+1} skipped on the last step), every product of commuting symmetric matrices computed on
// the upper triangle's tiles only (sym_multiply), and at the end X = Q·X₀ (W·Q when tall), one
// m²n GEMM. The iteration restarts from X every kGramStageSteps steps (numerics, below): for 5
// steps, stages of 3 and 2 cost 2·(m²n/2 + m²n) + ~7m³ multiply-adds against 5·(m²n/2 + m³/2 +
// m²n) for the tiled path: ~1.7x fewer at 4:1.
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/syrk.h"

namespace zaya::ops::cpu {

namespace {

constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

// The iterate, its successor and the two Gram matrices; kept per thread and grown on demand, so
// Muon's calls (one per matrix per optimizer step) do not allocate or fault in fresh pages.
template <class T>
struct Workspace {
  std::vector<T> x, y, a, b, q, t;
  void reserve(int64_t mn, int64_t mm) {
    for (std::vector<T>* v : {&x, &y}) v->resize(std::max(v->size(), size_t(mn)));
    for (std::vector<T>* v : {&a, &b, &q, &t}) v->resize(std::max(v->size(), size_t(mm)));
  }
};

// The Gram-space path runs when n ≥ 1.5·m, where it beats the tiled symmetric path (they tie near
// 1024x1280 and it loses on square matrices); the choice depends on the shape only.
bool gram_space(int64_t m, int64_t n) {
  return 2 * n >= 3 * m;
}
// Steps per Gram-space stage: Q's norm grows up to a^steps on tiny singular values and its
// rounding leaks into the large ones (5 steps: 25x the plain path's error on ill-conditioned
// inputs, tests/ops/cpu/test_muon.cpp); restarting from X after 3 keeps the error at the
// plain path's for one more A = X·Xᵀ and one more m²n product.
constexpr int kGramStageSteps = 3;

// B = kB·A + kA·I for A [m,m]: the whole matrix, or (upper) its upper triangle only, all that
// sym_product reads of the C it adds to.
template <class T>
void affine_of_gram(T* b, const T* a, int64_t m, bool upper) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = upper ? i : 0; j < m; ++j)
      b[i * m + j] = T(kB) * a[i * m + j] + (i == j ? T(kA) : T(0));
}

// `steps` steps from w to next (both [rows,cols]) in the Gram space of w.
template <class T>
void gram_stage(Workspace<T>& ws, const T* w, T* next, bool tall, int64_t m, int64_t n, int steps) {
  const int64_t cols = tall ? m : n;
  T* a = ws.a.data();
  T* b = ws.b.data();
  T* q = ws.q.data();
  T* t = ws.t.data();
  sym_product<T>(tall, m, n, T(1), w, cols, T(0), a, m);  // A₀ = X₀·X₀ᵀ
  for (int s = 0; s < steps; ++s) {
    // B = a·I + b·A + c·A·A
    affine_of_gram(b, a, m, true);
    sym_product<T>(false, m, m, T(kC), a, m, T(1), b, m);
    // Q ← B·Q (Q₁ = B₀)
    if (s == 0) {
      std::swap(q, b);
    } else {
      sym_multiply<T>(m, b, m, q, m, t, m);
      std::swap(q, t);
    }
    if (s + 1 == steps) break;
    // A ← B·A·B
    const T* bk = s == 0 ? q : b;
    sym_multiply<T>(m, bk, m, a, m, t, m);
    sym_multiply<T>(m, t, m, bk, m, a, m);
  }
  if (tall) {
    gemm<T>(false, false, n, m, m, T(1), w, m, q, m, T(0), next, m);
  } else {
    gemm<T>(false, false, m, n, m, T(1), q, m, w, n, T(0), next, n);
  }
}

template <class T>
void newton_schulz_impl(T* out, const T* g, int64_t rows, int64_t cols, int steps, bool symmetric) {
  // wide: X = W [m,n]; tall: W = Xᵀ [n,m]. Either way W is [rows,cols].
  const bool tall = rows > cols;
  const int64_t m = tall ? cols : rows, n = tall ? rows : cols;
  // ‖G‖² in double over 8 interleaved partial sums (vectorisable, fixed order: deterministic)
  double part[8] = {};
  const int64_t count = rows * cols, whole = count / 8 * 8;
  for (int64_t i = 0; i < whole; i += 8)
    for (int l = 0; l < 8; ++l) part[l] += double(g[i + l]) * double(g[i + l]);
  double sumsq = 0;
  for (double v : part) sumsq += v;
  for (int64_t i = whole; i < count; ++i) sumsq += double(g[i]) * double(g[i]);
  const T scale = T(1.0 / (std::sqrt(sumsq) + 1e-7));

  thread_local Workspace<T> ws;
  ws.reserve(m * n, m * m);
  T* w = ws.x.data();
  T* y = ws.y.data();
  T* a = ws.a.data();
  T* b = ws.b.data();
  for (int64_t i = 0; i < m * n; ++i) w[i] = g[i] * scale;

  if (symmetric && steps > 0 && gram_space(m, n)) {
    for (int done = 0; done < steps;) {  // stages of kGramStageSteps, the last one shorter
      const int len = std::min(kGramStageSteps, steps - done);
      done += len;
      T* next = done == steps ? out : y;
      gram_stage(ws, w, next, tall, m, n, len);
      std::swap(w, y);
    }
    return;
  }

  for (int s = 0; s < steps; ++s) {
    // A = X·Xᵀ (= Wᵀ·W when tall)
    if (symmetric) {
      sym_product<T>(tall, m, n, T(1), w, cols, T(0), a, m);
    } else {
      gemm<T>(tall, !tall, m, m, n, T(1), w, cols, w, cols, T(0), a, m);
    }
    // B = a·I + b·A + c·A·A, so that a·X + (b·A + c·A·A)·X is one product
    affine_of_gram(b, a, m, symmetric);
    if (symmetric) {
      sym_product<T>(false, m, m, T(kC), a, m, T(1), b, m);
    } else {
      gemm<T>(false, false, m, m, m, T(kC), a, m, a, m, T(1), b, m);
    }
    // X ← B·X (W ← W·B when tall); the last step writes out (g, which out may alias, is no longer
    // read)
    T* next = s + 1 == steps ? out : y;
    if (tall) {
      gemm<T>(false, false, n, m, m, T(1), w, m, b, m, T(0), next, m);
    } else {
      gemm<T>(false, false, m, n, m, T(1), b, m, w, n, T(0), next, n);
    }
    std::swap(w, y);
  }
  if (steps == 0) std::memcpy(out, w, size_t(m * n) * sizeof(T));
}

}  // namespace

// g [rows,cols] or [E,rows,cols]: the E matrices one after another (the same calls as E ops on the
// slices, so the same bits). bf16 is the GPU's: the CPU computes in g's dtype.
void newton_schulz(const Tensor& out, const Tensor& g, int steps, bool symmetric, bool /*bf16*/) {
  const bool batched = g.ndim == 3;
  const int64_t count = batched ? g.shape[0] : 1;
  const int64_t rows = g.shape[batched ? 1 : 0], cols = g.shape[batched ? 2 : 1];
  ZAYA_DISPATCH_FLOAT(g.dtype, {
    for (int64_t e = 0; e < count; ++e)
      newton_schulz_impl(out.ptr<scalar_t>() + e * rows * cols, g.ptr<scalar_t>() + e * rows * cols,
                         rows, cols, steps, symmetric);
  });
}

}  // namespace zaya::ops::cpu
