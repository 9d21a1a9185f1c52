// check_config_limits (see config_limits.h).
#include "io/config_limits.h"

#include <cmath>
#include <string_view>

#include "core/assert.h"
#include "io/zaya_config.h"

namespace zaya {

namespace {

using namespace config_limits;

void at_most(std::string_view field, int64_t v, int64_t limit, std::string_view what) {
  if (v > limit)
    fail("config.json: field '{}': is {} (the limit is {}: {})", field, v, limit, what);
}

void entries_at_most(std::string_view field, const std::vector<int64_t>& list, int64_t limit,
                     std::string_view what) {
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] > limit)
      fail("config.json: field '{}': entry {} is {} (the limit is {}: {})", field, i, list[i],
           limit, what);
}

void finite_at_most(std::string_view field, double v, double limit, std::string_view expected) {
  if (!std::isfinite(v) || v > limit)
    fail("config.json: field '{}': is {} (expected {})", field, v, expected);
}

}  // namespace

void check_config_limits(const ZayaConfig& c) {
  at_most("hidden_size", c.hidden_size, kHiddenSize, "the model dimension");
  at_most("vocab_size", c.vocab_size, kVocabSize, "token ids are 32-bit");
  at_most("num_attention_heads", c.num_attention_heads, kHeads, "heads per sub-layer");
  at_most("num_key_value_heads", c.num_key_value_heads, kHeads, "heads per sub-layer");
  at_most("zaya_layers", c.num_layers(), kLayers, "sub-layers (entries of zaya_layers)");
  entries_at_most("zaya_layers", c.zaya_layers, kExperts, "experts per MoE sub-layer");
  entries_at_most("cca_num_q_heads", c.cca_num_q_heads, kHeads, "heads per sub-layer");
  entries_at_most("num_query_groups_list", c.num_query_groups_list, kHeads, "heads per sub-layer");
  entries_at_most("ffn_hidden_size_list", c.ffn_hidden_size_list, kFfnHidden,
                  "an expert's hidden size");
  entries_at_most("zaya_mlp_expansion", c.zaya_mlp_expansion, kRouterWidth, "the router width");
  at_most("max_position_embeddings", c.max_position_embeddings, kPositions, "positions are 32-bit");
  // rotary_dim() = floor(d · factor) must be formed from a factor in (0, 1] and give r ≥ 2.
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    fail(
        "config.json: field 'partial_rotary_factor': is {} (expected a number in (0, 1], so that "
        "the r = floor(d·factor) rotary dims satisfy 2 <= r <= d)",
        c.partial_rotary_factor);
  if (c.hidden_size > 0 && c.num_attention_heads > 0 && c.rotary_dim() < 2)
    fail(
        "config.json: field 'partial_rotary_factor': {} gives r = floor(d·{}) = {} rotary dims "
        "with head size d = {} (expected r >= 2)",
        c.partial_rotary_factor, c.partial_rotary_factor, c.rotary_dim(), c.head_dim());
  finite_at_most("rope_theta", c.rope_theta, 1e30, "a finite positive number");
  finite_at_most("norm_epsilon", c.norm_epsilon, 1, "a finite number in (0, 1]");

  // An upper bound on the parameter count, in floating point (the int64 products the model forms
  // stay far below 2^63 when this holds): embedding plus, per sub-layer, its widest projections.
  const double D = double(c.hidden_size), V = double(c.vocab_size);
  double params = V * D;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const double F =
        i < int64_t(c.ffn_hidden_size_list.size()) ? double(c.ffn_hidden_size_list[i]) : 0;
    const double R = i < int64_t(c.zaya_mlp_expansion.size()) ? double(c.zaya_mlp_expansion[i]) : 0;
    const double n = double(c.zaya_layers[size_t(i)]);
    params += c.is_attention(i) ? 4 * D * D : (n + 1) * (2 * D * std::max(F, 1.0) + D * R + R * R);
  }
  if (params > kParameters)
    fail(
        "config.json: the sizes give about {:.3g} parameters, more than the {:.3g} this program "
        "can "
        "hold (check hidden_size, vocab_size, zaya_layers and ffn_hidden_size_list)",
        params, kParameters);
}

}  // namespace zaya
