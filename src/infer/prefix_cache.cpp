// PrefixCache (see prefix_cache.h). A node's K/V rows and states live in host vectors; they move
// to and from the SequenceCache through device_copy, so a cache on another device works too.
#include "infer/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>

#include "core/assert.h"

namespace zaya {

struct PrefixCache::Node {
  uint64_t hash = 0;
  Node* parent = nullptr;
  int64_t depth = 0;  // blocks: the snapshot is of position depth·block
  int64_t children = 0;
  bool pinned = false;       // an ancestor of a node being inserted: not evictable now
  std::vector<int32_t> ids;  // this block's token ids
  std::vector<float> kv;     // per attention sub-layer a: K rows [rows_[a], Hk·d], then V rows
  std::vector<float> state;  // per attention sub-layer: conv state [2, C], then x_prev [D]
  std::list<Node*>::iterator lru;
};

PrefixCache::PrefixCache(const ZayaConfig& c, PrefixCacheOptions opt) : opt_(std::move(opt)) {
  ZAYA_CHECK_INPUT(opt_.block >= 1, "prefix cache block must be at least 1 token, not {}",
                   opt_.block);
  ZAYA_CHECK_INPUT(opt_.max_bytes >= 0, "prefix cache size must not be negative ({} bytes)",
                   opt_.max_bytes);
  row_floats_ = c.kv_heads() * c.head_dim();
  conv_floats_ = 2 * c.conv_channels();
  x_floats_ = c.hidden_size;
  // A windowed sub-layer keeps only the rows some later position can still see: the last
  // keys − 1 of the block (prefix_cache.h).
  int64_t kv_floats = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.is_attention(i)) continue;
    const int64_t keys = SequenceCache::window_keys(c, i);
    attn_layers_.push_back(i);
    rows_.push_back(keys > 0 ? std::min(opt_.block, keys - 1) : opt_.block);
    kv_offset_.push_back(kv_floats);
    kv_floats += 2 * rows_.back() * row_floats_;
  }
  kv_floats_ = kv_floats;
  const int64_t A = int64_t(attn_layers_.size());
  // Payload plus the node itself and a rough cost of its list and hash-map entries.
  node_bytes_ = opt_.block * int64_t(sizeof(int32_t)) +
                (kv_floats + A * (conv_floats_ + x_floats_)) * int64_t(sizeof(float)) +
                int64_t(sizeof(Node)) + 8 * int64_t(sizeof(void*));
  stats_.max_bytes = opt_.max_bytes;
}

PrefixCache::~PrefixCache() = default;

uint64_t PrefixCache::hash(uint64_t parent, std::span<const int32_t> block_ids) const {
  if (opt_.hash) return opt_.hash(parent, block_ids);
  return XXH3_64bits_withSeed(block_ids.data(), block_ids.size_bytes(), parent);
}

PrefixCache::Node* PrefixCache::child(const Node* parent, uint64_t h,
                                      std::span<const int32_t> block_ids) const {
  auto [b, e] = nodes_.equal_range(h);
  for (auto it = b; it != e; ++it) {
    Node* n = it->second.get();
    // The hash only finds candidates: the parent and the ids decide.
    if (n->parent == parent &&
        std::equal(n->ids.begin(), n->ids.end(), block_ids.begin(), block_ids.end()))
      return n;
  }
  return nullptr;
}

int64_t PrefixCache::lookup(std::span<const int32_t> ids) const {
  if (!enabled()) return 0;
  const int64_t B = opt_.block, P = int64_t(ids.size());
  const Node* n = nullptr;
  uint64_t h = 0;
  int64_t len = 0;
  while (len + B < P) {  // a snapshot at len + B leaves ≥ 1 token
    const std::span<const int32_t> blk = ids.subspan(size_t(len), size_t(B));
    h = hash(h, blk);
    const Node* next = child(n, h, blk);
    if (!next) break;
    n = next;
    len += B;
  }
  return len;
}

int64_t PrefixCache::restore(std::span<const int32_t> ids, SequenceCache& cache) {
  ZAYA_ASSERT(cache.length() == 0, "prefix restore into a cache of length {}", cache.length());
  if (!enabled()) return 0;  // no cache: neither a hit nor a miss
  const int64_t len = lookup(ids);
  if (len == 0) {
    ++stats_.misses;
    return 0;
  }
  ZAYA_ASSERT(len <= cache.capacity(), "prefix of {} into a cache of {}", len, cache.capacity());
  // Walk the chain again to the deepest node (lookup verified it).
  const int64_t B = opt_.block;
  Node* n = nullptr;
  uint64_t h = 0;
  for (int64_t p = 0; p < len; p += B) {
    const std::span<const int32_t> blk = ids.subspan(size_t(p), size_t(B));
    h = hash(h, blk);
    n = child(n, h, blk);
  }
  ZAYA_ASSERT(n && n->depth * B == len, "prefix chain lost between lookup and restore");
  const int64_t R = row_floats_;
  for (size_t a = 0; a < attn_layers_.size(); ++a) {
    LayerCache& lc = cache.layer(attn_layers_[a]);
    // Full attention: every position. Windowed: the positions from len − (keys − 1) on, at the
    // rows a prefilled cache has them when its next rows are written at len (cache.h).
    const int64_t lo = lc.keys > 0 ? std::max<int64_t>(0, len - (lc.keys - 1)) : 0;
    lc.first = lc.keys > 0 ? SequenceCache::window_first(lc.keys, len) : 0;
    const int64_t rows = rows_[a];
    for (const Node* m = n; m; m = m->parent) {
      // m stores positions [end − rows, end) of its block.
      const int64_t end = m->depth * B, p0 = std::max(end - rows, lo);
      if (end <= lo) break;  // this block and its ancestors are out of the window
      if (p0 >= end) continue;
      float* kv = const_cast<float*>(m->kv.data()) + kv_offset_[a];
      const int64_t skip = p0 - (end - rows), n_rows = end - p0;
      device_copy(lc.k.rows(p0 - lc.first, end - lc.first).view({n_rows, R}),
                  Tensor(kv + skip * R, {n_rows, R}));
      device_copy(lc.v.rows(p0 - lc.first, end - lc.first).view({n_rows, R}),
                  Tensor(kv + (rows + skip) * R, {n_rows, R}));
    }
    float* st = n->state.data() + a * (conv_floats_ + x_floats_);
    device_copy(lc.conv_state.view({conv_floats_}), Tensor(st, {conv_floats_}));
    device_copy(lc.x_prev, Tensor(st + conv_floats_, {x_floats_}));
  }
  cache.advance(len);
  touch(n);
  ++stats_.hits;
  stats_.tokens_reused += len;
  return len;
}

