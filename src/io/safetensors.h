// safetensors: reading (mmap; single file or model.safetensors.index.json + shards) and writing.
// Format: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the data block. Every malformed input throws zaya::Error naming the file and the problem.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace zaya {

struct SafeTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // into the mapping (may be unaligned if the writer did not pad)
  size_t nbytes = 0;
  std::string file;  // the file holding it (for messages)
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// A set of tensors from one file or from an index + shards. Owns the mappings.
class SafeTensors {
 public:
  // One .safetensors file.
  static SafeTensors open_file(const std::string& path);
  // A model directory: model.safetensors, else model.safetensors.index.json + its shards.
  static SafeTensors open_dir(const std::string& dir);

  const SafeTensorInfo* find(const std::string& name) const;  // nullptr if absent
  const SafeTensorInfo& at(const std::string& name) const;    // throws Error if absent
  std::vector<std::string> names() const;                     // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t size() const { return tensors_.size(); }
  const std::string& source() const { return source_; }  // the file or directory opened

  // Copies tensor `name` into dst (F32 or F64), converting from F32/F64/BF16/F16; throws Error
  // when it is missing, not a float dtype, or its shape differs from dst's.
  void read_into(const std::string& name, const Tensor& dst) const;

  // A set sharing this one's mappings whose tensors are `infos` (renamed entries, or slices of
  // entries, of this set: their data must lie in its mappings). `source` names it in messages.
  SafeTensors with_tensors(std::vector<SafeTensorInfo> infos, std::string source) const;

 private:
  struct Mapping;
  std::vector<std::shared_ptr<Mapping>> maps_;
  std::map<std::string, SafeTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::string source_;  // the file or directory opened (for messages)
  void add_file(const std::string& path);
};

// Writes tensors (any dtype; data copied as stored) in the given order to `path` atomically
// (temporary file + rename). Throws Error on I/O failure.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The bytes save_safetensors(path, tensors, metadata) writes (only the shapes and dtypes are read:
// the tensors need no data). extra_header_bytes: header bytes beyond `metadata`'s (a caller that
// sizes many files with one long metadata value passes it empty and adds its length here).
uint64_t safetensors_file_bytes(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                const std::map<std::string, std::string>& metadata = {},
                                uint64_t extra_header_bytes = 0);

}  // namespace zaya
