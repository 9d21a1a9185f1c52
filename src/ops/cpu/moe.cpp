// moe_forward / moe_backward on the CPU: dropless top-1 dispatch (docs/model.md §5.5–5.6, §8.6).
//
// Tokens are grouped by class with a stable counting sort (deterministic, independent of the
// thread count). Each real expert gathers its tokens' rows into contiguous scratch, runs one BLAS
// GEMM (blas.h) per projection, and scatters the results back to token order. Skip tokens (class E)
// pass x through: f = x, out = weight·x (the skip class passes p·x, docs/model.md §0.2.5). Experts without tokens run nothing, so their
// gradients are left untouched.
//
// Shape-suffix legend:
//   N tokens, D model width, E real experts (class E = skip), F = gate ‖ up width, H = F/2 expert
//   hidden, M tokens of the expert being processed (rows of its gathered scratch).
//   x_ND, f_ND, out_ND, dout_ND, dx_ND   token-order activations and gradients
//   gu_NF, act_NH                        saved [g;u] = W1 x and η = SiLU(g) ⊙ u
//   w1_EFD, w2_EDH, dw1_EFD, dw2_EDH     expert weights and their gradients
//   choice_N, weight_N, dweight_N        routing: class in [0, E], its probability, its gradient
//   tok_M, x_MD, gu_MF, act_MH, …        one expert's token indices and gathered rows
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/swiglu.h"

namespace zaya::ops::cpu {

namespace {

// Token indices grouped by class: class e owns order[offset[e] .. offset[e+1]), ascending.
struct Dispatch {
  std::vector<int64_t> offset;  // [E+2]
  std::vector<int64_t> order;   // [N]
  std::vector<int64_t> next;    // [E+1] fill positions while grouping
  int64_t max_rows = 0;         // most tokens routed to one real expert (scratch height)

  int64_t rows(int64_t e) const { return offset[e + 1] - offset[e]; }
  const int64_t* tokens(int64_t e) const { return order.data() + offset[e]; }
};

// Fills g (its vectors keep their capacity from call to call: no allocation once warm).
void group_by_class(Dispatch& g, const int32_t* choice_N, int64_t N, int64_t E) {
  g.offset.assign(E + 2, 0);
  g.order.resize(N);
  g.max_rows = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int32_t c = choice_N[n];
    ZAYA_ASSERT(0 <= c && c <= E, "moe: choice[{}] = {} outside [0, {}] (E = skip)", n, c, E);
    ++g.offset[c + 1];
  }
  for (int64_t e = 0; e <= E; ++e) g.offset[e + 1] += g.offset[e];
  g.next.assign(g.offset.begin(), g.offset.end() - 1);
  for (int64_t n = 0; n < N; ++n) g.order[g.next[choice_N[n]]++] = n;
  for (int64_t e = 0; e < E; ++e) g.max_rows = std::max(g.max_rows, g.rows(e));
}

// Per-thread scratch of at least n elements, kept for the next call (contents undefined).
template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v.data();
}

// dst_MW[m] = src_NW[tok_M[m]], rows of width W.
template <class T>
void gather_rows(T* dst_MW, const T* src_NW, const int64_t* tok_M, int64_t M, int64_t W) {
#pragma omp parallel for schedule(static) if (M * W > kParallelMin)
  for (int64_t m = 0; m < M; ++m)
    std::memcpy(dst_MW + m * W, src_NW + tok_M[m] * W, size_t(W) * sizeof(T));
}

