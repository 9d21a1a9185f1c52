// Balancing-bias update and routing counts (balance.h).
#include "train/balance.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"

namespace zaya {

RoutingCounts::RoutingCounts(const ZayaConfig& c) {
  int64_t at = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t K = c.is_attention(i) ? 0 : c.router_classes(i);
    offset_.push_back(at);
    size_.push_back(K);
    at += K;
  }
  counts_.assign(size_t(at), 0.0);
}

void RoutingCounts::clear() {
  std::fill(counts_.begin(), counts_.end(), 0.0);
}

void RoutingCounts::add(const ZayaConfig& c, const Activations& a) {
  const int64_t N = a.B * a.T;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t K = size_[size_t(i)];
    if (K == 0) continue;
    double* k = counts_.data() + offset_[size_t(i)];
    const int32_t* choice = a.layers[size_t(i)].moe.choice.ptr<int32_t>();
    for (int64_t t = 0; t < N; ++t) {
      ZAYA_ASSERT(choice[t] >= 0 && choice[t] < K, "routing counts: layer {} choice {}", i,
                  choice[t]);
      k[choice[t]] += 1.0;
    }
  }
}

std::span<const double> RoutingCounts::layer(int64_t i) const {
  return std::span<const double>(counts_).subspan(size_t(offset_[size_t(i)]),
                                                  size_t(size_[size_t(i)]));
}

std::span<double> RoutingCounts::layer(int64_t i) {
  return std::span<double>(counts_).subspan(size_t(offset_[size_t(i)]), size_t(size_[size_t(i)]));
}

void balance_update(float* bias, float* m, float* v, std::span<const double> counts, int64_t n,
                    const BalanceParams& p) {
  ZAYA_ASSERT(int64_t(counts.size()) >= n && n > 0, "balance_update: {} counts for {} experts",
              counts.size(), n);
  ZAYA_ASSERT(p.step >= 1, "balance_update: step {} (must be ≥ 1)", p.step);
  double total = 0;
  for (double c : counts) total += c;
  if (total == 0) return;
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  for (int64_t e = 0; e < n; ++e) {
    const double g = counts[size_t(e)] / total - 1.0 / double(n);
    const double mi = p.beta1 * double(m[e]) + (1.0 - p.beta1) * g;
    const double vi = p.beta2 * double(v[e]) + (1.0 - p.beta2) * g * g;
    m[e] = float(mi);
    v[e] = float(vi);
    const double b = bias[e];
    bias[e] = float(b - p.lr * ((mi / bc1) / (std::sqrt(vi / bc2) + p.eps) + p.weight_decay * b));
  }
}

}  // namespace zaya
