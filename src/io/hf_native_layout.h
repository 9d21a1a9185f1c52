// The one map between the original ZAYA tensor names (Zyphra's fork, ZAYA1-base; docs/model.md §2:
// one entry per sub-layer, per-expert tensors) and transformers' native ones (ZAYA1-8B: one decoder
// layer per attention + MoE pair, experts stacked). Used by the reader (open_model_tensors) and
// the writer (save_model_dir) alike; docs/checkpoint-layouts.md prints the same table.
//
// Pair p holds original sub-layers 2p (attention) and 2p+1 (MoE). A residual scale is named after
// the mixer output it merges: original sub-layer i's res_scale merges sub-layer i−1's output, so
//   layers.{2p+1}.res_scale.*  ↔  layers.{p}.post_attention_residual_scale.*
//   layers.{2p+2}.res_scale.*  ↔  layers.{p}.post_mlp_residual_scale.*   (model.res_scale.* for the
//                                                                         last pair)
//   layers.0.res_scale.hidden_states_{scale,bias}  ↔  model.input_hidden_states_{scale,bias}
// Experts: local_experts.{e}.linear_fc1.weight [2I, D] = gate_up_proj[e] of [E, 2I, D] (gate rows
// first in both), local_experts.{e}.linear_fc2.weight [D, I] = down_proj[e] of [E, D, I].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

// One native tensor, or slice `expert` (≥ 0) of a stacked [E, …] one.
struct NativeRef {
  std::string name;
  int64_t expert = -1;
};

// The native name of original tensor `name` in a stack of `num_sublayers` sub-layers (even).
// Names it does not know (e.g. lm_head.weight) map to themselves.
NativeRef native_ref(const std::string& name, int64_t num_sublayers);
// The inverse: the original name of native tensor `name` (slice `expert` of a stacked expert
// tensor; -1 otherwise). Names it does not know map to themselves.
std::string original_name(const std::string& name, int64_t num_sublayers, int64_t expert = -1);
// True for the two stacked expert tensors (…mlp.experts.gate_up_proj / …down_proj).
bool is_stacked_expert(const std::string& native_name);

// The legacy original layout (ZAYA1-74B-preview-legacy) names the MoE block `smoe_block` where
// ZAYA1-base names it `zaya_block`: model.layers.{i}.smoe_block.router.* and
// model.layers.{i}.smoe_block.experts.local_experts.{e}.linear_fc{1,2}.weight; every other name is
// the same. legacy_name maps an original name to it, original_from_legacy back; other names map to
// themselves.
std::string legacy_name(const std::string& original);
std::string original_from_legacy(const std::string& legacy);

// The map as rows (original pattern, native pattern) for documentation and tests.
std::vector<std::pair<std::string, std::string>> native_name_table();

}  // namespace zaya
