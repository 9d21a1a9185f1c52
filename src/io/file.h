// File helpers with user-facing errors (zaya::Error naming the path): whole-file reads, read-only
// mappings, checksums, and the errno / hex formatting every reader and writer shares.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace zaya {

// Reads `path` whole; `what` names the file's role in the error ("token file", "config file").
std::string read_text_file(const std::string& path, std::string_view what);
// Writes `text` to `path` atomically (temporary file + rename); zaya::Error naming the path.
void write_text_file_atomic(const std::string& path, const std::string& text);

// strerror(errno) as a string (call it before anything else can touch errno).
std::string errno_str();

// 16 lowercase hex digits (checksums in manifests and messages).
std::string hex64(uint64_t x);

// A whole regular file mapped read-only (MAP_PRIVATE); shared ownership keeps the mapping alive
// while views of it are in use. An empty file maps to data() == nullptr, size() == 0.
class MappedFile {
 public:
  // `what` names the file's role in errors ("safetensors file", "token shard").
  static MappedFile open(const std::string& path, std::string_view what);
  const unsigned char* data() const { return map_ ? map_->addr : nullptr; }
  size_t size() const { return map_ ? map_->size : 0; }
  const std::string& path() const { return path_; }

 private:
  struct Mapping {
    unsigned char* addr = nullptr;
    size_t size = 0;
    ~Mapping();
  };
  std::shared_ptr<Mapping> map_;
  std::string path_;
};

// XXH3-64 of a whole file, read through a mapping (madvise sequential); with `sync` the file is
// fsynced first. `bytes` receives its size when given.
uint64_t file_xxh3(const std::string& path, bool sync = false, uint64_t* bytes = nullptr);

}  // namespace zaya
