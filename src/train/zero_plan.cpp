// ZeRO-1 ownership plan (zero_plan.h): greedy cost balancing of whole Muon matrices, then a
// water-filling cut of the AdamW concatenation that evens out the optimizer state per rank.
#include "train/zero_plan.h"

#include <algorithm>
#include <numeric>

#include "core/assert.h"

namespace zaya {

bool is_muon_param(const ParamSpec& s, bool use_muon) {
  return use_muon && (s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert);
}

double muon_cost(const ParamSpec& s) {
  ZAYA_ASSERT(s.shape.size() == 2, "muon_cost: {} is not 2-D", s.name);
  const double r = double(s.shape[0]), c = double(s.shape[1]);
  return r * c * std::min(r, c);
}

namespace {

// AdamW elements per rank: the smallest level L with Σ_r max(0, ⌊(L − muon_r)/2⌋) ≥ total, so
// muon_r + 2·a_r ≈ L wherever a rank gets AdamW elements; the few extra are taken back from the
// last ranks, one each.
std::vector<int64_t> water_fill(const std::vector<int64_t>& muon, int64_t total) {
  const size_t world = muon.size();
  auto fill = [&](int64_t level) {
    std::vector<int64_t> a(world);
    for (size_t r = 0; r < world; ++r) a[r] = std::max<int64_t>(0, (level - muon[r]) / 2);
    return a;
  };
  auto sum = [](const std::vector<int64_t>& a) {
    return std::accumulate(a.begin(), a.end(), int64_t(0));
  };
  int64_t lo = 0, hi = *std::max_element(muon.begin(), muon.end()) + 2 * total + 2;
  while (lo < hi) {  // smallest level whose fill holds `total`
    const int64_t mid = lo + (hi - lo) / 2;
    if (sum(fill(mid)) >= total)
      hi = mid;
    else
      lo = mid + 1;
  }
  std::vector<int64_t> a = fill(lo);
  int64_t excess = sum(a) - total;
  for (size_t r = world; r-- > 0 && excess > 0;)
    if (a[r] > 0) --a[r], --excess;
  ZAYA_ASSERT(excess == 0, "water_fill: {} elements left over", excess);
  return a;
}

}  // namespace

ZeroPlan make_zero_plan(const ParamLayout& layout, bool use_muon, int world) {
  if (world < 1) fail("ZeRO plan: world size {} (must be ≥ 1)", world);
  ZeroPlan p;
  p.world = world;
  const size_t W = size_t(world);
  p.elements.assign(W, 0);
  p.state_floats.assign(W, 0);
  p.muon_cost.assign(W, 0.0);

  // Muon matrices: largest cost first, each to the least loaded rank.
  std::vector<size_t> muon, adamw;
  for (size_t i = 0; i < layout.specs.size(); ++i) {
    const ParamSpec& s = layout.specs[i];
    if (!s.trainable() || s.numel() == 0) continue;
    (is_muon_param(s, use_muon) ? muon : adamw).push_back(i);
  }
  std::vector<size_t> by_cost = muon;
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) {
    return muon_cost(layout.specs[a]) > muon_cost(layout.specs[b]);
  });
  std::vector<int> owner(layout.specs.size(), -1);
  for (size_t i : by_cost) {
    const size_t r = size_t(std::min_element(p.muon_cost.begin(), p.muon_cost.end()) -
                            p.muon_cost.begin());  // first minimum: the lower rank on ties
    owner[i] = int(r);
    p.muon_cost[r] += muon_cost(layout.specs[i]);
  }
  std::vector<int64_t> muon_elements(W, 0);
  for (size_t i : muon) muon_elements[size_t(owner[i])] += layout.specs[i].numel();

  int64_t adamw_total = 0;
  for (size_t i : adamw) adamw_total += layout.specs[i].numel();
  const std::vector<int64_t> slice = water_fill(muon_elements, adamw_total);

  // Segments in bucket order. The AdamW concatenation is walked once, in rank order.
  size_t t = 0;    // current AdamW tensor (index into adamw)
  int64_t at = 0;  // elements of it already given out
  for (size_t r = 0; r < W; ++r) {
    p.first.push_back(p.segments.size());
    int64_t off = 0;
    for (size_t i : muon) {
      if (owner[i] != int(r)) continue;
      const int64_t n = layout.specs[i].numel();
      p.segments.push_back({i, 0, n, int(r), off, true});
      off += n;
    }
    for (int64_t want = slice[r]; want > 0;) {
      ZAYA_ASSERT(t < adamw.size(), "ZeRO plan: AdamW elements ran out");
      const int64_t n = std::min(want, layout.specs[adamw[t]].numel() - at);
      p.segments.push_back({adamw[t], at, n, int(r), off, false});
      off += n;
      want -= n;
      at += n;
      if (at == layout.specs[adamw[t]].numel()) ++t, at = 0;
    }
    p.elements[r] = off;
    p.state_floats[r] = muon_elements[r] + 2 * slice[r];
    p.chunk = std::max(p.chunk, off);
  }
  p.first.push_back(p.segments.size());
  ZAYA_ASSERT(t == adamw.size() && at == 0, "ZeRO plan: AdamW elements left over");
  return p;
}

}  // namespace zaya
