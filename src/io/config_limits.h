// The bounds on config.json sizes (what this program can represent and allocate), checked before
// any product of them is formed: validate_config calls check_config_limits first, so a hostile
// config (hidden_size 1e12, 1e9 experts, partial_rotary_factor 1e300) is a clear error naming the
// field and the limit, never an overflow, an abort or a runaway allocation.
#pragma once
#include <cstdint>

namespace zaya {

struct ZayaConfig;

namespace config_limits {
inline constexpr int64_t kHiddenSize = int64_t(1) << 20;
inline constexpr int64_t kVocabSize = int64_t(1) << 31;  // token ids are int32
inline constexpr int64_t kHeads = 4096;
inline constexpr int64_t kLayers = 4096;
inline constexpr int64_t kExperts = 4096;  // per MoE sub-layer
inline constexpr int64_t kFfnHidden = int64_t(1) << 22;
inline constexpr int64_t kRouterWidth = int64_t(1) << 16;
inline constexpr int64_t kPositions = int64_t(1) << 31;          // max_position_embeddings
inline constexpr double kParameters = double(int64_t(1) << 40);  // about 1.1e12
}  // namespace config_limits

// Throws zaya::Error "config.json: field 'X': is V (the limit is L ...)".
void check_config_limits(const ZayaConfig& c);

}  // namespace zaya
