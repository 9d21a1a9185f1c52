// data/tokenizer_gguf: a GGUF file's tokenizer. zaya.tokenizer_json is used exactly; a GGML
// vocabulary (tokens, types, merges) of the Gemma kind is rebuilt into a tokenizer.json that
// encodes and decodes as the original — on a small vocabulary whose every rule is visible (types,
// the "[PADn]" fillers, the user-defined spaces, the merges), and on the real Gemma 3 vocabulary
// over the whole Gemma 3 test corpus; the files without a readable tokenizer say what they lack,
// naming the key; malformed arrays are errors naming the file and the key. Written the other way
// (what zaya quantize puts beside zaya.tokenizer_json): the arrays of a tokenizer.json are the
// exact inverse of the reader, rebuild the toy and the Gemma 3 tokenizers (the latter equal to the
// converters' arrays) that encode and decode the corpus as tokenizer.json does, carry the special
// ids, and are refused — never approximated — for a tokenizer.json they cannot say.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
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

nlohmann::json toy_json() {
  std::ifstream in(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  return nlohmann::json::parse(in);
}

// The tokenizer a GGUF file holding only `keys` rebuilds.
GgufTokenizer rebuilt(const ScratchDir& dir, std::vector<std::pair<std::string, GgufValue>> keys) {
  return gguf_tokenizer(gguf_with(dir, std::move(keys)));
}

// `got` encodes every corpus document (and a text of specials, byte fallbacks and invalid UTF-8)
// to `want`'s ids, and decodes them to `want`'s text.
void expect_same_tokenization(const Tokenizer& got, const Tokenizer& want) {
  std::vector<std::string> docs = gemma3_corpus();
  ASSERT_GT(docs.size(), 100u);
  docs.push_back(
      "<bos>Hi  there\n\n\t<start_of_turn>user \xe2\x96\x81\xe2\x96\x81x \xff\xfe 🤗 Ω<eos>");
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::vector<int32_t> ids = want.encode(docs[i]);
    ASSERT_EQ(got.encode(docs[i]), ids) << "document " << i << ": " << docs[i].substr(0, 200);
    ASSERT_EQ(got.decode(ids), want.decode(ids)) << "document " << i;
  }
  EXPECT_EQ(got.vocab_size(), want.vocab_size());
}

const GgufValue& key(const std::vector<std::pair<std::string, GgufValue>>& keys,
                     const std::string& k) {
  for (const auto& [name, v] : keys)
    if (name == k) return v;
  static const GgufValue none = GgufValue::str("(absent)");
  ADD_FAILURE() << k << " is not among the keys";
  return none;
}

