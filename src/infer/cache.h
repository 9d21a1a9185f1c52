// SequenceCache: what decoding one sequence carries between steps (docs/model.md §4.8), per
// attention sub-layer: K (post-norm, post-temperature, post-RoPE) and V for the Hk kv heads at
// every position so far, the last two raw conv inputs u (zeros at the start, which reproduces
// y_{−1} = b0) and the previous normed input x_{t−1} for the value shift (zeros at the start). One
// allocation, F32. Shapes: cap positions, Hk kv heads, d head size, C conv channels, D model width.
#pragma once
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "io/zaya_config.h"

namespace zaya {

struct LayerCache {
  Tensor k, v;        // [cap, Hk, d]; rows 0 … length−1 are filled
  Tensor conv_state;  // [2, C]: u_{t−2}, u_{t−1}
  Tensor x_prev;      // [D]
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
  // conv states, previous inputs and length (a prompt prefilled once, then decoded n ways).
  void copy_from(const SequenceCache& src);
  size_t bytes() const { return mem_.capacity(); }

  // F32 bytes the cache holds per position (K and V of every attention sub-layer).
  static int64_t bytes_per_token(const ZayaConfig& c);

 private:
  int64_t capacity_ = 0, length_ = 0;
  Arena mem_;
  std::vector<LayerCache> layers_;
};

}  // namespace zaya
