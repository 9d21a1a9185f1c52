// Routing counts (balance.h).
#include "train/balance.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"
#include "ops/ops.h"

namespace zaya {

RoutingCounts::RoutingCounts(const ZayaConfig& c, Device device) : device_(device) {
  int64_t at = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t K = c.is_attention(i) ? 0 : c.router_classes(i);
    offset_.push_back(at);
    size_.push_back(K);
    at += K;
  }
  counts_.assign(size_t(at), 0.0);
  if (device != Device::Cpu) device_counts_ = Buffer(counts_.size() * sizeof(double), device);
}

void RoutingCounts::clear() {
  std::fill(counts_.begin(), counts_.end(), 0.0);
  device_counts_.zero();
}

void RoutingCounts::add(const ZayaConfig& c, const Activations& a) {
  const int64_t N = a.B * a.T;
  const Device device = device_;
  ZAYA_ASSERT(a.device() == device, "RoutingCounts: made for {}, given {} activations",
              device_name(device), device_name(a.device()));
  double* sums =
      device == Device::Cpu ? counts_.data() : static_cast<double*>(device_counts_.data());
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t K = size_[size_t(i)];
    if (K == 0) continue;
    ops::count_classes(Tensor(sums + offset_[size_t(i)], {K}).on(device),
                       a.layers[size_t(i)].moe.choice.prefix({N}), K);
  }
}

void RoutingCounts::to_host() {
  if (device_ != Device::Cpu && !counts_.empty())  // the running sums since clear()
    device_copy(
        Tensor(counts_.data(), {int64_t(counts_.size())}),
        Tensor(static_cast<double*>(device_counts_.data()), {int64_t(counts_.size())}).on(device_));
}

std::span<const double> RoutingCounts::layer(int64_t i) const {
  return std::span<const double>(counts_).subspan(size_t(offset_[size_t(i)]),
                                                  size_t(size_[size_t(i)]));
}

std::span<double> RoutingCounts::layer(int64_t i) {
  return std::span<double>(counts_).subspan(size_t(offset_[size_t(i)]), size_t(size_[size_t(i)]));
}

double expert_load_entropy(const ZayaConfig& c, const RoutingCounts& counts) {
  double sum = 0;
  int layers = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t n = c.is_attention(i) ? 0 : c.num_experts(i);
    if (n < 2) continue;
    const std::span<const double> k = counts.layer(i);
    double total = 0, h = 0;
    for (int64_t e = 0; e < n; ++e) total += k[size_t(e)];
    if (total == 0) continue;
    for (int64_t e = 0; e < n; ++e) {
      const double p = k[size_t(e)] / total;
      if (p > 0) h -= p * std::log(p);
    }
    sum += h / std::log(double(n));
    ++layers;
  }
  return layers ? sum / layers : 1.0;
}

}  // namespace zaya
