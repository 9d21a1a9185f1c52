// data/shards: write/read round trip, header layout, and every kind of corruption.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/shards.h"
#include "io/file.h"
#include "test_util.h"

using namespace zaya;
using zaya::test::expect_error;
using zaya::test::ScratchDir;

namespace {

std::vector<uint32_t> ramp(size_t n, uint32_t vocab) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint32_t((i * 7919 + 3) % vocab);
  return v;
}

std::string read_bytes(const std::string& path) {
  return read_text_file(path, "test file");
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

TEST(Shards, RoundTrip) {
  ScratchDir dir;
  const auto tokens = ramp(1000, 321);
  write_shard(dir / "a.bin", tokens, 321);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.bin.tmp"));
  ShardFile f = ShardFile::open(dir / "a.bin");
  ASSERT_EQ(f.size(), 1000);
  EXPECT_EQ(f.vocab_size(), 321u);
  EXPECT_EQ(f.checksum(), token_checksum(tokens.data(), tokens.size()));
  EXPECT_EQ(std::memcmp(f.tokens(), tokens.data(), tokens.size() * 4), 0);
  EXPECT_EQ(uintptr_t(f.tokens()) % 64, 0u);  // the payload starts after the 64-byte header
}

TEST(Shards, HeaderLayoutIsLittleEndian) {
  ScratchDir dir;
  const std::vector<uint32_t> tokens = {1, 2, 0x01020304 % 1000};
  write_shard(dir / "a.bin", tokens, 1000);
  const std::string b = read_bytes(dir / "a.bin");
  ASSERT_EQ(b.size(), 64u + 12u);
  EXPECT_EQ(b.substr(0, 8), "ZAYATOK1");
  auto u = [&](size_t off, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | uint8_t(b[off + i]);
    return v;
  };
  EXPECT_EQ(u(8, 4), 1u);      // version
  EXPECT_EQ(u(12, 4), 1000u);  // vocab
  EXPECT_EQ(u(16, 8), 3u);     // tokens
  EXPECT_EQ(u(24, 8), token_checksum(tokens.data(), 3));
  for (size_t i = 32; i < 64; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(u(64, 4), 1u);
  EXPECT_EQ(u(68, 4), 2u);
}

TEST(Shards, EmptyShard) {
  ScratchDir dir;
  write_shard(dir / "e.bin", {}, 10);
  EXPECT_EQ(ShardFile::open(dir / "e.bin").size(), 0);
}

TEST(Shards, StreamingWriterMatchesOneShot) {
  ScratchDir dir;
  const auto tokens = ramp(5000, 50000);
  write_shard(dir / "one.bin", tokens, 50000);
  {
    ShardWriter w(dir / "two.bin", 50000);
    for (size_t i = 0; i < tokens.size(); i += 333)
      w.append(tokens.data() + i, std::min<size_t>(333, tokens.size() - i));
    EXPECT_EQ(w.tokens(), 5000u);
    w.close();
  }
  EXPECT_EQ(read_bytes(dir / "one.bin"), read_bytes(dir / "two.bin"));
}

TEST(Shards, AbandonedWriterLeavesNothing) {
  ScratchDir dir;
  {
    ShardWriter w(dir / "x.bin", 10);
    const uint32_t t[2] = {1, 2};
    w.append(t, 2);
  }  // never closed
  EXPECT_FALSE(std::filesystem::exists(dir / "x.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.bin.tmp"));
}

TEST(Shards, FlippedPayloadByteIsAChecksumError) {
  ScratchDir dir;
  write_shard(dir / "a.bin", ramp(100, 1000), 1000);
  std::string b = read_bytes(dir / "a.bin");
  b[64 + 4 * 50] ^= 0x01;  // token 50 changes by ±1 and stays inside the vocabulary
  write_bytes(dir / "a.bin", b);
  expect_error([&] { ShardFile::open(dir / "a.bin"); }, {dir / "a.bin", "checksum mismatch"});
  // Header-only open does not scan the payload.
  EXPECT_EQ(ShardFile::open(dir / "a.bin", /*verify=*/false).size(), 100);
}

TEST(Shards, TruncatedAndTrailingBytes) {
  ScratchDir dir;
  write_shard(dir / "a.bin", ramp(100, 1000), 1000);
  const std::string b = read_bytes(dir / "a.bin");
  write_bytes(dir / "t.bin", b.substr(0, b.size() - 6));
  expect_error([&] { ShardFile::open(dir / "t.bin"); }, {dir / "t.bin", "truncated"});
  write_bytes(dir / "h.bin", b.substr(0, 40));
  expect_error([&] { ShardFile::open(dir / "h.bin"); }, {dir / "h.bin", "header"});
  write_bytes(dir / "x.bin", b + "abcd");
  expect_error([&] { ShardFile::open(dir / "x.bin"); }, {dir / "x.bin", "trailing"});
}

TEST(Shards, BadMagicWrongVersionBadVocab) {
  ScratchDir dir;
  write_shard(dir / "a.bin", ramp(10, 1000), 1000);
  const std::string b = read_bytes(dir / "a.bin");
  std::string m = b;
  m[0] = 'X';
  write_bytes(dir / "m.bin", m);
  expect_error([&] { ShardFile::open(dir / "m.bin"); }, {dir / "m.bin", "bad magic"});
  std::string v = b;
  v[8] = 2;
  write_bytes(dir / "v.bin", v);
  expect_error([&] { ShardFile::open(dir / "v.bin"); }, {dir / "v.bin", "version 2"});
  std::string z = b;
  std::memset(z.data() + 12, 0, 4);
  write_bytes(dir / "z.bin", z);
  expect_error([&] { ShardFile::open(dir / "z.bin"); }, {dir / "z.bin", "vocab size 0"});
  expect_error([&] { ShardFile::open(dir / "missing.bin"); }, {dir / "missing.bin", "cannot open"});
}

TEST(Shards, TokenOutsideVocabWithValidChecksum) {
  ScratchDir dir;
  write_shard(dir / "a.bin", ramp(10, 1000), 1000);
  std::string b = read_bytes(dir / "a.bin");
  b[12] = char(5), b[13] = 0;  // header now claims vocab 5: tokens ≥ 5 are out of range
  write_bytes(dir / "a.bin", b);
  expect_error([&] { ShardFile::open(dir / "a.bin"); }, {dir / "a.bin", "outside the vocabulary"});
}

// A manifest written before documents were cut (no documents/cut_* keys) still reads.
TEST(Manifest, OlderManifestWithoutCutKeysReads) {
  ScratchDir dir;
  write_bytes(dir / "dataset.json", R"({"format": "zaya-token-shards", "version": 1,
    "vocab_size": 100, "eos_id": 1, "bos_id": 2, "files": 1, "val_fraction": 0.05,
    "tokenizer": {"path": "/t.json", "xxh3": "00000000000000ff"},
    "splits": {"train": {"documents": 1, "tokens": 0, "shards": []}}})");
  const DatasetManifest m = read_manifest(dir.path);
  EXPECT_EQ(m.documents, 0);
  EXPECT_EQ(m.cut_documents, 0);
  EXPECT_EQ(m.cut_bytes, 0);
  EXPECT_EQ(m.val_fraction, 0.05);
  EXPECT_EQ(m.splits.at("train").documents, 1);
}

TEST(Manifest, RoundTripAndValidation) {
  ScratchDir dir;
  DatasetManifest m;
  m.vocab_size = 100;
  m.eos_id = 1;
  m.bos_id = 2;
  m.tokenizer_path = "/x/tokenizer.json";
  m.tokenizer_xxh3 = hex64(42);
  m.files = 3;
  m.val_fraction = 0.25;
  m.splits["train"] = {
      5, 30, {{"train_000000.bin", 20, 0xdeadbeefcafef00dull}, {"train_000001.bin", 10, 7}}};
  write_manifest(dir.path, m);
  DatasetManifest r = read_manifest(dir.path);
  EXPECT_EQ(r.vocab_size, 100);
  EXPECT_EQ(r.eos_id, 1);
  EXPECT_EQ(r.bos_id, 2);
  EXPECT_EQ(r.tokenizer_path, m.tokenizer_path);
  EXPECT_EQ(r.tokenizer_xxh3, "000000000000002a");
  ASSERT_EQ(r.splits.at("train").shards.size(), 2u);
  EXPECT_EQ(r.splits.at("train").shards[0].checksum, 0xdeadbeefcafef00dull);
  EXPECT_EQ(r.splits.at("train").documents, 5);
  EXPECT_EQ(r.documents, 0);  // not set: written as 0
  m.documents = 7;
  m.cut_documents = 1;
  m.cut_bytes = 4096;
  write_manifest(dir.path, m);
  r = read_manifest(dir.path);
  EXPECT_EQ(r.documents, 7);
  EXPECT_EQ(r.cut_documents, 1);
  EXPECT_EQ(r.cut_bytes, 4096);

  m.splits["train"].tokens = 31;  // disagrees with its shards
  write_manifest(dir.path, m);
  expect_error([&] { read_manifest(dir.path); }, {"dataset.json", "31 tokens"});
  write_bytes(dir / "dataset.json", "{\"format\": ");
  expect_error([&] { read_manifest(dir.path); }, {"dataset.json", "not valid JSON"});
  write_bytes(dir / "dataset.json", R"({"format": "zaya-token-shards", "version": 1})");
  expect_error([&] { read_manifest(dir.path); }, {"dataset.json", "malformed"});
  ScratchDir empty;
  expect_error([&] { read_manifest(empty.path); }, {empty.path, "no dataset.json"});
}
