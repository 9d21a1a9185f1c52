// PrefixCache: snapshots of a sequence's complete decode state at block boundaries, so that a new
// request whose prompt begins with tokens already run resumes there and prefills only the rest
// (docs/serving.md, "Prefix cache").
//
// Why whole snapshots: a ZAYA1 attention sub-layer carries, besides K and V, the last two raw conv
// inputs and the previous normed input (cache.h). Both are path-dependent — they exist, for
// position p, only at the moment a sequence's length is p — so a K/V cache alone cannot resume a
// sequence. A snapshot at position p = k·block holds, for every attention sub-layer, the K/V rows
// of positions [0, p), the conv state and x_prev at p: restoring it gives a SequenceCache equal,
// bit for bit, to the one that prefilling ids[0, p) left.
//
// Layout: the snapshots form a tree of blocks. The node of position k·block stores only the K/V
// rows of its own block (positions [(k−1)·block, k·block)), that block's token ids, the conv states
// and x_prev at k·block, and a pointer to its parent (the node of (k−1)·block); a prefix's rows are
// shared by every longer snapshot that extends it. Nodes are found by a hash chain over the blocks
// (a block's hash mixes its parent's), and a hit is verified by comparing the block's ids and its
// parent node, so a hash collision can never return another prefix.
//
// Windowed sub-layers (cache.h): a position p can see back to p − (keys − 1), so a node keeps only
// the last min(block, keys − 1) rows of its block for them, and a restore at p writes the
// positions p − (keys − 1) … p − 1 (gathered from the node and its ancestors) where a cache that
// prefilled the same ids keeps them; the rows before are never read. The snapshot is then as good
// as the prefilled state, bit for bit, and a node of a 4K-window sub-layer with a 256-token block
// costs the same as a full one, while a W = 1 sub-layer keeps no rows at all.
//
// Memory: an LRU over nodes, bounded by max_bytes (the bytes of every node's ids, K/V rows and
// states plus its bookkeeping). Only leaves are evicted (a node's rows are needed by its children):
// every use of a node also uses its ancestors, after it, so an ancestor is always more recently
// used than its descendants and the least recently used node is a leaf.
//
// Single-threaded: the engine calls it from its own thread.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "infer/cache.h"
#include "io/zaya_config.h"

namespace zaya {

// The hash of a block of ids given its parent's hash (0 for the first block).
using BlockHash = std::function<uint64_t(uint64_t parent, std::span<const int32_t> ids)>;

struct PrefixCacheOptions {
  int64_t max_bytes = 0;  // 0: disabled (nothing is stored, every restore misses)
  int64_t block = 256;    // tokens per block: snapshots are taken at multiples of it
  BlockHash hash = {};    // empty: XXH3-64 of the ids seeded with the parent's hash
};

struct PrefixCacheStats {
  int64_t hits = 0, misses = 0;  // restores that found a prefix, and those that did not
  int64_t tokens_reused = 0;     // positions restored instead of prefilled
  int64_t inserts = 0, evictions = 0;
  int64_t bytes = 0, entries = 0;  // held now (entries: block nodes)
  int64_t max_bytes = 0;
};

class PrefixCache {
 public:
  PrefixCache(const ZayaConfig& c, PrefixCacheOptions opt);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return opt_.max_bytes > 0; }
  int64_t block() const { return opt_.block; }
  // Bytes one block's node takes (what the LRU counts for it).
  int64_t node_bytes() const { return node_bytes_; }

  // The length of the longest cached prefix of `ids` that restore would resume from: a multiple
  // of block, less than ids.size() (at least one token is left to prefill, for the logits); 0 when
  // none. Changes nothing.
  int64_t lookup(std::span<const int32_t> ids) const;
  // Restores that prefix into `cache` (empty: length 0; of this model; room for it) and returns
  // its length (0 on a miss: the cache is untouched). Counts a hit or a miss (when enabled) and
  // marks the snapshot's blocks as just used.
  int64_t restore(std::span<const int32_t> ids, SequenceCache& cache);
  // Stores the state of `cache` at its length L, whose tokens were ids[0, L): L must be a positive
  // multiple of block. The node of L − block must be cached already (it is when the sequence's
  // earlier boundaries were captured or restored); otherwise, or when the node cannot fit without
  // evicting its own ancestors, nothing is stored. A node already cached (same ids) is only marked
  // as used. Returns whether the snapshot of L is cached afterwards.
  bool capture(std::span<const int32_t> ids, const SequenceCache& cache);

  PrefixCacheStats stats() const;

 private:
  struct Node;
  // The node of ids[0, k·block) given its parent's node (null: k = 1), or null.
  Node* child(const Node* parent, uint64_t hash, std::span<const int32_t> block_ids) const;
  uint64_t hash(uint64_t parent, std::span<const int32_t> block_ids) const;
  // Moves `n` and then each of its ancestors to the front of the LRU.
  void touch(Node* n);
  // Evicts least recently used leaves outside the chain ending at `keep` until `need` more bytes
  // fit; false when they cannot.
  bool make_room(int64_t need, const Node* keep);
  void erase(Node* n);

  PrefixCacheOptions opt_;
  std::vector<int64_t> attn_layers_;  // the attention sub-layers
  std::vector<int64_t> rows_;         // per attention sub-layer: K (and V) rows a node keeps
  std::vector<int64_t> kv_offset_;    // per attention sub-layer: where its rows start in Node::kv
  int64_t kv_floats_ = 0;             // floats of a node's K/V rows
  int64_t row_floats_ = 0;            // K (or V) floats per position per layer: Hk·d
  int64_t conv_floats_ = 0, x_floats_ = 0;
  int64_t node_bytes_ = 0;
  std::unordered_multimap<uint64_t, std::unique_ptr<Node>> nodes_;
  std::list<Node*> lru_;  // most recently used first
  PrefixCacheStats stats_;
};

}  // namespace zaya