bool has_key(const std::vector<std::pair<std::string, GgufValue>>& keys, const std::string& k) {
  for (const auto& kv : keys)
    if (kv.first == k) return true;
  return false;
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

// Writing is the reader's inverse: the small vocabulary, rebuilt into a tokenizer.json, gives back
// the same arrays — types, the user-defined token's spaces, the filler up to the model's size.
TEST(TokenizerGguf, WrittenArraysAreTheReadersInverse) {
  const GgufVocab v = small_vocab();
  std::string why;
  const std::optional<GgufVocab> back =
      vocab_from_tokenizer_json(tokenizer_json_from_vocab(v, "x"), int64_t(v.tokens.size()), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->model, "gemma4");
  EXPECT_EQ(back->tokens, v.tokens);
  EXPECT_EQ(back->types, v.types);
  EXPECT_EQ(back->merges, v.merges);
}

// The toy tokenizer (committed) through the arrays alone: the keys' values, and a rebuilt
// tokenizer that encodes and decodes as its tokenizer.json.
TEST(TokenizerGguf, ToyTokenizerThroughTheArrays) {
  ScratchDir dir;
  const nlohmann::json j = toy_json();
  const Tokenizer want = Tokenizer::from_json(j, "toy");
  GgmlSpecialIds s;
  s.bos = 2, s.eos = 1, s.eot = 6, s.pad = 5000;  // 5000: past the vocabulary, not written
  // The post-processor puts <bos> first and nothing last.
  EXPECT_TRUE(post_processor_adds(j, true));
  EXPECT_FALSE(post_processor_adds(j, false));
  s.add_bos = true;
  std::string why;
  std::optional<GgufVocab> v = vocab_from_tokenizer_json(j, 1100, &why);
  ASSERT_TRUE(v) << why;
  auto keys = ggml_tokenizer_keys(std::move(*v), s);
  EXPECT_EQ(key(keys, "tokenizer.ggml.model").s, "gemma4");
  const GgufValue& tokens = key(keys, "tokenizer.ggml.tokens");
  const GgufValue& types = key(keys, "tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.items.size(), 1100u);  // padded to the model's vocabulary
  ASSERT_EQ(types.items.size(), 1100u);
  EXPECT_EQ(key(keys, "tokenizer.ggml.scores").items.size(), 1100u);
  EXPECT_EQ(tokens.items[1050].s, "[PAD1050]");
  EXPECT_EQ(types.items[1050].i, int64_t(GgufTokenType::Unused));
  EXPECT_EQ(tokens.items[2].s, "<bos>");
  EXPECT_EQ(types.items[2].i, int64_t(GgufTokenType::Control));
  EXPECT_EQ(types.items[3].i, int64_t(GgufTokenType::Unknown));
  EXPECT_EQ(tokens.items[size_t(want.token_id("<0x41>"))].s, "<0x41>");
  EXPECT_EQ(types.items[size_t(want.token_id("<0x41>"))].i, int64_t(GgufTokenType::Byte));
  EXPECT_EQ(key(keys, "tokenizer.ggml.merges").items.size(), j["model"]["merges"].size());
  EXPECT_EQ(key(keys, "tokenizer.ggml.bos_token_id").u, 2u);
  EXPECT_EQ(key(keys, "tokenizer.ggml.eos_token_id").u, 1u);
  EXPECT_EQ(key(keys, "tokenizer.ggml.eot_token_id").u, 6u);
  EXPECT_EQ(key(keys, "tokenizer.ggml.unknown_token_id").u, 3u);
  EXPECT_FALSE(has_key(keys, "tokenizer.ggml.padding_token_id"));
  EXPECT_EQ(key(keys, "tokenizer.ggml.add_bos_token").u, 1u);
  EXPECT_EQ(key(keys, "tokenizer.ggml.add_eos_token").u, 0u);
  EXPECT_EQ(key(keys, "tokenizer.ggml.add_space_prefix").u, 0u);
  s.add_bos = false, s.add_eos = true;
  const auto flags = ggml_tokenizer_keys(*vocab_from_tokenizer_json(j, 1024, &why), s);
  EXPECT_EQ(key(flags, "tokenizer.ggml.add_bos_token").u, 0u);
  EXPECT_EQ(key(flags, "tokenizer.ggml.add_eos_token").u, 1u);
  EXPECT_EQ(key(flags, "tokenizer.ggml.tokens").items.size(), 1024u);
  nlohmann::json late = j;  // a post-processor that appends <eos> too
  late["post_processor"]["single"].push_back({{"SpecialToken", {{"id", "<eos>"}}}});
  EXPECT_TRUE(post_processor_adds(late, false));
  late["post_processor"] = nullptr;
  EXPECT_FALSE(post_processor_adds(late, true));

  const GgufTokenizer g = rebuilt(dir, std::move(keys));
  ASSERT_TRUE(g.tok) << g.why_not;
  EXPECT_NE(g.origin.find("(tokenizer.ggml.*)"), std::string::npos) << g.origin;
  expect_same_tokenization(*g.tok, want);
}

// A tokenizer.json the arrays cannot say exactly gives no arrays, and the reason names the part.
TEST(TokenizerGguf, TokenizersTheArraysCannotSayGiveNone) {
  auto refused = [](const nlohmann::json& j, const std::string& part) {
    std::string why;
    EXPECT_FALSE(vocab_from_tokenizer_json(j, 1024, &why)) << part;
    EXPECT_NE(why.find(part), std::string::npos) << why;
  };
  const nlohmann::json toy = toy_json();
  auto changed = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = toy;
    f(j);
    return j;
  };
  refused(changed([](auto& j) { j["decoder"]["decoders"].erase(2); }), "decoder");
  refused(changed([](auto& j) { j["normalizer"] = nullptr; }), "normalizer");
  refused(changed([](auto& j) { j["pre_tokenizer"] = nullptr; }), "pre_tokenizer");
  refused(changed([](auto& j) { j["model"]["byte_fallback"] = false; }), "byte_fallback");
  refused(changed([](auto& j) { j["model"]["type"] = "WordPiece"; }), "not BPE");
  refused(changed([](auto& j) { j["model"]["merges"] = nlohmann::json::array(); }), "merges");
  refused(changed([](auto& j) { j["model"]["unk_token"] = "a"; }), "unk_token");
  refused(changed([](auto& j) {  // a user-defined token's own space would come back as "▁"
            j["added_tokens"].push_back({{"id", 1024}, {"content", "a b"}, {"special", false}});
          }),
          "holds a space");
  refused(changed([](auto& j) { j["added_tokens"][5]["lstrip"] = true; }), "lstrip");
  refused(changed([](auto& j) {
            j["added_tokens"].push_back({{"id", 1024}, {"content", "<bos>"}, {"special", true}});
          }),
          "<bos>");
  refused(changed([](auto& j) {  // no allocation sized by a far id
            j["added_tokens"].push_back({{"id", 1 << 30}, {"content", "<far>"}, {"special", true}});
          }),
          "ids reach");
  // Whatever the JSON, an answer and no exception.
  for (
      const char* text :
      {"[]", "3", "{}", R"({"model": 3})", R"({"model": {"type": "BPE", "vocab": []}})",
       R"({"model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "vocab": {"a": -1}}})",
       R"({"added_tokens": 7, "model": {}})"}) {
    std::string why;
    EXPECT_NO_THROW(EXPECT_FALSE(vocab_from_tokenizer_json(nlohmann::json::parse(text), 8, &why)))
        << text;
    EXPECT_NO_THROW((void)post_processor_adds(nlohmann::json::parse(text), true)) << text;
    EXPECT_FALSE(why.empty()) << text;
  }
}

