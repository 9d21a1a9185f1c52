// Cross-entropy on the CPU (docs/model.md §6, §8.1), one row of logits[N,V] per token, rows in parallel.
// Forward: lse = max + log Σ exp(ℓ − max) in double; loss = lse − ℓ[target]; target −1 → loss 0.
// Backward: dlogits = scale·(exp(ℓ − lse) − onehot), elementwise in double, so dlogits may alias
// logits.
#include <algorithm>
#include <cmath>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

void check_targets(const char* op, const int32_t* target, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    ZAYA_ASSERT(target[n] >= -1 && target[n] < V, "{}: target[{}] = {} not in [-1, {})", op, n,
                target[n], V);
}

template <class T>
void forward_rows(T* loss_N, T* lse_N, const T* logits_NV, const int32_t* target_N, int64_t N,
                  int64_t V) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* l = logits_NV + n * V;
    double max = l[0];
    for (int64_t j = 1; j < V; ++j) max = std::max(max, double(l[j]));
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(double(l[j]) - max);
    const double lse = max + std::log(sum);
    lse_N[n] = T(lse);
    loss_N[n] = target_N[n] < 0 ? T(0) : T(lse - double(l[target_N[n]]));
  }
}

template <class T>
void backward_rows(T* dlogits_NV, const T* logits_NV, const T* lse_N, const int32_t* target_N,
                   double scale, int64_t N, int64_t V) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* l = logits_NV + n * V;
    T* d = dlogits_NV + n * V;  // may be the same memory as l: each element is read, then written
    const int64_t t = target_N[n];
    if (t < 0) {
      std::fill_n(d, V, T(0));
      continue;
    }
    const double lse = double(lse_N[n]);
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(double(l[j]) - lse);
      d[j] = T(scale * (j == t ? p - 1.0 : p));
    }
  }
}

}  // namespace

void xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                  const Tensor& target) {
  const int64_t V = logits.size(-1), N = logits.numel() / V;
  const int32_t* target_N = target.ptr<int32_t>();
  check_targets("xent_forward", target_N, N, V);
  ZAYA_DISPATCH_FLOAT(logits.dtype, forward_rows(loss.ptr<scalar_t>(), lse.ptr<scalar_t>(),
                                                 logits.ptr<scalar_t>(), target_N, N, V));
}

void xent_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                   const Tensor& target, double scale) {
  const int64_t V = logits.size(-1), N = V ? logits.numel() / V : 0;
  const int32_t* target_N = target.ptr<int32_t>();
  check_targets("xent_backward", target_N, N, V);
  ZAYA_DISPATCH_FLOAT(logits.dtype, backward_rows(dlogits.ptr<scalar_t>(), logits.ptr<scalar_t>(),
                                                  lse.ptr<scalar_t>(), target_N, scale, N, V));
}

}  // namespace zaya::ops::cpu
