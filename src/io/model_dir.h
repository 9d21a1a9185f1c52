// Model directories in either checkpoint layout (config.json + safetensors, one file or an index
// with shards). Everything above io sees the original tensor names only: the reader renames a
// native directory's tensors (stacked experts become per-expert views into the mapping, no copy)
// and the writer renames and stacks on the way out. The layout is the config's family
// (ZayaConfig::semantics): config.json says which a directory holds.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/zaya_config.h"

namespace zaya {

// Shards above this many bytes of tensor data (transformers' save_pretrained default, 5 GB).
constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000ull;

// The tensors of model directory `dir` whose config.json gave `c`, under original names. Throws
// zaya::Error naming the file and tensor for a stacked expert tensor of the wrong shape or two
// tensors that map to one name.
SafeTensors open_model_tensors(const std::string& dir, const ZayaConfig& c);

// The name tensor `name` (original) has in a directory of c's layout, for messages: e.g.
// "model.layers.0.mlp.experts.gate_up_proj[2]" for an expert of a native one.
std::string stored_name(const ZayaConfig& c, const std::string& name);

// Writes dir/config.json (c's schema) and the weights (c's layout, each tensor's dtype kept):
// `tensors` are (original name, data) in parameter order. Data above max_shard_bytes goes to
// model-0000K-of-0000N.safetensors shards with model.safetensors.index.json; otherwise one
// model.safetensors. Creates dir; replaces the files it writes.
void save_model_dir(const std::string& dir, const ZayaConfig& c,
                    const std::vector<std::pair<std::string, Tensor>>& tensors,
                    uint64_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace zaya
