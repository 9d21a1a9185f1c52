// data/prepare: a temporary corpus through a fake tokenizer (byte b → id b + 3; EOS 1, BOS 2):
// identical bytes for any thread count, EOS-separated documents, a non-empty disjoint val split
// (whole small documents by hash; large ones cut by token range, as for a single text file),
// the small-split warning, JSON Lines parsing and every input error.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "data/loader.h"
#include "data/prepare.h"
#include "data/shards.h"
#include "io/file.h"
#include "test_util.h"

using namespace zaya;
using zaya::test::expect_error;
using zaya::test::ScratchDir;

namespace {

constexpr int32_t kEos = 1, kBos = 2;
constexpr int64_t kVocab = 259;

std::vector<int32_t> fake_encode(std::string_view text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(int32_t(c) + 3);
  return ids;
}

std::string decode(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += char(id - 3);
  return s;
}

// A corpus: 40 text files (one empty) and two JSON Lines files.
std::vector<std::string> make_corpus(const ScratchDir& dir) {
  std::filesystem::create_directories(dir / "in");
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) {
    std::string text = i == 7 ? "" : fmt::format("document {} says {}\n", i, std::string(i, 'x'));
    write_file(dir / fmt::format("in/doc_{:03}.txt", i), text);
    if (!text.empty()) docs.push_back(text);
  }
  std::string jl;
  for (int i = 0; i < 30; ++i) {
    const std::string text = fmt::format("line {}\nwith \"quotes\" and ünïcode {}", i, i * i);
    jl += nlohmann::json{{"text", text}, {"id", i}}.dump() + "\n";
    if (i == 10) jl += "   \n";  // blank lines are skipped
    docs.push_back(text);
  }
  write_file(dir / "in/part_a.jsonl", jl);
  write_file(dir / "in/part_b.jsonl", R"({"text": "last one, no newline"})");
  docs.push_back("last one, no newline");
  return docs;
}

PrepareOptions options(const ScratchDir& dir, const std::string& out, int threads) {
  PrepareOptions o;
  o.inputs = {dir / "in/*.txt", dir / "in/*.jsonl"};
  o.out_dir = dir / out;
  o.vocab_size = kVocab;
  o.eos_id = kEos;
  o.bos_id = kBos;
  o.val_fraction = 0.2;
  o.shard_tokens = 700;
  o.threads = threads;
  o.quiet = true;
  return o;
}

// A split's whole token stream.
std::vector<uint32_t> read_split(const std::string& dir, const std::string& split) {
  const DatasetManifest m = read_manifest(dir);
  std::vector<uint32_t> all;
  for (const ShardEntry& e : m.splits.at(split).shards) {
    ShardFile f = ShardFile::open(dir + "/" + e.file);
    EXPECT_EQ(f.size(), e.tokens);
    all.insert(all.end(), f.tokens(), f.tokens() + f.size());
  }
  return all;
}

// Splits a stream into documents: each must be BOS … EOS.
std::vector<std::string> documents(const std::vector<uint32_t>& stream) {
  std::vector<std::string> docs;
  std::vector<uint32_t> cur;
  for (uint32_t t : stream) {
    if (t == uint32_t(kEos)) {
      EXPECT_FALSE(cur.empty());
      EXPECT_EQ(cur.front(), uint32_t(kBos));
      docs.push_back(decode({cur.begin() + 1, cur.end()}));
      cur.clear();
    } else {
      cur.push_back(t);
    }
  }
  EXPECT_TRUE(cur.empty()) << "the stream must end with EOS";
  return docs;
}

std::map<std::string, std::string> dir_bytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files[e.path().filename().string()] = read_text_file(e.path().string(), "output");
  return files;
}

}  // namespace

