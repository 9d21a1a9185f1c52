// data/tokenizer_gguf: a GGUF file's tokenizer. zaya.tokenizer_json is used exactly; a GGML
// vocabulary (tokens, types, merges) of the Gemma kind is rebuilt into a tokenizer.json that
// encodes and decodes as the original — on a small vocabulary whose every rule is visible (types,
// the "[PADn]" fillers, the user-defined spaces, the merges), and on the real Gemma 3 vocabulary
// over the whole Gemma 3 test corpus; the files without a readable tokenizer say what they lack,
// naming the key; malformed arrays are errors naming the file and the key.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "data/tokenizer_gguf.h"
#include "gemma3_tokenizer.h"
#include "gguf_model_file.h"
#include "io/gguf.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// A GGUF file holding only metadata `kv`.
GgufFile gguf_with(const ScratchDir& dir, std::vector<std::pair<std::string, GgufValue>> kv) {
  const std::string path = dir / "t.gguf";
  GgufWriter w(path);
  for (auto& [k, v] : kv) w.set(k, std::move(v));
  w.finish();
  return GgufFile::open(path);
}

GgufValue strings(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  for (const std::string& s : v) items.push_back(GgufValue::str(s));
  return GgufValue::array(GgufType::String, std::move(items));
}

GgufValue ints(const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  for (int32_t x : v) items.push_back(GgufValue::i32(x));
  return GgufValue::array(GgufType::I32, std::move(items));
}

// A small Gemma-style vocabulary: specials, the 256 byte tokens, a few pieces, a user-defined
// whitespace run written with spaces, and a "[PADn]" filler at the end.
GgufVocab small_vocab() {
  GgufVocab v;
  v.model = "gemma4";
  auto add = [&](std::string t, GgufTokenType type) {
    v.tokens.push_back(std::move(t));
    v.types.push_back(int32_t(type));
  };
  add("<pad>", GgufTokenType::Control);
  add("<eos>", GgufTokenType::Control);
  add("<bos>", GgufTokenType::Control);
  add("<unk>", GgufTokenType::Unknown);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), GgufTokenType::Byte);
  for (const char* t : {"\xe2\x96\x81", "a", "b",
                        "\xe2\x96\x81"
                        "a",
                        "ab"})  // 260 … 264
    add(t, GgufTokenType::Normal);
  add("  ", GgufTokenType::UserDefined);  // 265: "▁▁", its "▁" written as spaces
  add("[PAD266]", GgufTokenType::Unused);
  v.merges = {"\xe2\x96\x81 a", "a b"};
  return v;
}

}  // namespace

TEST(TokenizerGguf, SmallVocabularyRebuiltRuleByRule) {
  const GgufVocab v = small_vocab();
  const nlohmann::json j = tokenizer_json_from_vocab(v, "x.gguf");
  const Tokenizer tok = Tokenizer::from_json(j, "x.gguf");
  // " ab a" → "▁ab▁a": "▁ a" (rank 0) first, so "a b" never applies.
  EXPECT_EQ(tok.encode(" ab a"), (std::vector<int32_t>{263, 262, 263}));
  EXPECT_EQ(tok.encode("ab"), (std::vector<int32_t>{264}));
  // A character outside the vocabulary falls back to its bytes.
  EXPECT_EQ(tok.encode("é"), (std::vector<int32_t>{4 + 0xC3, 4 + 0xA9}));
  EXPECT_EQ(tok.decode(tok.encode(" ab aé")), " ab aé");
  // The user-defined token is "▁▁" again, an added token cut out of raw text.
  EXPECT_EQ(tok.token(265), "\xe2\x96\x81\xe2\x96\x81");
  EXPECT_TRUE(tok.is_added(265));
  EXPECT_EQ(tok.encode("\xe2\x96\x81\xe2\x96\x81"), (std::vector<int32_t>{265}));
  // Specials are added tokens; the filler is left out (its id unused, the vocabulary ends before).
  EXPECT_EQ(tok.encode("<bos>a<eos>"), (std::vector<int32_t>{2, 261, 1}));
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.vocab_size(), 266);
  EXPECT_EQ(j["model"]["unk_token"], "<unk>");
  EXPECT_TRUE(j["model"]["byte_fallback"].get<bool>());
}

