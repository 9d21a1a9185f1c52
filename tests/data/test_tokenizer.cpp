// Tokenizer unit tests on small tokenizers: a hand-written tokenizer.json whose merges, byte
// fallback, added tokens and decoder are checked by hand; the committed toy tokenizer (trained by
// zaya) against the JavaScript reference's ids; save/load; every kind of bad tokenizer.json.
#include "data/tokenizer.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;

namespace {

// Vocabulary: specials, a..e, "▁", merges ab, abc, ▁a, cd, byte tokens for 0x41 ('A') and the
// bytes of "é" (C3 A9) only.
json mini_json() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 1, "content": "<eos>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 2, "content": "<bos>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 3, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 4, "content": "\n", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
      {"id": 5, "content": "\n\n", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
      {"id": 20, "content": "<turn>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
    ],
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
    "post_processor": null,
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
      "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "\n": 4, "\n\n": 5,
                "a": 6, "b": 7, "c": 8, "d": 9, "e": 10, "▁": 11,
                "ab": 12, "abc": 13, "▁a": 14, "cd": 15, "<0x41>": 16, "<0xC3>": 17, "<0xA9>": 18,
                "bc": 19},
      "merges": [["a", "b"], ["ab", "c"], ["▁", "a"], ["c", "d"], ["b", "c"]]}
  })");
}

std::vector<int32_t> ids(std::initializer_list<int32_t> v) {
  return v;
}

std::vector<std::vector<int32_t>> read_ids(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string raw = ss.str();
  std::vector<uint32_t> w(raw.size() / 4);
  std::memcpy(w.data(), raw.data(), w.size() * 4);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < w.size();) {
    const size_t n = w[i++];
    out.emplace_back(w.begin() + i, w.begin() + i + n);
    i += n;
  }
  return out;
}

std::vector<std::string> read_docs(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::vector<std::string> docs;
  for (std::string line; docs.size() < n && std::getline(f, line);)
    docs.push_back(json::parse(line).get<std::string>());
  return docs;
}

}  // namespace

TEST(Tokenizer, MergesByRankThenLeftmost) {
  const Tokenizer t = Tokenizer::from_json(mini_json(), "mini");
  EXPECT_EQ(t.vocab_size(), 21);
  EXPECT_EQ(t.encode("abc"), ids({13}));       // ab first (rank 0), then ab+c
  EXPECT_EQ(t.encode("abcd"), ids({13, 9}));   // ab, abc beat cd (rank 3)
  EXPECT_EQ(t.encode("bcd"), ids({7, 15}));    // cd (rank 3) before bc (rank 4)
  EXPECT_EQ(t.encode("aaa"), ids({6, 6, 6}));  // no merge
  EXPECT_EQ(t.encode("abab"), ids({12, 12}));  // equal ranks: both
  EXPECT_EQ(t.encode(" ab"), ids({11, 12}));   // "ab" (rank 0) beats "▁a" (rank 2)
}

TEST(Tokenizer, NormalizerSpacesAndBlocks) {
  const Tokenizer t = Tokenizer::from_json(mini_json(), "mini");
  EXPECT_EQ(t.encode(" a"), ids({14}));
  EXPECT_EQ(t.encode("a b"), ids({6, 11, 7}));
  EXPECT_EQ(t.encode("▁a"), ids({14}));  // a literal "▁" is the same as a space
  EXPECT_EQ(t.decode(ids({14, 11, 7})), " a b");
}

TEST(Tokenizer, ByteFallbackAndUnknown) {
  const Tokenizer t = Tokenizer::from_json(mini_json(), "mini");
  EXPECT_EQ(t.encode("A"), ids({16}));          // not in the vocab: its byte token
  EXPECT_EQ(t.encode("é"), ids({17, 18}));      // two byte tokens
  EXPECT_EQ(t.encode("aZZb"), ids({6, 3, 7}));  // no <0x5A>: unk, fused (fuse_unk)
  EXPECT_EQ(t.decode(ids({17, 18, 6})), "éa");
  EXPECT_EQ(t.decode(ids({17, 6})),
            "\xEF\xBF\xBD"
            "a");  // invalid run: U+FFFD per byte
  EXPECT_EQ(t.decode(ids({3})), "<unk>");
}

TEST(Tokenizer, AddedTokensAreCutFirstLongestMatch) {
  const Tokenizer t = Tokenizer::from_json(mini_json(), "mini");
  EXPECT_EQ(t.encode("ab\n\n\nc"), ids({12, 5, 4, 8}));  // "\n\n" then "\n"
  EXPECT_EQ(t.encode("a<turn>b"), ids({6, 20, 7}));
  EXPECT_EQ(t.encode("<bos><turn>"), ids({2, 20}));
  EXPECT_EQ(t.encode("<tur>"), ids({3}));  // a near miss is text: unknown chars, one fused unk
  EXPECT_EQ(t.decode(ids({2, 6, 20, 4})), "<bos>a<turn>\n");
  EXPECT_TRUE(t.is_added(20));
  EXPECT_FALSE(t.is_added(6));
  EXPECT_EQ(t.bos_id(), 2);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.token(13), "abc");
  EXPECT_EQ(t.token_id("cd"), 15);
  EXPECT_EQ(t.token_id("zz"), -1);
}