TEST(Prepare, SameBytesForAnyThreadCount) {
  ScratchDir dir;
  make_corpus(dir);
  const PrepareStats s1 = prepare_shards(options(dir, "out1", 1), fake_encode);
  const PrepareStats s2 = prepare_shards(options(dir, "out2", 2), fake_encode);
  const PrepareStats s3 = prepare_shards(options(dir, "out3", 3), fake_encode);
  EXPECT_GT(s1.train_shards, 2);  // shard rolling is exercised
  const auto a = dir_bytes(dir / "out1");
  EXPECT_EQ(a, dir_bytes(dir / "out2"));
  EXPECT_EQ(a, dir_bytes(dir / "out3"));
  EXPECT_EQ(s1.train_tokens, s2.train_tokens);
  EXPECT_EQ(s1.val_documents, s3.val_documents);
}

TEST(Prepare, DocumentsAreEosSeparatedAndSplitDisjointly) {
  ScratchDir dir;
  const std::vector<std::string> docs = make_corpus(dir);
  const PrepareStats s = prepare_shards(options(dir, "out", 2), fake_encode);
  EXPECT_EQ(s.files, 42);
  EXPECT_EQ(s.documents, int64_t(docs.size()));
  EXPECT_EQ(s.empty_documents, 1);

  const auto train = documents(read_split(dir / "out", "train"));
  const auto val = documents(read_split(dir / "out", "val"));
  EXPECT_EQ(int64_t(train.size()), s.train_documents);
  EXPECT_EQ(int64_t(val.size()), s.val_documents);
  EXPECT_GT(val.size(), 0u);
  EXPECT_GT(train.size(), val.size());
  std::multiset<std::string> got(train.begin(), train.end());
  for (const auto& d : val) {
    EXPECT_EQ(std::count(train.begin(), train.end(), d), 0) << "in both splits: " << d;
    got.insert(d);
  }
  EXPECT_EQ(got, std::multiset<std::string>(docs.begin(), docs.end()));
  // Input order is kept inside each split.
  std::vector<std::string> expected_train;
  for (const auto& d : docs)
    if (std::find(val.begin(), val.end(), d) == val.end()) expected_train.push_back(d);
  EXPECT_EQ(train, expected_train);

  const DatasetManifest m = read_manifest(dir / "out");
  EXPECT_EQ(m.vocab_size, kVocab);
  EXPECT_EQ(m.eos_id, kEos);
  EXPECT_EQ(m.bos_id, kBos);
  EXPECT_EQ(m.files, 42);
  EXPECT_EQ(m.splits.at("train").tokens, s.train_tokens);
  EXPECT_EQ(m.splits.at("val").documents, s.val_documents);
  // Small documents go whole: none is cut.
  EXPECT_EQ(s.cut_documents, 0);
  EXPECT_EQ(m.cut_documents, 0);
  EXPECT_EQ(m.documents, s.documents);
  EXPECT_GT(m.cut_bytes, 0);
}

TEST(Prepare, SmallCorpusStillGetsAValDocument) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "in");
  write_file(dir / "in/a.txt", "alpha");
  write_file(dir / "in/b.txt", "beta");
  PrepareOptions o = options(dir, "out", 2);
  o.inputs = {dir / "in/*.txt"};
  o.val_fraction = 0.005;
  const PrepareStats s = prepare_shards(o, fake_encode);
  EXPECT_EQ(s.train_documents, 1);
  EXPECT_EQ(s.val_documents, 1);
  EXPECT_EQ(s.cut_documents, 0);  // two documents: one moves over whole
  // One short document: it is cut, its last token to val, even at a tiny fraction.
  write_file(dir / "one.txt", "solo");
  o.inputs = {dir / "one.txt"};
  const PrepareStats one = prepare_shards(o, fake_encode);
  EXPECT_EQ(one.cut_documents, 1);
  EXPECT_EQ(documents(read_split(o.out_dir, "train")), std::vector<std::string>{"sol"});
  EXPECT_EQ(documents(read_split(o.out_dir, "val")), std::vector<std::string>{"o"});
  // At 0.999 train still keeps a token.
  o.val_fraction = 0.999;
  prepare_shards(o, fake_encode);
  EXPECT_EQ(documents(read_split(o.out_dir, "train")), std::vector<std::string>{"s"});
  EXPECT_EQ(documents(read_split(o.out_dir, "val")), std::vector<std::string>{"olo"});
  // A one-token document cannot be cut: no val split, and the warning says so.
  write_file(dir / "one.txt", "x");
  const PrepareStats tiny = prepare_shards(o, fake_encode);
  EXPECT_EQ(tiny.val_documents, 0);
  EXPECT_EQ(read_manifest(o.out_dir).splits.count("val"), 0u);
  EXPECT_NE(small_val_warning(tiny, o.val_fraction).find("no validation split"), std::string::npos);
}

