// Token shards (docs/cli.md) and the dataset manifest that lists them.
//
// Shard file, little-endian, 64-byte header then the payload:
//   offset  0  char[8]  magic "ZAYATOK1"
//           8  u32      version (kShardVersion = 1)
//          12  u32      vocab size (every token < vocab size)
//          16  u64      token count N
//          24  u64      checksum: XXH3_64bits of the N·4 payload bytes
//          32  u8[32]   reserved, zero
//          64  u32[N]   tokens; documents separated by the tokenizer's EOS
// Shards are written under "<path>.tmp" and renamed when complete, so a shard that exists is
// whole. Reading maps the file read-only and validates it (magic, version, size, token range,
// checksum): every defect throws zaya::Error naming the file.
//
// A dataset directory (written by `zaya data prepare`, read by TokenLoader) holds
// train_000000.bin …, val_000000.bin … and dataset.json:
//   {"format": "zaya-token-shards", "version": 1, "vocab_size": V, "eos_id": E, "bos_id": B|-1,
//    "tokenizer": {"path": …, "xxh3": "<hex>"}, "files": n, "val_fraction": f,
//    "documents": D, "cut_documents": c, "cut_bytes": b,
//    "splits": {"train": {"documents": d, "tokens": t,
//                         "shards": [{"file": "train_000000.bin", "tokens": n,
//                                     "xxh3": "<hex>"}, …]},
//               "val": {…}}}
// A split's token stream is the concatenation of its shards in order (documents may span a
// shard boundary). D counts the input documents, c those cut by token range between the splits
// (data/prepare.h; each part counts among its split's d), b the text size over which a document is
// cut (0: none). D, c and b were added within version 1: a manifest without them reads as 0 (it
// was written before cutting existed, by whole documents).
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/enum_words.h"
#include "io/file.h"

namespace zaya {

// The splits a dataset may hold ("splits" in dataset.json).
enum class DataSplit { Train, Val };
template <>
struct EnumWords<DataSplit> {
  static constexpr std::pair<DataSplit, std::string_view> words[] = {{DataSplit::Train, "train"},
                                                                     {DataSplit::Val, "val"}};
};

inline constexpr char kShardMagic[9] = "ZAYATOK1";
inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderBytes = 64;
inline constexpr const char* kManifestName = "dataset.json";

// XXH3_64bits of a token payload (as stored: little-endian u32).
uint64_t token_checksum(const uint32_t* tokens, size_t n);
// XXH3_64bits of a whole file (e.g. the tokenizer recorded in the manifest).
uint64_t file_checksum(const std::string& path);

// Streams tokens into one shard file: header placeholder, payload, then the real header; the
// file appears under its final name only after close().
class ShardWriter {
 public:
  ShardWriter(const std::string& path, uint32_t vocab_size);
  ~ShardWriter();  // abandons (removes the temporary) unless close() succeeded
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Tokens must be < vocab_size (checked: a bug in the caller otherwise).
  void append(const uint32_t* tokens, size_t n);
  void close();  // writes the header, fsyncs, renames; throws Error on I/O failure
  uint64_t tokens() const { return count_; }
  uint64_t checksum() const;  // of what was appended so far
  const std::string& path() const { return path_; }

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::unique_ptr<FileWriter> file_;  // null once closed
  std::string path_;
  uint32_t vocab_size_;
  uint64_t count_ = 0;
};

// Writes a whole shard in one call.
void write_shard(const std::string& path, std::span<const uint32_t> tokens, uint32_t vocab_size);

// A read-only mapping of one validated shard.
class ShardFile {
 public:
  // verify = false skips the payload scan (checksum and token range) and checks the header and
  // file size only.
  static ShardFile open(const std::string& path, bool verify = true);

  const uint32_t* tokens() const { return tokens_; }
  int64_t size() const { return int64_t(count_); }
  uint32_t vocab_size() const { return vocab_size_; }
  uint64_t checksum() const { return checksum_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile file_;
  const uint32_t* tokens_ = nullptr;
  uint64_t count_ = 0, checksum_ = 0;
  uint32_t vocab_size_ = 0;
  std::string path_;
};

struct ShardEntry {
  std::string file;  // name inside the dataset directory
  int64_t tokens = 0;
  uint64_t checksum = 0;
};
struct SplitInfo {
  int64_t documents = 0, tokens = 0;
  std::vector<ShardEntry> shards;
};
struct DatasetManifest {
  int64_t vocab_size = 0;
  int32_t eos_id = -1, bos_id = -1;  // bos_id -1: documents carry no BOS
  std::string tokenizer_path, tokenizer_xxh3;
  int64_t files = 0;
  double val_fraction = 0;
  int64_t documents = 0, cut_documents = 0, cut_bytes = 0;  // 0 in an older manifest
  std::map<std::string, SplitInfo> splits;                  // "train", "val"
};

// dir/dataset.json, validated (types, counts consistent with the shard list); throws Error.
DatasetManifest read_manifest(const std::string& dir);
// Writes dir/dataset.json atomically.
void write_manifest(const std::string& dir, const DatasetManifest& m);

}  // namespace zaya
