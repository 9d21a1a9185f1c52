// SequenceCache: what decoding one sequence carries between steps (docs/model.md §4.8), per
// attention sub-layer: K (post-norm, post-temperature, post-RoPE) and V for the Hk kv heads, the
// last two raw conv inputs u (zeros at the start, which reproduces y_{−1} = b0) and the previous
// normed input x_{t−1} for the value shift (zeros at the start). One allocation, F32, made once:
// a cache never grows. Shapes: cap positions, Hk kv heads, d head size, C conv channels, D model
// width.
//
// Full-attention sub-layers hold K/V rows for every position (row r = position r). A sub-layer
// with a sliding window of `keys` keys (a query sees itself and the keys − 1 before it,
// docs/model.md §4.8) holds a bounded buffer of window_rows(keys, cap) = min(cap, keys − 1 + step)
// rows, step = window_step(keys): row r is position first + r. Positions stay consecutive and in
// order (ops::attention_cached_forward wants its keys so), so instead of a ring the buffer slides:
// before new rows are written at position p, its front moves to window_first(keys, p), a
// multiple of the step at most p − (keys − 1), by moving the rows still needed to the front (once
// per `step` positions: a small fraction of what attention reads). window_first depends on p
// only, so a chunk is split into the same pieces whatever came before — which is what lets a
// restored prefix snapshot (prefix_cache.h) decode bit for bit like a prefilled one. Rows of
// positions older than p − (keys − 1) may be stale and are never read.
#pragma once
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "io/zaya_config.h"

namespace zaya {

struct LayerCache {
  Tensor k, v;        // [rows, Hk, d]: row r holds position first + r
  Tensor conv_state;  // [2, C]: u_{t−2}, u_{t−1}
  Tensor x_prev;      // [D]
  int64_t keys = 0;   // the window in keys (itself included); 0: full attention
  int64_t first = 0;  // the position of row 0 (always 0 for full attention)
};

class SequenceCache {
 public:
  // Room for `capacity` positions; MoE sub-layers get an empty LayerCache.
  SequenceCache(const ZayaConfig& c, int64_t capacity);
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // positions already processed
  void advance(int64_t n) { length_ += n; }
  LayerCache& layer(int64_t i) { return layers_[size_t(i)]; }
  const LayerCache& layer(int64_t i) const { return layers_[size_t(i)]; }
  // Makes this cache a copy of `src`, a cache of the same model and capacity: its filled K/V rows,
  // window fronts, conv states, previous inputs and length (a prompt prefilled once, then decoded
  // n ways).
  void copy_from(const SequenceCache& src);
  // Bytes of the whole allocation (K/V rows, states, alignment): fixed at construction.
  size_t bytes() const { return mem_.capacity(); }

  // The number of keys sub-layer i's queries see, itself included (0: every earlier key).
  static int64_t window_keys(const ZayaConfig& c, int64_t i);
  // The windowed buffer's slide step, its rows for a cache of `capacity` positions, and the
  // position of its row 0 when rows are written from position p (see the contract above).
  static int64_t window_step(int64_t keys);
  static int64_t window_rows(int64_t keys, int64_t capacity);
  static int64_t window_first(int64_t keys, int64_t p);

  // F32 K/V bytes of a cache of `capacity` positions: every full sub-layer's rows grow with it,
  // every windowed one stops at window_rows. This is the figure the engine bounds a sequence by.
  static int64_t kv_bytes(const ZayaConfig& c, int64_t capacity);
  // F32 bytes each position adds to a long cache: the K and V of the full-attention sub-layers
  // (all of them in a model without windows).
  static int64_t bytes_per_token(const ZayaConfig& c);
  // F32 bytes the windowed sub-layers hold at most, whatever the context up to the model's
  // max_position_embeddings (0 without windows):
  // kv_bytes(c, T) ≤ bytes_per_token(c)·T + window_bytes(c), with equality once T is past every
  // window's rows.
  static int64_t window_bytes(const ZayaConfig& c);

 private:
  int64_t capacity_ = 0, length_ = 0;
  Arena mem_;
  std::vector<LayerCache> layers_;
};

}  // namespace zaya