namespace {

// Text of `bytes` bytes, lines of words, different for each seed.
std::string prose(size_t bytes, int seed) {
  std::string s;
  for (int i = 0; s.size() < bytes; ++i)
    s += fmt::format("{} line {} of text {}{}", seed, i, std::string(size_t(i % 7), 'a' + seed),
                     i % 5 == 4 ? ".\n" : " ");
  s.resize(bytes);
  return s;
}

}  // namespace

TEST(Prepare, OneTextFileIsCutByTokenRange) {
  ScratchDir dir;
  const std::string text = prose(200000, 0);
  write_file(dir / "book.txt", text);
  PrepareOptions o = options(dir, "out", 2);
  o.inputs = {dir / "book.txt"};
  for (const double f : {0.05, 0.005, 0.5}) {
    o.val_fraction = f;
    const PrepareStats s = prepare_shards(o, fake_encode);
    EXPECT_EQ(s.documents, 1);
    EXPECT_EQ(s.cut_documents, 1);
    EXPECT_EQ(s.train_documents, 1);
    EXPECT_EQ(s.val_documents, 1);
    const auto train = documents(read_split(o.out_dir, "train"));
    const auto val = documents(read_split(o.out_dir, "val"));
    ASSERT_EQ(train.size(), 1u);
    ASSERT_EQ(val.size(), 1u);
    // The head trains, the tail validates: together the text, the tail f of it.
    EXPECT_EQ(train[0] + val[0], text);
    EXPECT_EQ(val[0].size(), size_t(std::llround(f * double(text.size())))) << f;
    const DatasetManifest m = read_manifest(o.out_dir);
    EXPECT_EQ(m.cut_documents, 1);
    EXPECT_EQ(m.documents, 1);
  }
  // At 0.05, 10 000 tokens of val: windows of seq_len 1024, no warning.
  o.val_fraction = 0.05;
  const PrepareStats s = prepare_shards(o, fake_encode);
  EXPECT_EQ(small_val_warning(s, 0.05), "");
  TokenLoader val(o.out_dir, "val", 1025, 1);
  EXPECT_EQ(val.total_windows(), (s.val_tokens - 1) / 1024);
  EXPECT_GE(val.total_windows(), 9);
}

