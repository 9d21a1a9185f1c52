// Global gradient norm and clipping (grad_clip.h).
#include "train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zaya {

namespace {

// Elements per partial sum: the partition (and so the rounding) is fixed, threads only pick
// which blocks they sum.
constexpr int64_t kNormBlock = 1 << 16;

}  // namespace

double sum_squares(const float* g, int64_t n) {
  const int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
  std::vector<double> part(size_t(blocks), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i1 = std::min(n, (b + 1) * kNormBlock);
    double s = 0;
    for (int64_t i = b * kNormBlock; i < i1; ++i) s += double(g[i]) * double(g[i]);
    part[size_t(b)] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

double global_grad_norm(const Model& m) {
  ZAYA_ASSERT(m.has_grads(), "global_grad_norm: the model has no gradients");
  double s = 0;
  for (const ParamSpec& p : m.layout().specs)
    if (p.trainable()) s += sum_squares(m.grads() + p.offset, p.numel());
  return std::sqrt(s);
}

void scale_grads(Model& m, double s) {
  ZAYA_ASSERT(m.has_grads(), "scale_grads: the model has no gradients");
  const float f = float(s);
  for (const ParamSpec& p : m.layout().specs) {
    if (!p.trainable()) continue;
    float* g = m.grads() + p.offset;
    const int64_t n = p.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) g[i] *= f;
  }
}

double clip_grad_norm(Model& m, double max_norm) {
  const double norm = global_grad_norm(m);
  if (std::isfinite(norm) && max_norm > 0 && norm > max_norm) scale_grads(m, max_norm / norm);
  return norm;
}

}  // namespace zaya