// The real Gemma 3 tokenizer.json as zaya writes it: the same arrays as the converters' (the
// helper in gguf_model_file.h), padded to ZAYA1's 262,272 ids, rebuilding a tokenizer that
// encodes and decodes the corpus as tokenizer.json does.
TEST(TokenizerGguf, Gemma3ArraysAsZayaWritesThem) {
  const Tokenizer* ref = gemma3_tokenizer();
  if (!ref) GTEST_SKIP() << gemma3_missing_message();
  ScratchDir dir;
  const std::string mine = dir / "mine.gguf", theirs = dir / "theirs.gguf";
  {
    std::ifstream in(gemma3_tokenizer_path(), std::ios::binary);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::string why;
    std::optional<GgufVocab> v = vocab_from_tokenizer_json(j, 262272, &why);
    ASSERT_TRUE(v) << why;
    GgmlSpecialIds s;
    s.add_bos = post_processor_adds(j, true);
    auto keys = ggml_tokenizer_keys(std::move(*v), s);
    GgufWriter w(mine);
    for (auto& [k, v] : keys) w.set(k, std::move(v));
    w.finish();
    GgufWriter t(theirs);
    set_ggml_vocab(t, j, 262272);
    t.finish();
  }
  {
    const GgufFile a = GgufFile::open(mine), b = GgufFile::open(theirs);
    for (const char* k : {"tokenizer.ggml.model", "tokenizer.ggml.tokens",
                          "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
      ASSERT_TRUE(a.find(k) && b.find(k)) << k;
      EXPECT_TRUE(*a.find(k) == *b.find(k)) << k;
    }
    EXPECT_EQ(a.get_int("tokenizer.ggml.unknown_token_id"), ref->token_id("<unk>"));
    EXPECT_EQ(a.find("tokenizer.ggml.add_bos_token")->u, 1u);
  }
  const GgufTokenizer g = gguf_tokenizer(GgufFile::open(mine));
  ASSERT_TRUE(g.tok) << g.why_not;
  expect_same_tokenization(*g.tok, *ref);
}
