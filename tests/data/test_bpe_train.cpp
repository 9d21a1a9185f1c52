// train_bpe: the vocabulary size is exact (padding with <unusedK> when the text runs out of
// pairs), ZAYA1's pad/eos/bos ids hold, encode/decode round-trips any text (byte fallback), the
// result is deterministic for any thread count, files and texts agree, and it saves and loads.
#include "data/bpe_train.h"

#include <omp.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

std::vector<std::string> corpus_docs(size_t n) {
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/gemma3_corpus.jsonl",
                  std::ios::binary);
  std::vector<std::string> docs;
  for (std::string line; docs.size() < n && std::getline(f, line);)
    docs.push_back(nlohmann::json::parse(line).get<std::string>());
  return docs;
}

std::string blocks_as_spaces(std::string s) {
  for (size_t i; (i = s.find("\xE2\x96\x81")) != std::string::npos;) s.replace(i, 3, " ");
  return s;
}

}  // namespace

TEST(BpeTrain, ExactVocabSizeAndSpecialIds) {
  const auto docs = corpus_docs(120);
  for (int64_t v : {bpe_min_vocab_size(), int64_t(300), int64_t(777), int64_t(2000)}) {
    const Tokenizer t = train_bpe_on_texts(docs, v);
    EXPECT_EQ(t.vocab_size(), v);
    EXPECT_EQ(t.pad_id(), 0);
    EXPECT_EQ(t.eos_id(), 1);
    EXPECT_EQ(t.bos_id(), 2);
    EXPECT_EQ(t.token(3), "<unk>");
    EXPECT_EQ(t.token_id("<start_of_turn>"), 5);
    EXPECT_EQ(t.token_id("<0x00>"), 15);
    EXPECT_EQ(t.token_id("<0xFF>"), 270);
  }
}

TEST(BpeTrain, RoundTripAndCompression) {
  const auto docs = corpus_docs(300);
  const Tokenizer t = train_bpe_on_texts(docs, 4096);
  size_t bytes = 0, tokens = 0;
  for (const std::string& d : docs) {
    const auto ids = t.encode(d);
    ASSERT_EQ(t.decode(ids), blocks_as_spaces(d));
    bytes += d.size();
    tokens += ids.size();
  }
  // Text never seen in training: still exact (byte fallback).
  for (const char* s :
       {"Zyphra ZAYA1 🦜 ∮ ᚠᛇᚻ 𝔘𝔫𝔦 \t\t\n\n\n\n\n\n\n\n\n\n  x", "\x01\x02", ""})
    EXPECT_EQ(t.decode(t.encode(s)), s);
  EXPECT_GT(double(bytes) / double(tokens), 2.0) << "a 4k BPE should compress this text";
}

// "ab ab ab ab" is the words "ab" and "▁ab" ×3 (cut before each "▁"), worked out by hand: after
// the byte tokens (… 270 = <0xFF>) come its characters by frequency, a (4), b (4), ▁ (3), then one
// token per merge: a+b first (4 pairs), then ▁+ab (3); no pair is left, so <unusedK> pads to 400.
TEST(BpeTrain, RunsOutOfPairsPadsWithUnused) {
  const Tokenizer t = train_bpe_on_texts({"ab ab ab ab"}, 400);
  EXPECT_EQ(t.vocab_size(), 400);
  EXPECT_EQ(t.token(271), "a");
  EXPECT_EQ(t.token(272), "b");
  EXPECT_EQ(t.token(273), "▁");
  EXPECT_EQ(t.token(274), "ab");
  EXPECT_EQ(t.token(275), "▁ab");
  EXPECT_EQ(t.token(276), "<unused0>");
  EXPECT_EQ(t.token(399), "<unused123>");
  using Ids = std::vector<int32_t>;
  EXPECT_EQ(t.encode("ab ab"), (Ids{274, 275}));
  EXPECT_EQ(t.encode(" ab ab"), (Ids{275, 275}));
  EXPECT_EQ(t.encode("abab"), (Ids{274, 274}));
  EXPECT_EQ(t.encode("ba"), (Ids{272, 271}));  // b+a was never merged
  EXPECT_EQ(t.decode(Ids{274, 275}), "ab ab");
}

TEST(BpeTrain, DeterministicForAnyThreadCount) {
  const auto docs = corpus_docs(150);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = train_bpe_on_texts(docs, 1500).to_json();
  omp_set_num_threads(std::max(2, threads));
  const auto many = train_bpe_on_texts(docs, 1500).to_json();
  omp_set_num_threads(threads);
  EXPECT_EQ(one, many);
  EXPECT_EQ(train_bpe_on_texts(docs, 1500).to_json(), many);
}

TEST(BpeTrain, FilesSaveAndLoad) {
  ScratchDir dir;
  const auto docs = corpus_docs(100);
  std::string all;
  for (const auto& d : docs) all += d + "\n";
  std::ofstream(dir / "a.txt", std::ios::binary) << all.substr(0, all.size() / 2);
  std::ofstream(dir / "b.txt", std::ios::binary) << all.substr(all.size() / 2);
  const Tokenizer t = train_bpe({dir / "a.txt", dir / "b.txt"}, 1000);
  EXPECT_EQ(t.vocab_size(), 1000);
  t.save(dir / "tokenizer.json");
  const Tokenizer back = Tokenizer::load(dir / "tokenizer.json");
  EXPECT_EQ(back.vocab_size(), 1000);
  for (const auto& d : docs) ASSERT_EQ(back.encode(d), t.encode(d));
  EXPECT_EQ(back.to_json(), t.to_json());
}

TEST(BpeTrain, BadInput) {
  expect_error([] { train_bpe({"/nonexistent/zaya.txt"}, 1000); },
               {"/nonexistent/zaya.txt", "cannot open"});
  expect_error([] { train_bpe_on_texts({"abc"}, 100); }, {"vocab size 100 is too small", "272"});
}

// Input without any text (empty files, only newlines) is an error naming the files, not a
// tokenizer of byte fallback and unused slots.
TEST(BpeTrain, NoTextIsAnError) {
  ScratchDir dir;
  std::ofstream(dir / "empty.txt", std::ios::binary) << "";
  std::ofstream(dir / "newlines.txt", std::ios::binary) << "\n\n\n\n";
  expect_error([&] { train_bpe({dir / "empty.txt"}, 1000); },
               {"no text to train a tokenizer on", "empty.txt (0 bytes)"});
  expect_error(
      [&] {
        train_bpe({dir / "empty.txt", dir / "newlines.txt"}, 1000);
      },
      {"no text", "empty.txt, " + dir / "newlines.txt"});
  expect_error([] { train_bpe_on_texts({"", ""}, 1000); }, {"no text", "2 text(s)"});
  EXPECT_EQ(train_bpe_on_texts({"", "a"}, 1000).vocab_size(), 1000);  // one character will do
}