TEST(Prepare, LargeDocumentsAreCutSmallOnesGoWhole) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "in");
  // Two large files (the old rule sent one of them whole to val) and small ones.
  const std::string a = prose(60000, 1), b = prose(90000, 2);
  write_file(dir / "in/a.txt", a);
  write_file(dir / "in/b.txt", b);
  std::vector<std::string> small;
  for (int i = 0; i < 20; ++i) {
    small.push_back(fmt::format("small document {}", i));
    write_file(dir / fmt::format("in/s{:02}.txt", i), small.back());
  }
  PrepareOptions o = options(dir, "out1", 1);
  o.inputs = {dir / "in/*.txt"};
  o.val_fraction = 0.1;
  const PrepareStats s = prepare_shards(o, fake_encode);
  EXPECT_EQ(s.documents, 22);
  EXPECT_EQ(s.cut_documents, 2);
  // cut_bytes: the larger of 1/8 of the val target and 256 / fraction.
  EXPECT_EQ(
      s.cut_bytes,
      int64_t(std::ceil(std::max(0.1 * double(s.input_bytes) / kCutShare, kCutMinValBytes / 0.1))));
  const auto train = documents(read_split(o.out_dir, "train"));
  const auto val = documents(read_split(o.out_dir, "val"));
  const size_t va = size_t(std::llround(0.1 * double(a.size())));
  const size_t vb = size_t(std::llround(0.1 * double(b.size())));
  EXPECT_EQ(std::count(train.begin(), train.end(), a.substr(0, a.size() - va)), 1);
  EXPECT_EQ(std::count(val.begin(), val.end(), a.substr(a.size() - va)), 1);
  EXPECT_EQ(std::count(train.begin(), train.end(), b.substr(0, b.size() - vb)), 1);
  EXPECT_EQ(std::count(val.begin(), val.end(), b.substr(b.size() - vb)), 1);
  // Every small document is whole, on one side.
  for (const std::string& d : small)
    EXPECT_EQ(std::count(train.begin(), train.end(), d) + std::count(val.begin(), val.end(), d), 1)
        << d;
  EXPECT_EQ(int64_t(train.size() + val.size()), s.documents + s.cut_documents);
  // Deterministic: the same bytes for another thread count.
  o.out_dir = dir / "out3";
  o.threads = 3;
  prepare_shards(o, fake_encode);
  EXPECT_EQ(dir_bytes(dir / "out1"), dir_bytes(dir / "out3"));
}

TEST(Prepare, SmallValWarningNamesTheSeqLenItAssumes) {
  PrepareStats s;
  s.train_tokens = 100000;
  s.val_tokens = kSmallValWindows * kSmallValSeqLen;  // one short of 4 windows + 1
  const std::string w = small_val_warning(s, 0.05);
  EXPECT_NE(w.find(fmt::format("{} tokens", s.val_tokens)), std::string::npos) << w;
  EXPECT_NE(w.find("3 window(s) of seq_len 1024"), std::string::npos) << w;
  EXPECT_NE(w.find("--val-fraction (now 0.05)"), std::string::npos) << w;
  s.val_tokens += 1;
  EXPECT_EQ(small_val_warning(s, 0.05), "");
  s.val_tokens = 10;
  EXPECT_EQ(small_val_warning(s, 0), "");  // no split asked for: nothing to warn about
}

TEST(Prepare, NoValFractionNoBosAndStaleShardsRemoved) {
  ScratchDir dir;
  make_corpus(dir);
  PrepareOptions o = options(dir, "out", 2);
  o.shard_tokens = 100;
  const PrepareStats many = prepare_shards(o, fake_encode);
  o.shard_tokens = 1 << 20;
  o.val_fraction = 0;
  o.bos_id = -1;
  const PrepareStats s = prepare_shards(o, fake_encode);
  EXPECT_GT(many.train_shards, 10);
  EXPECT_EQ(s.train_shards, 1);
  EXPECT_EQ(s.val_documents, 0);
  EXPECT_EQ(dir_bytes(o.out_dir).size(), 2u);  // dataset.json + train_000000.bin only
  const auto stream = read_split(o.out_dir, "train");
  EXPECT_EQ(std::count(stream.begin(), stream.end(), uint32_t(kBos)), 0);
  EXPECT_EQ(std::count(stream.begin(), stream.end(), uint32_t(kEos)), s.documents);
}

TEST(Prepare, JsonlAcrossPiecesAndLineNumbers) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "in");
  // ~3 MiB: several 1 MiB pieces, lines cut at piece boundaries must be rejoined.
  std::string jl;
  const int lines = 6000;
  for (int i = 0; i < lines; ++i)
    jl += nlohmann::json{{"text", fmt::format("{}:{}", i, std::string(500, 'a' + i % 26))}}.dump() +
          "\n";
  write_file(dir / "in/big.jsonl", jl);
  PrepareOptions o = options(dir, "out", 2);
  o.inputs = {dir / "in/big.jsonl"};
  o.shard_tokens = int64_t(1) << 30;
  const PrepareStats s = prepare_shards(o, fake_encode);
  EXPECT_EQ(s.documents, lines);
  auto all = documents(read_split(o.out_dir, "train"));
  const auto val = documents(read_split(o.out_dir, "val"));
  all.insert(all.end(), val.begin(), val.end());
  std::set<int> seen;
  for (const auto& d : all) {
    ASSERT_EQ(d.size(), d.find(':') + 501) << d.substr(0, 20);
    seen.insert(std::stoi(d.substr(0, d.find(':'))));
  }
  EXPECT_EQ(seen.size(), size_t(lines));

  // A bad line deep in the file is reported with its line number.
  write_file(dir / "in/big.jsonl", jl + "{\"text\": 5}\n");
  expect_error([&] { prepare_shards(o, fake_encode); },
               {"big.jsonl:6001", "string \"text\" field"});
}

