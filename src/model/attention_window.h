// The sliding window of a CCA attention sub-layer as the attention ops take it: how many keys a
// query sees, itself included (0 = every earlier key, i.e. full causal attention).
//
// Convention (docs/model.md, "Sliding-window layers"): transformers' ZAYA builds the mask of a
// "hybrid_sliding" layer from `sliding_window_causal_mask_function(sliding_window)` of its masking
// utilities, i.e. causal (key ≤ query) AND key > query − sliding_window. A query at position t
// therefore sees the keys t − sliding_window + 1 … t: exactly `sliding_window` keys counting
// itself. The legacy schema's `swa_layers` value carries over unchanged as the native
// `sliding_window`, so both layouts give the ops the config value as it stands.
#pragma once
#include <cstdint>
#include "io/zaya_config.h"

namespace zaya {

// The ops' `window` (ops::attention_forward and friends) for sub-layer `sub_layer`: the number of
// keys a query sees, itself included; 0 for a full-attention layer.
inline int64_t attention_keys(const ZayaConfig& c, int64_t sub_layer) {
  return c.window(sub_layer);
}

}  // namespace zaya
