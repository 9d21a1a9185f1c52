// Per-sequence caches (cache.h): K/V rows (bounded for windowed sub-layers), conv state and the
// previous residual input, allocated once; the decoder fills them as tokens are appended.
#include "infer/cache.h"

#include <algorithm>

#include "model/attention_window.h"

namespace zaya {

namespace {

// Slide step of a windowed buffer: at most this many positions between two slides. A slide moves
// up to keys − 1 rows, so per position it costs (keys − 1)/step row copies — under 1% of the
// keys rows attention reads for a large window — while the buffer overhead stays ≤ 128 rows
// (≤ keys rows for a small window).
constexpr int64_t kMaxWindowStep = 128;

// K/V rows sub-layer i keeps in a cache of `cap` positions.
int64_t kv_rows(const ZayaConfig& c, int64_t i, int64_t cap) {
  const int64_t keys = SequenceCache::window_keys(c, i);
  return keys > 0 ? SequenceCache::window_rows(keys, cap) : cap;
}

size_t arena_bytes(const ZayaConfig& c, int64_t cap) {
  size_t bytes = 0;
  const int64_t row = c.kv_heads() * c.head_dim();
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i))
      bytes += 2 * Arena::aligned(size_t(kv_rows(c, i, cap) * row) * 4) +
               Arena::aligned(size_t(2 * c.conv_channels()) * 4) +
               Arena::aligned(size_t(c.hidden_size) * 4);
  return bytes;
}

}  // namespace

int64_t SequenceCache::window_keys(const ZayaConfig& c, int64_t i) {
  return attention_keys(c, i);
}

int64_t SequenceCache::window_step(int64_t keys) {
  return std::clamp<int64_t>(keys, 1, kMaxWindowStep);
}

int64_t SequenceCache::window_rows(int64_t keys, int64_t capacity) {
  // (keys − 1 ≥ capacity first: a window near 2^63 must not overflow the sum)
  return keys - 1 >= capacity ? capacity : std::min(capacity, keys - 1 + window_step(keys));
}

int64_t SequenceCache::window_first(int64_t keys, int64_t p) {
  const int64_t step = window_step(keys);
  return std::max<int64_t>(0, p - (keys - 1)) / step * step;
}

SequenceCache::SequenceCache(const ZayaConfig& c, int64_t capacity)
    : capacity_(capacity), mem_(arena_bytes(c, capacity)) {
  ZAYA_ASSERT(capacity > 0, "cache capacity {}", capacity);
  layers_.resize(size_t(c.num_layers()));
  const int64_t Hk = c.kv_heads(), d = c.head_dim();
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.is_attention(i)) continue;
    LayerCache& l = layers_[size_t(i)];
    l.keys = window_keys(c, i);
    const int64_t rows = kv_rows(c, i, capacity);
    l.k = mem_.alloc(DType::F32, {rows, Hk, d});
    l.v = mem_.alloc(DType::F32, {rows, Hk, d});
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
    const int64_t filled = src.length_ - s.first;
    if (filled > 0) {
      device_copy(d.k.rows(0, filled), s.k.rows(0, filled));
      device_copy(d.v.rows(0, filled), s.v.rows(0, filled));
    }
    d.first = s.first;
    device_copy(d.conv_state, s.conv_state);
    device_copy(d.x_prev, s.x_prev);
  }
  length_ = src.length_;
}

int64_t SequenceCache::kv_bytes(const ZayaConfig& c, int64_t capacity) {
  int64_t rows = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i)) rows += kv_rows(c, i, capacity);
  return rows * 2 * c.kv_heads() * c.head_dim() * int64_t(sizeof(float));
}

int64_t SequenceCache::bytes_per_token(const ZayaConfig& c) {
  int64_t layers = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    layers += c.is_attention(i) && window_keys(c, i) == 0 ? 1 : 0;
  return layers * 2 * c.kv_heads() * c.head_dim() * int64_t(sizeof(float));
}

int64_t SequenceCache::window_bytes(const ZayaConfig& c) {
  int64_t rows = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t keys = c.is_attention(i) ? window_keys(c, i) : 0;
    // No sequence is longer than the model's context, whatever its window says.
    if (keys > 0) rows += window_rows(keys, c.max_position_embeddings);
  }
  return rows * 2 * c.kv_heads() * c.head_dim() * int64_t(sizeof(float));
}

}  // namespace zaya