template <class T>
void forward(T* out_ND, T* f_ND, T* gu_NF, T* act_NH, const T* x_ND, const int32_t* choice_N,
             const T* weight_N, const T* w1_EFD, const T* w2_EDH, int64_t N, int64_t D, int64_t E,
             int64_t F, int32_t* order_N, int32_t* offsets) {
  const int64_t H = F / 2;
  thread_local Dispatch g;
  group_by_class(g, choice_N, N, E);
  for (int64_t n = 0; n < N; ++n) order_N[n] = int32_t(g.order[size_t(n)]);
  for (int64_t c = 0; c < E + 2; ++c) offsets[c] = int32_t(g.offset[size_t(c)]);
  thread_local std::vector<T> x_buf, gu_buf, act_buf, f_buf;
  T* x_MD = grow(x_buf, g.max_rows * D);
  T* gu_MF = grow(gu_buf, g.max_rows * F);
  T* act_MH = grow(act_buf, g.max_rows * H);
  T* f_MD = grow(f_buf, g.max_rows * D);

  for (int64_t e = 0; e < E; ++e) {
    const int64_t M = g.rows(e);
    const int64_t* tok_M = g.tokens(e);
    if (M == 0) continue;
    gather_rows(x_MD, x_ND, tok_M, M, D);
    gemm(false, true, M, F, D, T(1), x_MD, D, w1_EFD + e * F * D, D, T(0), gu_MF, F);
#pragma omp parallel for schedule(static) if (M * F > kParallelMin)
    for (int64_t m = 0; m < M; ++m) swiglu_row(act_MH + m * H, gu_MF + m * F, gu_MF + m * F + H, H);
    gemm(false, true, M, D, H, T(1), act_MH, H, w2_EDH + e * D * H, H, T(0), f_MD, D);
#pragma omp parallel for schedule(static) if (M * F > kParallelMin)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t n = tok_M[m];
      std::memcpy(gu_NF + n * F, gu_MF + m * F, size_t(F) * sizeof(T));
      std::memcpy(act_NH + n * H, act_MH + m * H, size_t(H) * sizeof(T));
      const T* f = f_MD + m * D;
      for (int64_t d = 0; d < D; ++d)
        f_ND[n * D + d] = f[d], out_ND[n * D + d] = weight_N[n] * f[d];
    }
  }

  // Skip class: identity times probability; its gu/act rows are zeroed (unused by backward).
  const int64_t S = g.rows(E);
  const int64_t* tok_S = g.tokens(E);
#pragma omp parallel for schedule(static) if (S * D > kParallelMin)
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = tok_S[s];
    for (int64_t d = 0; d < D; ++d) {
      f_ND[n * D + d] = x_ND[n * D + d];
      out_ND[n * D + d] = weight_N[n] * x_ND[n * D + d];
    }
    std::fill_n(gu_NF + n * F, F, T(0));
    std::fill_n(act_NH + n * H, H, T(0));
  }
}

template <class T>
void backward(T* dx_ND, T* dw1_EFD, T* dw2_EDH, T* dweight_N, const T* dout_ND, const T* x_ND,
              const int32_t* choice_N, const T* weight_N, const T* w1_EFD, const T* w2_EDH,
              const T* f_ND, const T* gu_NF, const T* act_NH, int64_t N, int64_t D, int64_t E,
              int64_t F, const int32_t* offsets) {
  const int64_t H = F / 2;

  // ḡw = ⟨ḡo, f⟩ for every token (f = x for skip tokens), summed in double.
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += double(dout_ND[n * D + d]) * double(f_ND[n * D + d]);
    dweight_N[n] = T(s);
  }

  thread_local Dispatch g;
  group_by_class(g, choice_N, N, E);
  for (int64_t c = 0; c < E + 2; ++c)
    ZAYA_ASSERT(offsets[c] == g.offset[size_t(c)],
                "moe_backward: offsets[{}] = {} but the choices group {} there: not the forward's "
                "grouping of these choices",
                c, offsets[c], g.offset[size_t(c)]);
  thread_local std::vector<T> x_buf, df_buf, act_buf, dact_buf, dgu_buf, dx_buf;
  T* x_MD = grow(x_buf, g.max_rows * D);
  T* df_MD = grow(df_buf, g.max_rows * D);
  T* act_MH = grow(act_buf, g.max_rows * H);
  T* dact_MH = grow(dact_buf, g.max_rows * H);
  T* dgu_MF = grow(dgu_buf, g.max_rows * F);
  T* dx_MD = grow(dx_buf, g.max_rows * D);

  for (int64_t e = 0; e < E; ++e) {
    const int64_t M = g.rows(e);
    const int64_t* tok_M = g.tokens(e);
    if (M == 0) continue;
    const T* w1_FD = w1_EFD + e * F * D;
    const T* w2_DH = w2_EDH + e * D * H;
    gather_rows(x_MD, x_ND, tok_M, M, D);
    gather_rows(act_MH, act_NH, tok_M, M, H);
#pragma omp parallel for schedule(static) if (M * D > kParallelMin)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t n = tok_M[m];
      for (int64_t d = 0; d < D; ++d) df_MD[m * D + d] = weight_N[n] * dout_ND[n * D + d];
    }
    gemm(true, false, D, H, M, T(1), df_MD, D, act_MH, H, T(1), dw2_EDH + e * D * H, H);
    gemm(false, false, M, H, D, T(1), df_MD, D, w2_DH, H, T(0), dact_MH, H);
