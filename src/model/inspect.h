// Static facts about a config: parameter counts (total / without embedding / active per token),
// forward FLOPs per token and KV-cache bytes per token, next to full multi-head attention.
#pragma once
#include <cstdint>

#include "io/zaya_config.h"

namespace zaya {

struct ModelFacts {
  int64_t params_total = 0;  // trainable values, embedding included
  int64_t params_no_embedding = 0;
  int64_t params_active_no_embedding = 0;  // one expert per MoE sub-layer
  int64_t buffer_values = 0;               // balancing biases
  int64_t tensors = 0;                     // including buffers
  int64_t attention_layers = 0, moe_layers = 0;
  // Forward FLOPs per token: 2 per multiply-add of every active weight matrix (LM head included)
  // plus the attention scores and mixing at the given context length (causal average).
  double flops_matmul_per_token = 0;
  double flops_attention_per_token = 0;
  // KV cache per token over all attention sub-layers, in values: CCA keeps K and V for Hk heads;
  // multi-head attention of the same width keeps them for all num_attention_heads heads.
  int64_t kv_values_per_token = 0;
  int64_t mha_kv_values_per_token = 0;
  // Constant per-sequence decode state: conv state [C,2] + previous normed input [D] per layer.
  int64_t state_values_per_sequence = 0;
};

ModelFacts model_facts(const ZayaConfig& c, int64_t context_length);

// KV-cache values (K and V, all attention sub-layers) one sequence of `context` tokens holds: a
// full-attention sub-layer keeps every token, a windowed one at most its window's keys
// (kv_keys_kept), so past the window its share stops growing.
int64_t kv_values_for_context(const ZayaConfig& c, int64_t context);
// The keys attention sub-layer i keeps for a context of `context` tokens.
int64_t kv_keys_kept(const ZayaConfig& c, int64_t i, int64_t context);

}  // namespace zaya
