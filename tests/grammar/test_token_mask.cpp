// The vocabulary mask: mask_logits against brute force (every id: copy the matcher, accept its
// bytes) at many states of several grammars on the toy tokenizer, and at a few states on the real
// Gemma 3 tokenizer; the token bytes as decode gives them; the eos rules; control tokens.
#include "grammar/token_mask.h"

#include "grammar/json_schema.h"
#include "grammar/tool_call_grammar.h"
#include "grammar_test_util.h"

using namespace zaya;
using namespace zaya::grammar;
using namespace zaya::test;

namespace {

// What the mask should be, id by id, by the rules of token_mask.h.
std::vector<int32_t> brute_force(const VocabIndex& v, const Matcher& m,
                                 std::span<const int32_t> eos) {
  std::vector<int32_t> ids;
  const bool done = !m.can_continue();
  for (int32_t id = 0; id < v.vocab_size(); ++id) {
    if (std::find(eos.begin(), eos.end(), id) != eos.end()) {
      if (m.accepting()) ids.push_back(id);
      continue;
    }
    if (done) continue;
    const auto cls = v.token_class(id);
    if (cls == VocabIndex::TokenClass::Never) continue;
    if (cls == VocabIndex::TokenClass::AddedText) {
      bool in_literal = false;
      for (const std::string& l : m.grammar().literals())
        in_literal = in_literal || l.find(v.bytes(id)) != std::string::npos;
      if (!in_literal) continue;
    }
    Matcher copy = m;
    if (copy.accept(v.bytes(id))) ids.push_back(id);
  }
  return ids;
}

std::vector<Grammar> grammars() {
  std::vector<Grammar> g;
  g.push_back(any_json_object());
  g.push_back(from_json_schema(ojson::parse(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
          "n":{"type":"integer","minimum":-5,"maximum":300},"tags":{"type":"array",
          "items":{"enum":["a","bc",true]},"maxItems":3},"d":{"type":"string","format":"date"}},
          "required":["name","tags"]})")));
  g.push_back(zaya_tool_calls(
      ojson::parse(
          R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
          "properties":{"city":{"type":"string","maxLength":10},"days":{"type":"integer"}},
          "required":["city"]}}}])"),
      ""));
  return g;
}

}  // namespace

TEST(TokenMask, TokenBytesAreWhatDecodeGives) {
  const Tokenizer& tok = toy_tokenizer();
  const VocabIndex& v = toy_vocab();
  ASSERT_EQ(v.vocab_size(), tok.vocab_size());
  int text = 0;
  for (int32_t id = 0; id < v.vocab_size(); ++id) {
    const std::string_view t = tok.token(id);
    if (v.token_class(id) != VocabIndex::TokenClass::Text) continue;
    ++text;
    if (t.size() == 6 && t.substr(0, 3) == "<0x") {
      EXPECT_EQ(v.bytes(id).size(), 1u) << t;
      EXPECT_EQ(uint8_t(v.bytes(id)[0]), std::stoul(std::string(t.substr(3, 2)), nullptr, 16));
    } else {
      const int32_t one[] = {id};
      EXPECT_EQ(v.bytes(id), tok.decode(one)) << id;
    }
  }
  EXPECT_GT(text, 900);
  EXPECT_EQ(v.bytes(tok.token_id("▁")), " ");
  for (const char* control : {"<pad>", "<bos>", "<unk>"})
    EXPECT_EQ(v.token_class(tok.token_id(control)), VocabIndex::TokenClass::Never) << control;
  EXPECT_EQ(v.token_class(tok.token_id("<start_of_turn>")), VocabIndex::TokenClass::AddedText);
  EXPECT_EQ(v.token_class(tok.token_id("\n\n")), VocabIndex::TokenClass::Text);
}

