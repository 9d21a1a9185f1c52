// Per-sequence caches (cache.h): K/V rows, conv state and the previous residual input, grown by
// the decoder as tokens are appended.
#include "infer/cache.h"

namespace zaya {

namespace {
size_t arena_bytes(const ZayaConfig& c, int64_t cap) {
  size_t bytes = 0;
  const int64_t kv = cap * c.kv_heads() * c.head_dim();
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i))
      bytes += 2 * Arena::aligned(size_t(kv) * 4) +
               Arena::aligned(size_t(2 * c.conv_channels()) * 4) +
               Arena::aligned(size_t(c.hidden_size) * 4);
  return bytes;
}
}  // namespace

SequenceCache::SequenceCache(const ZayaConfig& c, int64_t capacity)
    : capacity_(capacity), mem_(arena_bytes(c, capacity)) {
  ZAYA_ASSERT(capacity > 0, "cache capacity {}", capacity);
  layers_.resize(size_t(c.num_layers()));
  const int64_t Hk = c.kv_heads(), d = c.head_dim();
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.is_attention(i)) continue;
    LayerCache& l = layers_[size_t(i)];
    l.k = mem_.alloc(DType::F32, {capacity, Hk, d});
    l.v = mem_.alloc(DType::F32, {capacity, Hk, d});
    l.conv_state = mem_.alloc(DType::F32, {2, c.conv_channels()});
    l.x_prev = mem_.alloc(DType::F32, {c.hidden_size});
  }
}

void SequenceCache::copy_from(const SequenceCache& src) {
  ZAYA_ASSERT(src.capacity_ == capacity_ && src.layers_.size() == layers_.size(),
              "cache copy: capacity {} from {}, {} layers from {}", capacity_, src.capacity_,
              layers_.size(), src.layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerCache& d = layers_[i];
    const LayerCache& s = src.layers_[i];
    if (!s.k.defined()) continue;
    if (src.length_ > 0) {
      device_copy(d.k.rows(0, src.length_), s.k.rows(0, src.length_));
      device_copy(d.v.rows(0, src.length_), s.v.rows(0, src.length_));
    }
    device_copy(d.conv_state, s.conv_state);
    device_copy(d.x_prev, s.x_prev);
  }
  length_ = src.length_;
}

int64_t SequenceCache::bytes_per_token(const ZayaConfig& c) {
  int64_t layers = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) layers += c.is_attention(i) ? 1 : 0;
  return layers * 2 * c.kv_heads() * c.head_dim() * int64_t(sizeof(float));
}

}  // namespace zaya