bool PrefixCache::capture(std::span<const int32_t> ids, const SequenceCache& cache) {
  if (!enabled()) return false;
  const int64_t B = opt_.block, L = cache.length();
  ZAYA_ASSERT(L > 0 && L % B == 0 && int64_t(ids.size()) >= L,
              "prefix capture at length {} (block {}, {} ids)", L, B, ids.size());
  // The parent chain, verified block by block.
  Node* parent = nullptr;
  uint64_t h = 0;
  for (int64_t p = 0; p + B < L; p += B) {
    const std::span<const int32_t> blk = ids.subspan(size_t(p), size_t(B));
    h = hash(h, blk);
    parent = child(parent, h, blk);
    if (!parent) return false;  // an earlier block is not cached: its rows would be missing
  }
  const std::span<const int32_t> blk = ids.subspan(size_t(L - B), size_t(B));
  h = hash(h, blk);
  if (Node* have = child(parent, h, blk)) {
    touch(have);
    return true;
  }
  if (!make_room(node_bytes_, parent)) return false;

  auto owned = std::make_unique<Node>();
  Node* n = owned.get();
  n->hash = h;
  n->parent = parent;
  n->depth = L / B;
  n->ids.assign(blk.begin(), blk.end());
  const int64_t R = row_floats_;
  n->kv.resize(size_t(kv_floats_));
  n->state.resize(attn_layers_.size() * size_t(conv_floats_ + x_floats_));
  for (size_t a = 0; a < attn_layers_.size(); ++a) {
    const LayerCache& lc = cache.layer(attn_layers_[a]);
    const int64_t rows = rows_[a];
    ZAYA_ASSERT(lc.first <= L - rows, "prefix capture at {}: rows from {} gone (front {})", L,
                L - rows, lc.first);
    float* kv = n->kv.data() + kv_offset_[a];
    if (rows > 0) {
      const int64_t r0 = L - rows - lc.first;
      device_copy(Tensor(kv, {rows, R}), lc.k.rows(r0, r0 + rows).view({rows, R}));
      device_copy(Tensor(kv + rows * R, {rows, R}), lc.v.rows(r0, r0 + rows).view({rows, R}));
    }
    float* st = n->state.data() + a * (conv_floats_ + x_floats_);
    device_copy(Tensor(st, {conv_floats_}), lc.conv_state.view({conv_floats_}));
    device_copy(Tensor(st + conv_floats_, {x_floats_}), lc.x_prev);
  }
  if (parent) ++parent->children;
  lru_.push_front(n);
  n->lru = lru_.begin();
  nodes_.emplace(h, std::move(owned));
  stats_.bytes += node_bytes_;
  ++stats_.entries;
  ++stats_.inserts;
  touch(n);
  return true;
}

void PrefixCache::touch(Node* n) {
  for (; n; n = n->parent) lru_.splice(lru_.begin(), lru_, n->lru);
}

bool PrefixCache::make_room(int64_t need, const Node* keep) {
  if (need > opt_.max_bytes) return false;
  for (Node* a = const_cast<Node*>(keep); a; a = a->parent) a->pinned = true;
  // From the least recently used end: leaves outside the kept chain. Evicting a leaf may make its
  // parent a leaf; the parent is more recently used, so the walk toward the front still meets it.
  auto it = lru_.end();
  while (stats_.bytes + need > opt_.max_bytes && it != lru_.begin()) {
    --it;
    Node* n = *it;
    if (n->children > 0 || n->pinned) continue;
    it = std::next(it);  // the walk goes on from the node before n
    erase(n);
    ++stats_.evictions;
  }
  for (Node* a = const_cast<Node*>(keep); a; a = a->parent) a->pinned = false;
  return stats_.bytes + need <= opt_.max_bytes;
}

void PrefixCache::erase(Node* n) {
  if (n->parent) --n->parent->children;
  lru_.erase(n->lru);
  stats_.bytes -= node_bytes_;
  --stats_.entries;
  auto [b, e] = nodes_.equal_range(n->hash);
  for (auto it = b; it != e; ++it)
    if (it->second.get() == n) {
      nodes_.erase(it);
      return;
    }
}

PrefixCacheStats PrefixCache::stats() const {
  return stats_;
}

}  // namespace zaya