TEST(Prepare, JsonlErrors) {
  ScratchDir dir;
  PrepareOptions o = options(dir, "out", 2);
  const std::string f = dir / "bad.jsonl";
  o.inputs = {f};
  auto expect = [&](const std::string& text, std::initializer_list<std::string> parts) {
    write_file(f, text);
    expect_error([&] { prepare_shards(o, fake_encode); }, parts);
  };
  expect("{\"text\": \"ok\"}\n{\"text\": \"broken\n", {f + ":2", "not valid JSON"});
  expect("{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n", {f + ":3", "\"text\" field"});
  expect("[\"text\"]\n", {f + ":1", "JSON object"});
  expect("{\"text\": null}\n", {f + ":1"});
  // The manifest of a failed run is not left behind.
  EXPECT_FALSE(std::filesystem::exists(dir / "out/dataset.json"));
}

TEST(Prepare, InputErrors) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "in");
  PrepareOptions o = options(dir, "out", 2);
  o.inputs = {dir / "in/*.txt"};
  expect_error([&] { prepare_shards(o, fake_encode); }, {"in/*.txt", "no file matches"});

  write_file(dir / "in/a.txt", "");
  write_file(dir / "in/b.jsonl", "\n{\"text\": \"\"}\n");
  o.inputs = {dir / "in/*"};
  expect_error([&] { prepare_shards(o, fake_encode); }, {"no documents", "empty"});

  write_file(dir / "in/a.txt", "hello");
  ASSERT_EQ(::symlink((dir / "nowhere").c_str(), (dir / "in/dangling.txt").c_str()), 0);
  expect_error([&] { prepare_shards(o, fake_encode); }, {"in/dangling.txt", "cannot read"});
  std::filesystem::remove(dir / "in/dangling.txt");

  auto big_ids = [](std::string_view t) { return std::vector<int32_t>{int32_t(kVocab)}; };
  expect_error([&] { prepare_shards(o, big_ids); },
               {"in/a.txt", "token id 259", "vocabulary of 259"});
  auto throws = [](std::string_view) -> std::vector<int32_t> { throw Error("cannot encode"); };
  expect_error([&] { prepare_shards(o, throws); },
               {"in/a.txt", "cannot tokenize", "cannot encode"});

  PrepareOptions bad = o;
  bad.eos_id = int32_t(kVocab);
  expect_error([&] { prepare_shards(bad, fake_encode); }, {"EOS id 259"});
  bad = o;
  bad.val_fraction = 1;
  expect_error([&] { prepare_shards(bad, fake_encode); }, {"--val-fraction"});
  bad = o;
  bad.inputs = {};
  expect_error([&] { prepare_shards(bad, fake_encode); }, {"no --input"});
}

TEST(Prepare, OutputLoads) {
  ScratchDir dir;
  make_corpus(dir);
  const PrepareStats s = prepare_shards(options(dir, "out", 2), fake_encode);
  TokenLoader train(dir / "out", "train", 33, 5);
  TokenLoader val(dir / "out", "val", 33, 5);
  EXPECT_EQ(train.total_tokens(), s.train_tokens);
  EXPECT_EQ(val.total_tokens(), s.val_tokens);
  EXPECT_EQ(train.total_windows(), (s.train_tokens - 1) / 32);
}
