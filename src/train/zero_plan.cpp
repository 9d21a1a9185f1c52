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

int64_t gradient_ready_after(const ParamLayout& layout, const ParamSpec& s) {
  if (s.layer >= 0) return s.layer;
  if (s.kind == ParamKind::Embedding) return -1;
  int64_t layers = 0;  // the final merge: with the last layer
  for (const ParamSpec& t : layout.specs) layers = std::max(layers, t.layer + 1);
  return layers - 1;
}

namespace {

// One bucket's trainable tensors (layout order) planned onto the ranks: its Muon matrices by cost
// to the least loaded rank so far (p.muon_cost, the whole model's), its AdamW concatenation cut
// by water-filling; appends the segments of every rank to `per_rank` and returns the chunk.
int64_t plan_bucket(const ParamLayout& layout, bool use_muon, const std::vector<size_t>& specs,
                    size_t bucket, ZeroPlan& p, std::vector<std::vector<ZeroSegment>>& per_rank) {
  const size_t W = size_t(p.world);
  std::vector<size_t> muon, adamw;
  for (size_t i : specs) (is_muon_param(layout.specs[i], use_muon) ? muon : adamw).push_back(i);
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

  // The AdamW concatenation is walked once, in rank order.
  size_t t = 0;    // current AdamW tensor (index into adamw)
  int64_t at = 0;  // elements of it already given out
  int64_t chunk = 1;
  for (size_t r = 0; r < W; ++r) {
    int64_t off = 0;
    for (size_t i : muon) {
      if (owner[i] != int(r)) continue;
      const int64_t n = layout.specs[i].numel();
      per_rank[r].push_back({i, 0, n, int(r), off, true, bucket});
      off += n;
    }
    for (int64_t want = slice[r]; want > 0;) {
      ZAYA_ASSERT(t < adamw.size(), "ZeRO plan: AdamW elements ran out");
      const int64_t n = std::min(want, layout.specs[adamw[t]].numel() - at);
      per_rank[r].push_back({adamw[t], at, n, int(r), off, false, bucket});
      off += n;
      want -= n;
      at += n;
      if (at == layout.specs[adamw[t]].numel()) ++t, at = 0;
    }
    p.elements[r] += off;
    p.state_floats[r] += muon_elements[r] + 2 * slice[r];
    chunk = std::max(chunk, off);
  }
  ZAYA_ASSERT(t == adamw.size() && at == 0, "ZeRO plan: AdamW elements left over");
  return chunk;
}

}  // namespace

ZeroPlan make_zero_plan(const ParamLayout& layout, bool use_muon, int world,
                        int64_t bucket_target) {
  if (world < 1) fail("ZeRO plan: world size {} (must be ≥ 1)", world);
  if (bucket_target < 0) fail("ZeRO plan: bucket size {} (must be ≥ 0)", bucket_target);
  ZeroPlan p;
  p.world = world;
  const size_t W = size_t(world);
  p.elements.assign(W, 0);
  p.state_floats.assign(W, 0);
  p.muon_cost.assign(W, 0.0);

  // The trainable tensors in the order the backward finishes them: by ready layer, highest
  // first (layout order within a layer).
  std::vector<size_t> order;
  std::vector<int64_t> ready(layout.specs.size(), 0);
  for (size_t i = 0; i < layout.specs.size(); ++i) {
    const ParamSpec& s = layout.specs[i];
    if (!s.trainable() || s.numel() == 0) continue;
    ready[i] = gradient_ready_after(layout, s);
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ready[a] > ready[b]; });

  // Whole layers to a bucket until it holds bucket_target elements (0: everything in one).
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> cur;
  int64_t held = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    cur.push_back(order[k]);
    held += layout.specs[order[k]].numel();
    const bool layer_ends = k + 1 == order.size() || ready[order[k + 1]] != ready[order[k]];
    if (layer_ends && bucket_target > 0 && held >= bucket_target) {
      buckets.push_back(std::move(cur));
      cur.clear();
      held = 0;
    }
  }
  if (!cur.empty() || buckets.empty()) buckets.push_back(std::move(cur));

  std::vector<std::vector<ZeroSegment>> per_rank(W);
  p.chunk = 0;
  for (std::vector<size_t>& specs : buckets) {
    ZeroBucket b;
    if (!specs.empty()) b.ready_after = ready[specs.back()];  // the lowest: order is descending
    std::sort(specs.begin(), specs.end());                    // layout order within the bucket
    b.offset = p.chunk * world;
    b.shard_offset = p.chunk;
    b.chunk = plan_bucket(layout, use_muon, specs, p.buckets.size(), p, per_rank);
    p.chunk += b.chunk;
    p.buckets.push_back(b);
  }
  for (size_t r = 0; r < W; ++r) {
    p.first.push_back(p.segments.size());
    for (ZeroSegment z : per_rank[r]) {
      z.shard_offset += p.buckets[z.bucket].shard_offset;
      p.segments.push_back(z);
    }
  }
  p.first.push_back(p.segments.size());
  return p;
}

}  // namespace zaya
