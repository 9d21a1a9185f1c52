// transformers' native ZAYA config.json schema (ZAYA1-8B and later; docs/checkpoint-layouts.md)
// ↔ ZayaConfig. Internal to io: zaya_config.cpp dispatches here by schema.
#pragma once
#include <nlohmann/json.hpp>

#include "io/zaya_config.h"

namespace zaya {

// True when the file uses native-only fields (layer_types, moe_intermediate_size, ...). Throws
// zaya::Error when it also uses original-only ones (mixed schemas), naming one of each.
bool is_native_schema(const nlohmann::json& j);
// Parses a native file into the internal config (semantics Native), before validate_config.
ZayaConfig native_config_from_json(const nlohmann::json& j);
// Throws zaya::Error naming the field when the native schema cannot express c (uneven experts or
// widths, an MoE-first or non-alternating stack, an odd number of sub-layers, no skip class, no
// EDA, different head counts).
void check_native_expressible(const ZayaConfig& c);
// The native file of c (semantics Native, validated).
nlohmann::json native_config_to_json(const ZayaConfig& c);
// Fields only the native schema owns: dropped from `extra` when converting to the original one.
bool native_owned_field(const std::string& key);

}  // namespace zaya
