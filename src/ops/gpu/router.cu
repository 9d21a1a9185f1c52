// router_select_forward / router_select_backward on the GPU (docs/model.md §5.3–5.5, §8.7), the CPU's
// formulas exactly (ops/cpu/router.cpp): per row, the softmax over the K classes with the max, the
// exps and their sum in double (fp32 softmax, docs/model.md §0.2.2; sequentially, as the CPU, so the stored probabilities are the
// CPU's up to the last bit of the device's double exp), the biased score p[e] + b[e] in f32 (fp32(p) + b, docs/model.md §0.2.8)
// with ties to the lowest index, weight = the stored p[choice]. Rows are short (K ≈ 17), so one
// thread owns a row; the backward is elementwise over N·K.
#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

__global__ void select_kernel(float* probs_NK, int32_t* choice_N, float* weight_N,
                              const float* logits_NK, const float* bias_K, int64_t N, int64_t K) {
  ZAYA_GPU_FOR(n, N) {
    const float* l = logits_NK + n * K;
    float* p = probs_NK + n * K;
    double max = l[0];
    for (int64_t e = 1; e < K; ++e) max = fmax(max, double(l[e]));
    double sum = 0;
    for (int64_t e = 0; e < K; ++e) sum += exp(double(l[e]) - max);
    for (int64_t e = 0; e < K; ++e) p[e] = float(exp(double(l[e]) - max) / sum);
    // fp32(p) + b, docs/model.md §0.2.8: the stored (rounded) probability plus the bias, in f32; strict > so ties → lowest.
    int32_t best = 0;
    float best_score = p[0] + bias_K[0];
    for (int64_t e = 1; e < K; ++e) {
      const float score = p[e] + bias_K[e];
      if (score > best_score) best = int32_t(e), best_score = score;
    }
    choice_N[n] = best;
    weight_N[n] = p[best];
  }
}

__global__ void select_backward_kernel(float* dlogits_NK, const float* dweight_N,
                                       const float* probs_NK, const int32_t* choice_N, int64_t N,
                                       int64_t K) {
  ZAYA_GPU_FOR(i, N * K) {
    const int64_t n = i / K, j = i - n * K;
    const int64_t c = choice_N[n];
    // A choice outside [0, K) is the caller's bug (the CPU asserts); here it only must not read
    // outside the row.
    const float pc = (0 <= c && c < K) ? probs_NK[n * K + c] : 0.0f;
    const float scale = dweight_N[n] * pc;
    dlogits_NK[i] = scale * ((j == c ? 1.0f : 0.0f) - probs_NK[i]);
  }
}

}  // namespace

void router_select_forward(const Tensor& probs, const Tensor& choice, const Tensor& weight,
                           const Tensor& logits, const Tensor& biases) {
  const int64_t K = logits.size(-1), N = K ? logits.numel() / K : 0;
  if (N == 0) return;
  select_kernel<<<blocks_for(N), kBlock, 0, stream()>>>(probs.ptr<float>(), choice.ptr<int32_t>(),
                                                        weight.ptr<float>(), logits.ptr<float>(),
                                                        biases.ptr<float>(), N, K);
  ZAYA_GPU_LAUNCH_CHECK();
}

void router_select_backward(const Tensor& dlogits, const Tensor& dweight, const Tensor& probs,
                            const Tensor& choice) {
  const int64_t K = probs.size(-1), N = K ? probs.numel() / K : 0;
  if (N == 0) return;
  select_backward_kernel<<<blocks_for(N * K), kBlock, 0, stream()>>>(
      dlogits.ptr<float>(), dweight.ptr<float>(), probs.ptr<float>(), choice.ptr<int32_t>(), N, K);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
