// A checkpoint's manifest.json: every file of the directory with its size and XXH3-64, written
// last, so a checkpoint is complete exactly when its manifest is in place and every file it lists
// verifies (checkpoint.h: verify_checkpoint).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zaya {

inline constexpr const char* kManifest = "manifest.json";

struct FileDigest {
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
};

// Size and XXH3-64 of a whole file (read through a mapping). With `sync`, also fsyncs it.
// Throws zaya::Error naming the file when it cannot be read.
FileDigest digest_file(const std::string& path, bool sync);

// Writes dir/manifest.json listing every file under dir (fsynced, hashed); `step` and `world`
// are recorded with them.
void write_manifest(const std::string& dir, int64_t step, int world);

// Parses dir/manifest.json into (relative path, expected digest) pairs; "" or why it is bad
// (missing: a torn checkpoint; malformed; a path outside the directory; a required file not
// listed).
std::string read_manifest(const std::string& dir,
                          std::vector<std::pair<std::string, FileDigest>>& files);

}  // namespace zaya