TEST(Tokenizer, DecodeRejectsBadIds) {
  const Tokenizer t = Tokenizer::from_json(mini_json(), "mini");
  expect_error([&] { t.decode(ids({6, 21})); }, {"21", "not in the tokenizer's vocabulary"});
  expect_error([&] { t.decode(ids({-1})); }, {"-1"});
}

TEST(Tokenizer, SaveLoadKeepsEverything) {
  const Tokenizer t = Tokenizer::from_json(mini_json(), "mini");
  ScratchDir dir;
  t.save(dir / "tokenizer.json");
  const Tokenizer back = Tokenizer::load(dir / "tokenizer.json");
  EXPECT_EQ(back.vocab_size(), t.vocab_size());
  for (const char* s : {"abcd", " ab\n\nA é<turn>", "aZZb"}) EXPECT_EQ(back.encode(s), t.encode(s));
  EXPECT_EQ(back.to_json(), t.to_json());
}

// The toy tokenizer was trained by `zaya tokenizer-train`; its ids came from the JavaScript
// tokenizer (scripts/tokenizer/make_vectors.sh), so zaya's files load the same elsewhere.
TEST(Tokenizer, ToyTokenizerMatchesJavaScriptReference) {
  const std::string dir = std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/";
  const Tokenizer t = Tokenizer::load(dir + "toy_tokenizer.json");
  EXPECT_EQ(t.vocab_size(), 1024);
  const auto want = read_ids(dir + "toy_ids.bin");
  const auto docs = read_docs(dir + "gemma3_corpus.jsonl", want.size());
  ASSERT_EQ(docs.size(), want.size());
  ASSERT_GE(want.size(), 40u);
  for (size_t d = 0; d < docs.size(); ++d) {
    ASSERT_EQ(t.encode(docs[d]), want[d]) << "document " << d;
    std::string expect = docs[d];
    for (size_t i; (i = expect.find("\xE2\x96\x81")) != std::string::npos;)
      expect.replace(i, 3, " ");
    ASSERT_EQ(t.decode(want[d]), expect) << "document " << d;
  }
}

// ---- bad input ----

class TokenizerFileTest : public testing::Test {
 protected:
  ScratchDir dir;
  std::string path = dir / "tokenizer.json";
  void write(const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  void expect_load_error(const json& j, std::initializer_list<std::string> parts) {
    SCOPED_TRACE(j.dump().substr(0, 200));
    write(j.dump());
    expect_error([&] { Tokenizer::load(path); }, parts);
  }
};

TEST_F(TokenizerFileTest, MissingFile) {
  expect_error([&] { Tokenizer::load(dir / "absent.json"); }, {"absent.json", "cannot open"});
}

TEST_F(TokenizerFileTest, MalformedJson) {
  write("{\"model\": {\"type\": \"BPE\", ");
  expect_error([&] { Tokenizer::load(path); }, {path, "not valid JSON", "tokenizer.json"});
  write("");
  expect_error([&] { Tokenizer::load(path); }, {path, "not valid JSON"});
  write("[1, 2]");
  expect_error([&] { Tokenizer::load(path); }, {path, "not a JSON object"});
}

TEST_F(TokenizerFileTest, UnsupportedOrInconsistent) {
  json j = mini_json();
  j["model"]["type"] = "WordPiece";
  expect_load_error(j, {path, "model type 'WordPiece' is not supported"});
  j = mini_json();
  j.erase("model");
  expect_load_error(j, {path, "no \"model\""});
  j = mini_json();
  j["model"].erase("merges");
  expect_load_error(j, {path, "no \"merges\""});
  j = mini_json();
  j["model"]["merges"].push_back({"a", "zz"});
  expect_load_error(j, {path, "merges[5]", "\"zz\" is not in the vocabulary"});
  j = mini_json();
  j["model"]["merges"].push_back({"d", "e"});
  expect_load_error(j, {path, "\"d\" + \"e\" is not in the vocabulary"});
  j = mini_json();
  j["model"]["vocab"]["zz"] = 6;
  expect_load_error(j, {path, "id 6 is given to both"});
  j = mini_json();
  j["model"]["vocab"]["zz"] = "seven";
  expect_load_error(j, {path, "\"zz\"", "not an id"});
  j = mini_json();
  j["normalizer"] = {{"type", "NFKC"}};
  expect_load_error(j, {path, "normalizer type 'NFKC' is not supported"});
  j = mini_json();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}};
  expect_load_error(j, {path, "pre_tokenizer type 'ByteLevel' is not supported"});
  j = mini_json();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_load_error(j, {path, "decoder type 'WordPiece' is not supported"});
  j = mini_json();
  j["added_tokens"].push_back({{"id", 6}, {"content", "<x>"}});
  expect_load_error(j, {path, "\"<x>\" has id 6, which the vocabulary gives to \"a\""});
  j = mini_json();
  j["added_tokens"].push_back({{"content", "<x>"}});
  expect_load_error(j, {path, "lacks an integer \"id\""});
}