TEST(TokenizerGguf, FromAFileAndWhatAFileLacks) {
  ScratchDir dir;
  const GgufVocab v = small_vocab();
  {
    const GgufFile f = gguf_with(dir, {{"tokenizer.ggml.model", GgufValue::str(v.model)},
                                       {"tokenizer.ggml.tokens", strings(v.tokens)},
                                       {"tokenizer.ggml.token_type", ints(v.types)},
                                       {"tokenizer.ggml.merges", strings(v.merges)}});
    const GgufTokenizer g = gguf_tokenizer(f);
    ASSERT_TRUE(g.tok) << g.why_not;
    EXPECT_EQ(g.origin, f.path() + " (tokenizer.ggml.*)");
    EXPECT_EQ(g.tok->encode(" ab a"), (std::vector<int32_t>{263, 262, 263}));
  }
  {  // zaya.tokenizer_json wins over the arrays, and is used as it is.
    nlohmann::json j = tokenizer_json_from_vocab(v, "x");
    j["model"]["merges"] = nlohmann::json::array();  // no merges: "ab" stays two tokens
    const GgufFile f = gguf_with(dir, {{"zaya.tokenizer_json", GgufValue::str(j.dump())},
                                       {"tokenizer.ggml.tokens", strings(v.tokens)},
                                       {"tokenizer.ggml.merges", strings(v.merges)}});
    const GgufTokenizer g = gguf_tokenizer(f);
    ASSERT_TRUE(g.tok);
    EXPECT_EQ(g.origin, f.path() + " (zaya.tokenizer_json)");
    EXPECT_EQ(g.tok->encode("ab"), (std::vector<int32_t>{261, 262}));
  }
  {  // Nothing at all.
    const GgufTokenizer g = gguf_tokenizer(gguf_with(dir, {{"general.name", GgufValue::str("x")}}));
    EXPECT_FALSE(g.tok);
    EXPECT_NE(g.why_not.find("tokenizer.ggml.tokens"), std::string::npos) << g.why_not;
  }
  {  // A SentencePiece vocabulary: tokens and scores, no merges.
    const GgufTokenizer g =
        gguf_tokenizer(gguf_with(dir, {{"tokenizer.ggml.model", GgufValue::str("llama")},
                                       {"tokenizer.ggml.tokens", strings(v.tokens)}}));
    EXPECT_FALSE(g.tok);
    EXPECT_NE(g.why_not.find("'llama' has no tokenizer.ggml.merges"), std::string::npos)
        << g.why_not;
  }
  {  // Byte-level GPT-2 tokens.
    const GgufTokenizer g =
        gguf_tokenizer(gguf_with(dir, {{"tokenizer.ggml.model", GgufValue::str("gpt2")},
                                       {"tokenizer.ggml.tokens", strings({"a", "b",
                                                                          "\xc4\xa0"
                                                                          "a"})},
                                       {"tokenizer.ggml.merges", strings({"\xc4\xa0 a"})}}));
    EXPECT_FALSE(g.tok);
    EXPECT_NE(g.why_not.find("byte-level"), std::string::npos) << g.why_not;
  }
}

TEST(TokenizerGguf, MalformedVocabulariesNameTheKey) {
  ScratchDir dir;
  const GgufVocab v = small_vocab();
  expect_error(
      [&] {
        gguf_tokenizer(gguf_with(dir, {{"tokenizer.ggml.tokens", strings(v.tokens)},
                                       {"tokenizer.ggml.token_type", ints({1, 2})},
                                       {"tokenizer.ggml.merges", strings(v.merges)}}));
      },
      {"t.gguf", "tokenizer.ggml.token_type has 2 entries", "tokenizer.ggml.tokens 267"});
  expect_error(
      [&] {
        gguf_tokenizer(gguf_with(dir, {{"tokenizer.ggml.tokens", ints({1, 2})},
                                       {"tokenizer.ggml.merges", strings(v.merges)}}));
      },
      {"t.gguf", "tokenizer.ggml.tokens must be an array of strings"});
  expect_error(
      [&] {
        gguf_tokenizer(gguf_with(dir, {{"tokenizer.ggml.tokens", strings(v.tokens)},
                                       {"tokenizer.ggml.merges", strings({"ab"})}}));
      },
      {"t.gguf (tokenizer.ggml.*)", "tokenizer.ggml.merges[0]", "\"ab\""});
  expect_error(
      [&] {
        gguf_tokenizer(gguf_with(dir, {{"tokenizer.ggml.tokens", strings(v.tokens)},
                                       {"tokenizer.ggml.merges", strings({"a zz"})}}));
      },
      {"t.gguf (tokenizer.ggml.*)", "merges[0]", "\"zz\" is not in the vocabulary"});
  expect_error(
      [&] {
        gguf_tokenizer(
            gguf_with(dir, {{"tokenizer.ggml.tokens", strings({"\xe2\x96\x81", "a", "b", "a"})},
                            {"tokenizer.ggml.merges", strings({"a b"})}}));
      },
      {"t.gguf (tokenizer.ggml.*)", "\"a\" twice (again at id 3)"});
  expect_error(
      [&] {
        gguf_tokenizer(gguf_with(dir, {{"zaya.tokenizer_json", GgufValue::str("{nope")}}));
      },
      {"t.gguf (zaya.tokenizer_json)", "not valid JSON"});
}

// The real Gemma 3 vocabulary written as the converters write it: the same ids as its
// tokenizer.json on every document of the Gemma 3 corpus, and the same text back.
TEST(TokenizerGguf, Gemma3VocabularyEncodesAsItsTokenizerJson) {
  const Tokenizer* ref = gemma3_tokenizer();
  if (!ref) GTEST_SKIP() << gemma3_missing_message();
  ScratchDir dir;
  const std::string path = dir / "vocab.gguf";
  {
    GgufWriter w(path);
    std::ifstream in(gemma3_tokenizer_path(), std::ios::binary);
    set_ggml_vocab(w, nlohmann::json::parse(in), 262272);  // padded to ZAYA1's vocabulary
    w.finish();
  }
  const GgufTokenizer g = gguf_tokenizer(GgufFile::open(path));
  ASSERT_TRUE(g.tok) << g.why_not;
  EXPECT_EQ(g.tok->vocab_size(), ref->vocab_size());
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/gemma3_corpus.jsonl");
  int64_t docs = 0;
  for (std::string line; std::getline(f, line); ++docs) {
    const std::string text = nlohmann::json::parse(line).get<std::string>();
    const std::vector<int32_t> ids = ref->encode(text);
    ASSERT_EQ(g.tok->encode(text), ids) << "document " << docs << ": " << line.substr(0, 200);
    ASSERT_EQ(g.tok->decode(ids), ref->decode(ids)) << "document " << docs;
  }
  EXPECT_GT(docs, 100);
}