#pragma omp parallel for schedule(static) if (M * F > kParallelMin)
    for (int64_t m = 0; m < M; ++m) {
      const T* gu = gu_NF + tok_M[m] * F;
      swiglu_backward_row(dgu_MF + m * F, dgu_MF + m * F + H, dact_MH + m * H, gu, gu + H, H);
    }
    gemm(true, false, F, D, M, T(1), dgu_MF, F, x_MD, D, T(1), dw1_EFD + e * F * D, D);
    gemm(false, false, M, D, F, T(1), dgu_MF, F, w1_FD, D, T(0), dx_MD, D);
#pragma omp parallel for schedule(static) if (M * D > kParallelMin)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t n = tok_M[m];
      for (int64_t d = 0; d < D; ++d) dx_ND[n * D + d] += dx_MD[m * D + d];
    }
  }

  const int64_t S = g.rows(E);
  const int64_t* tok_S = g.tokens(E);
#pragma omp parallel for schedule(static) if (S * D > kParallelMin)
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = tok_S[s];
    for (int64_t d = 0; d < D; ++d) dx_ND[n * D + d] += weight_N[n] * dout_ND[n * D + d];
  }
}

// {N, D, E, F} of a call (ops/ops.cpp checked them).
std::array<int64_t, 4> moe_shapes(const Tensor& choice, const Tensor& w1) {
  return {choice.numel(), w1.size(2), w1.size(0), w1.size(1)};
}

}  // namespace

void moe_forward(const Tensor& out, const Tensor& f, const Tensor& gu, const Tensor& act,
                 const Tensor& x, const Tensor& choice, const Tensor& weight, const Tensor& w1,
                 const Tensor& w2, const Tensor& order, const Tensor& offsets) {
  const auto [N, D, E, F] = moe_shapes(choice, w1);
  ZAYA_DISPATCH_FLOAT(x.dtype, {
    forward(out.ptr<scalar_t>(), f.ptr<scalar_t>(), gu.ptr<scalar_t>(), act.ptr<scalar_t>(),
            x.ptr<scalar_t>(), choice.ptr<int32_t>(), weight.ptr<scalar_t>(), w1.ptr<scalar_t>(),
            w2.ptr<scalar_t>(), N, D, E, F, order.ptr<int32_t>(), offsets.ptr<int32_t>());
  });
}

void moe_backward(const Tensor& dx, const Tensor& dw1, const Tensor& dw2, const Tensor& dweight,
                  const Tensor& dout, const Tensor& x, const Tensor& choice, const Tensor& weight,
                  const Tensor& w1, const Tensor& w2, const Tensor& f, const Tensor& gu,
                  const Tensor& act, const Tensor& order, const Tensor& offsets) {
  const auto [N, D, E, F] = moe_shapes(choice, w1);
  // (order is the forward's; the CPU regroups from the choices, the same order, and checks the
  // offsets against it.)
  ZAYA_DISPATCH_FLOAT(x.dtype, {
    backward(dx.ptr<scalar_t>(), dw1.ptr<scalar_t>(), dw2.ptr<scalar_t>(), dweight.ptr<scalar_t>(),
             dout.ptr<scalar_t>(), x.ptr<scalar_t>(), choice.ptr<int32_t>(), weight.ptr<scalar_t>(),
             w1.ptr<scalar_t>(), w2.ptr<scalar_t>(), f.ptr<scalar_t>(), gu.ptr<scalar_t>(),
             act.ptr<scalar_t>(), N, D, E, F, offsets.ptr<int32_t>());
  });
}

}  // namespace zaya::ops::cpu
