// Token shards and the dataset manifest (shards.h): writing a shard through a temporary file with
// a streaming XXH3, mapping one read-only and checking its header, and the manifest JSON.
#include "data/shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya {

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian; this build assumes a little-endian host");

using json = nlohmann::json;

namespace {

void put_u32(unsigned char* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
void put_u64(unsigned char* p, uint64_t v) {
  std::memcpy(p, &v, 8);
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

uint64_t token_checksum(const uint32_t* tokens, size_t n) {
  return XXH3_64bits(tokens, n * sizeof(uint32_t));
}

uint64_t file_checksum(const std::string& path) {
  return file_xxh3(path);
}

// ---- writing ----

struct ShardWriter::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

ShardWriter::ShardWriter(const std::string& path, uint32_t vocab_size)
    : s_(std::make_unique<State>()),
      file_(std::make_unique<FileWriter>(path)),
      path_(path),
      vocab_size_(vocab_size) {
  ZAYA_ASSERT(s_->xxh != nullptr, "XXH3_createState failed");
  XXH3_64bits_reset(s_->xxh);
  const unsigned char zeros[kShardHeaderBytes] = {};
  file_->write(zeros, sizeof zeros);
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::append(const uint32_t* tokens, size_t n) {
  ZAYA_ASSERT(file_ != nullptr, "append to a closed shard {}", path_);
  for (size_t i = 0; i < n; ++i)
    ZAYA_ASSERT(tokens[i] < vocab_size_, "token {} >= vocab size {} written to {}", tokens[i],
                vocab_size_, path_);
  if (n == 0) return;
  file_->write(tokens, n * sizeof(uint32_t));
  XXH3_64bits_update(s_->xxh, tokens, n * sizeof(uint32_t));
  count_ += n;
}

uint64_t ShardWriter::checksum() const {
  return XXH3_64bits_digest(s_->xxh);
}

void ShardWriter::close() {
  ZAYA_ASSERT(file_ != nullptr, "shard {} closed twice", path_);
  unsigned char header[kShardHeaderBytes] = {};
  std::memcpy(header, kShardMagic, 8);
  put_u32(header + 8, kShardVersion);
  put_u32(header + 12, vocab_size_);
  put_u64(header + 16, count_);
  put_u64(header + 24, checksum());
  file_->seek(0);
  file_->write(header, sizeof header);
  file_->commit();
  file_.reset();
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens, uint32_t vocab_size) {
  ShardWriter w(path, vocab_size);
  w.append(tokens.data(), tokens.size());
  w.close();
}

// ---- reading ----

ShardFile ShardFile::open(const std::string& path, bool verify) {
  ShardFile s;
  s.path_ = path;
  s.file_ = MappedFile::open(path, "token shard");
  const uint64_t file_size = s.file_.size();
  if (file_size < kShardHeaderBytes)
    fail("{}: {} bytes, shorter than the {}-byte token shard header (truncated or not a shard)",
         path, file_size, kShardHeaderBytes);
  const unsigned char* h = s.file_.data();
  if (std::memcmp(h, kShardMagic, 8) != 0)
    fail("{}: bad magic (not a zaya token shard; expected \"{}\")", path, kShardMagic);
  const uint32_t version = get_u32(h + 8);
  if (version != kShardVersion)
    fail(
        "{}: token shard version {} is not supported (this zaya reads version {}); re-run "
        "`zaya data prepare`",
        path, version, kShardVersion);
  s.vocab_size_ = get_u32(h + 12);
  s.count_ = get_u64(h + 16);
  s.checksum_ = get_u64(h + 24);
  if (s.vocab_size_ == 0 || s.vocab_size_ > uint32_t(INT32_MAX))
    fail("{}: vocab size {} in the header is out of range", path, s.vocab_size_);
  const uint64_t payload = file_size - kShardHeaderBytes;
  if (s.count_ > payload / 4 || payload != s.count_ * 4)
    fail("{}: header says {} tokens ({} bytes) but the file holds {} payload bytes ({})", path,
         s.count_, s.count_ * 4, payload, payload < s.count_ * 4 ? "truncated" : "trailing bytes");
  s.tokens_ = reinterpret_cast<const uint32_t*>(h + kShardHeaderBytes);
  if (verify) {
    const uint64_t sum = token_checksum(s.tokens_, s.count_);
    if (sum != s.checksum_)
      fail(
          "{}: checksum mismatch (header {}, payload {}): the shard is corrupted; re-run "
          "`zaya data prepare`",
          path, hex64(s.checksum_), hex64(sum));
    uint32_t max_token = 0;
    for (uint64_t i = 0; i < s.count_; ++i) max_token = std::max(max_token, s.tokens_[i]);
    if (s.count_ > 0 && max_token >= s.vocab_size_)
      fail("{}: token {} is outside the vocabulary of {}", path, max_token, s.vocab_size_);
  }
  return s;
}

// ---- manifest ----

DatasetManifest read_manifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  if (!std::filesystem::exists(path))
    fail("{}: no {} (is this a dataset directory written by `zaya data prepare`?)", dir,
         kManifestName);
  json j;
  try {
    j = parse_json(read_text_file(path, "dataset manifest"));
  } catch (const JsonError& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  DatasetManifest m;
  try {
    if (j.value("format", std::string()) != "zaya-token-shards")
      fail("{}: \"format\" is not \"zaya-token-shards\"", path);
    if (j.at("version").get<int>() != 1)
      fail("{}: manifest version {} is not supported (expected 1)", path,
           j.at("version").get<int>());
    m.vocab_size = j.at("vocab_size").get<int64_t>();
    m.eos_id = j.at("eos_id").get<int32_t>();
    m.bos_id = j.value("bos_id", -1);
    if (j.contains("tokenizer")) {
      m.tokenizer_path = j["tokenizer"].value("path", std::string());
      m.tokenizer_xxh3 = j["tokenizer"].value("xxh3", std::string());
    }
    m.files = j.value("files", int64_t(0));
    m.val_fraction = j.value("val_fraction", 0.0);
    m.documents = j.value("documents", int64_t(0));
    m.cut_documents = j.value("cut_documents", int64_t(0));
    m.cut_bytes = j.value("cut_bytes", int64_t(0));
    for (const auto& [name, sj] : j.at("splits").items()) {
      SplitInfo s;
      s.documents = sj.at("documents").get<int64_t>();
      s.tokens = sj.at("tokens").get<int64_t>();
      int64_t sum = 0;
      for (const auto& e : sj.at("shards")) {
        ShardEntry se;
        se.file = e.at("file").get<std::string>();
        se.tokens = e.at("tokens").get<int64_t>();
        const std::string hex = e.at("xxh3").get<std::string>();
        se.checksum = std::stoull(hex, nullptr, 16);
        if (se.file.empty() || se.file.find('/') != std::string::npos)
          fail("{}: shard file name \"{}\" must be a plain name inside the directory", path,
               se.file);
        sum += se.tokens;
        s.shards.push_back(std::move(se));
      }
      if (sum != s.tokens)
        fail("{}: split \"{}\" lists {} tokens but its shards hold {}", path, name, s.tokens, sum);
      m.splits[name] = std::move(s);
    }
  } catch (const json::exception& e) {
    fail("{}: malformed manifest: {}", path, e.what());
  } catch (const std::logic_error& e) {  // stoull
    fail("{}: malformed shard checksum: {}", path, e.what());
  }
  if (m.vocab_size <= 0 || m.vocab_size > INT32_MAX)
    fail("{}: vocab_size {} is out of range", path, m.vocab_size);
  if (m.eos_id < 0 || m.eos_id >= m.vocab_size)
    fail("{}: eos_id {} is outside the vocabulary of {}", path, m.eos_id, m.vocab_size);
  return m;
}

void write_manifest(const std::string& dir, const DatasetManifest& m) {
  json j;
  j["format"] = "zaya-token-shards";
  j["version"] = 1;
  j["vocab_size"] = m.vocab_size;
  j["eos_id"] = m.eos_id;
  j["bos_id"] = m.bos_id;
  j["tokenizer"] = {{"path", m.tokenizer_path}, {"xxh3", m.tokenizer_xxh3}};
  j["files"] = m.files;
  j["val_fraction"] = m.val_fraction;
  j["documents"] = m.documents;
  j["cut_documents"] = m.cut_documents;
  j["cut_bytes"] = m.cut_bytes;
  json splits = json::object();
  for (const auto& [name, s] : m.splits) {
    json shards = json::array();
    for (const ShardEntry& e : s.shards)
      shards.push_back({{"file", e.file}, {"tokens", e.tokens}, {"xxh3", hex64(e.checksum)}});
    splits[name] = {{"documents", s.documents}, {"tokens", s.tokens}, {"shards", shards}};
  }
  j["splits"] = splits;
  write_file(dir + "/" + kManifestName, j.dump(2) + "\n");
}

}  // namespace zaya
