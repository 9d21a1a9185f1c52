// router_select_forward / router_select_backward on the CPU (docs/model.md §5.3–5.5, §8.7).
//
// Forward, per row n of logits[N,K]: p = softmax(ℓ) over all K classes (exps and the sum in double
// for both dtypes, fp32 softmax, docs/model.md §0.2.2), then choice = argmax_e p[e] + b[e] with the sum formed in the tensor dtype
// (for F32 that is fp32(p_e) + b_e in float arithmetic, fp32(p) + b, docs/model.md §0.2.8) and ties going to the lowest index;
// weight = p[choice], the stored probability, not renormalised. Backward: the softmax Jacobian
// applied to the one-hot gradient of p[e*]; the argmax and the biases get no gradient.
#include <algorithm>
#include <cmath>

#include "ops/backend.h"
#include "ops/check.h"

namespace zaya::ops::cpu {

namespace {

// Rows are short (K ≈ 17): below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

template <class T>
void select_rows(T* probs_NK, int32_t* choice_N, T* weight_N, const T* logits_NK, const T* bias_K,
                 int64_t N, int64_t K) {
#pragma omp parallel for schedule(static) if (N * K >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* l = logits_NK + n * K;
    T* p = probs_NK + n * K;
    double max = l[0];
    for (int64_t e = 1; e < K; ++e) max = std::max(max, double(l[e]));
    double sum = 0;
    for (int64_t e = 0; e < K; ++e) sum += std::exp(double(l[e]) - max);
    for (int64_t e = 0; e < K; ++e) p[e] = T(std::exp(double(l[e]) - max) / sum);
    // fp32(p) + b, docs/model.md §0.2.8: the score is the stored (rounded) probability plus the bias, in T arithmetic.
    int32_t best = 0;
    T best_score = p[0] + bias_K[0];
    for (int64_t e = 1; e < K; ++e) {
      const T score = p[e] + bias_K[e];
      if (score > best_score) best = int32_t(e), best_score = score;  // strict: ties → lowest
    }
    choice_N[n] = best;
    weight_N[n] = p[best];
  }
}

template <class T>
void select_rows_backward(T* dlogits_NK, const T* dweight_N, const T* probs_NK,
                          const int32_t* choice_N, int64_t N, int64_t K) {
#pragma omp parallel for schedule(static) if (N * K >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t c = choice_N[n];
    ZAYA_ASSERT(0 <= c && c < K, "router_select_backward: choice[{}] = {} outside [0, {})", n, c,
                K);
    const T* p = probs_NK + n * K;
    T* dl = dlogits_NK + n * K;
    const T scale = dweight_N[n] * p[c];
    for (int64_t j = 0; j < K; ++j) dl[j] = scale * ((j == c ? T(1) : T(0)) - p[j]);
  }
}

}  // namespace

void router_select_forward(const Tensor& probs, const Tensor& choice, const Tensor& weight,
                           const Tensor& logits, const Tensor& biases) {
  const int64_t K = logits.size(-1), N = K ? logits.numel() / K : 0;
  ZAYA_DISPATCH_FLOAT(logits.dtype, {
    select_rows(probs.ptr<scalar_t>(), choice.ptr<int32_t>(), weight.ptr<scalar_t>(),
                logits.ptr<scalar_t>(), biases.ptr<scalar_t>(), N, K);
  });
}

void router_select_backward(const Tensor& dlogits, const Tensor& dweight, const Tensor& probs,
                            const Tensor& choice) {
  const int64_t K = probs.size(-1), N = K ? probs.numel() / K : 0;
  ZAYA_DISPATCH_FLOAT(probs.dtype, {
    select_rows_backward(dlogits.ptr<scalar_t>(), dweight.ptr<scalar_t>(), probs.ptr<scalar_t>(),
                         choice.ptr<int32_t>(), N, K);
  });
}

}  // namespace zaya::ops::cpu
