// Balancing-bias update and routing counts (balance.h).
#include "train/balance.h"

#include <cmath>

#include "core/assert.h"

namespace zaya {

std::map<int64_t, std::vector<int64_t>> count_routing(const ZayaConfig& c, const Activations& a) {
  std::map<int64_t, std::vector<int64_t>> out;
  const int64_t N = a.B * a.T;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (c.is_attention(i)) continue;
    const int64_t K = c.router_classes(i);
    std::vector<int64_t> counts(size_t(K), 0);
    const int32_t* choice = a.layers[size_t(i)].moe.choice.ptr<int32_t>();
    for (int64_t t = 0; t < N; ++t) {
      ZAYA_ASSERT(choice[t] >= 0 && choice[t] < K, "count_routing: layer {} choice {}", i,
                  choice[t]);
      ++counts[size_t(choice[t])];
    }
    out.emplace(i, std::move(counts));
  }
  return out;
}

void balance_update(float* bias, float* m, float* v, const std::vector<int64_t>& counts, int64_t n,
                    const BalanceParams& p) {
  ZAYA_ASSERT(int64_t(counts.size()) >= n && n > 0, "balance_update: {} counts for {} experts",
              counts.size(), n);
  ZAYA_ASSERT(p.step >= 1, "balance_update: step {} (must be ≥ 1)", p.step);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (total == 0) return;
  const double bc1 = 1.0 - std::pow(p.beta1, double(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, double(p.step));
  for (int64_t e = 0; e < n; ++e) {
    const double g = double(counts[size_t(e)]) / double(total) - 1.0 / double(n);
    const double mi = p.beta1 * double(m[e]) + (1.0 - p.beta1) * g;
    const double vi = p.beta2 * double(v[e]) + (1.0 - p.beta2) * g * g;
    m[e] = float(mi);
    v[e] = float(vi);
    const double b = bias[e];
    bias[e] = float(b - p.lr * ((mi / bc1) / (std::sqrt(vi / bc2) + p.eps) + p.weight_decay * b));
  }
}

}  // namespace zaya