TEST(TokenMask, MatchesBruteForceToy) {
  const VocabIndex& v = toy_vocab();
  const int32_t eos[] = {toy_tokenizer().eos_id()};
  int states = 0;
  for (const Grammar& g : grammars()) {
    std::mt19937 rng(99);
    for (int w = 0; w < 4; ++w) {
      // Walk, checking the mask at every state on the way.
      Matcher m(g);
      for (int step = 0; step < 120; ++step) {
        const std::vector<int32_t> got = allowed_ids(v, m, eos);
        ASSERT_EQ(got, brute_force(v, m, eos)) << "after " << step << " tokens";
        ++states;
        std::vector<int32_t> text;
        for (int32_t id : got)
          if (id != eos[0]) text.push_back(id);
        if (text.empty() || (m.accepting() && rng() % 3 == 0)) break;
        ASSERT_TRUE(m.accept(v.bytes(text[rng() % text.size()])));
      }
    }
  }
  EXPECT_GT(states, 100);
}

TEST(TokenMask, EosRules) {
  const VocabIndex& v = toy_vocab();
  const int32_t eos[] = {toy_tokenizer().eos_id()};
  GrammarBuilder b;
  const Grammar g = b.build(b.add("root", alt({lit("a"), lit("ab")})));
  Matcher m(g);
  auto ids = allowed_ids(v, m, eos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eos[0]), 0);  // not accepting yet
  ASSERT_TRUE(m.accept("a"));
  ids = allowed_ids(v, m, eos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eos[0]), 1);
  EXPECT_GT(ids.size(), 1u);  // "b"
  ASSERT_TRUE(m.accept("b"));
  EXPECT_EQ(allowed_ids(v, m, eos), std::vector<int32_t>{eos[0]});  // complete: only eos
  // Logits beyond the vocabulary (a model's padded rows) are masked too.
  std::vector<float> logits(size_t(v.vocab_size()) + 16, 1.0f);
  mask_logits(v, Matcher(g), eos, logits);
  for (size_t i = size_t(v.vocab_size()); i < logits.size(); ++i)
    EXPECT_TRUE(std::isinf(logits[i]));
  EXPECT_EQ(logits[size_t(toy_tokenizer().token_id("a"))], 1.0f);  // allowed logits are kept
}

TEST(TokenMask, ControlTokensOnlyAsGrammarLiterals) {
  const Tokenizer& tok = toy_tokenizer();
  const VocabIndex& v = toy_vocab();
  const int32_t eos[] = {tok.eos_id()};
  const int32_t sot = tok.token_id("<start_of_turn>");
  // A string may hold any text, but never a control token...
  const Grammar s = from_json_schema(ojson::parse(R"({"type":"string"})"));
  Matcher m(s);
  ASSERT_TRUE(m.accept("\"x"));
  auto ids = allowed_ids(v, m, eos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), sot), 0);
  // ...unless the grammar writes its text as a literal.
  GrammarBuilder b;
  const Grammar lit_g = b.build(b.add("root", seq({lit("<start_of_turn>user"), lit("!")})));
  ids = allowed_ids(v, Matcher(lit_g), eos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), sot), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.token_id("<end_of_turn>")), 0);
}

TEST(TokenMask, MatchesBruteForceGemma3) {
  REQUIRE_GEMMA3_VOCAB();
  const VocabIndex& v = *gemma3_vocab();
  EXPECT_EQ(v.vocab_size(), gemma3_tokenizer()->vocab_size());
  EXPECT_EQ(v.bytes(gemma3_tokenizer()->token_id("<0x22>")), "\"");
  const int32_t eos[] = {1, 106};
  const std::vector<Grammar> gs = grammars();
  // A few states: the start, inside a string, after a key, inside a tool call's name.
  const std::pair<int, const char*> states[] = {{0, ""},
                                                {0, R"({"key": "some te)"},
                                                {1, R"({"name":"abc","n":)"},
                                                {1, R"({"name":"abc","tags":["bc")"},
                                                {2, "<zyphra_tool_call>\n<function=get_"}};
  for (const auto& [gi, prefix] : states) {
    Matcher m(gs[size_t(gi)]);
    ASSERT_TRUE(m.accept(prefix)) << prefix;
    EXPECT_EQ(allowed_ids(v, m, eos), brute_force(v, m, eos)) << prefix;
  }
}
