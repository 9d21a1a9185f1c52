// Model facts (inspect.h) from the parameter layout: counts, active parameters, FLOPs and cache
// sizes per token.
#include "model/inspect.h"

#include <algorithm>
#include <vector>

#include "model/attention_window.h"
#include "model/param_layout.h"

namespace zaya {

int64_t kv_keys_kept(const ZayaConfig& c, int64_t i, int64_t context) {
  const int64_t w = attention_keys(c, i);
  return w > 0 ? std::min(context, w) : context;
}

int64_t kv_values_for_context(const ZayaConfig& c, int64_t context) {
  int64_t values = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i)) values += 2 * c.kv_heads() * c.head_dim() * kv_keys_kept(c, i, context);
  return values;
}

ModelFacts model_facts(const ZayaConfig& c, int64_t context_length) {
  ModelFacts f;
  const ParamLayout layout = make_param_layout(c);
  const int64_t D = c.hidden_size, V = c.vocab_size, d = c.head_dim();
  int64_t matrix_values = 0, inactive_expert_values = 0;
  std::vector<int64_t> expert_values(size_t(c.num_layers()), 0);  // per sub-layer, all experts
  for (const ParamSpec& s : layout.specs) {
    ++f.tensors;
    if (!s.trainable()) {
      f.buffer_values += s.numel();
      continue;
    }
    f.params_total += s.numel();
    if (s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert) matrix_values += s.numel();
    if (s.kind == ParamKind::Expert) expert_values[size_t(s.layer)] += s.numel();
  }
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (c.is_attention(i)) {
      ++f.attention_layers;
      continue;
    }
    ++f.moe_layers;
    // A token reads one expert of the layer (all experts have the same shape).
    const int64_t E = c.num_experts(i);
    inactive_expert_values += expert_values[size_t(i)] / E * (E - 1);
  }
  f.params_no_embedding = f.params_total - V * D;
  f.params_active_no_embedding = f.params_no_embedding - inactive_expert_values;
  // Active matrices + the LM head; convs, norms and elementwise work are lower order.
  f.flops_matmul_per_token = 2.0 * double(matrix_values - inactive_expert_values + V * D);
  // QKᵀ and AV: 2·2·Hq·d FLOPs per visible key; a causal token sees (T+1)/2 keys on average, one
  // of a window of w keys min(t+1, w) at position t.
  const double T = double(context_length);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.is_attention(i)) continue;
    const double w = double(attention_keys(c, i));
    const double keys = w <= 0 || w >= T ? (T + 1) / 2 : (w * (w + 1) / 2 + (T - w) * w) / T;
    f.flops_attention_per_token += 4.0 * double(c.q_heads() * d) * keys;
  }
  f.kv_values_per_token = f.attention_layers * 2 * c.kv_heads() * d;
  f.mha_kv_values_per_token = f.attention_layers * 2 * c.num_attention_heads * d;
  f.state_values_per_sequence = f.attention_layers * (2 * c.conv_channels() + D);
  return f;
}

}  // namespace zaya
