// The grammar builder and the Matcher: hand-written grammars accept exactly the strings they
// should, byte by byte and in pieces; UTF-8 classes; repetition bounds; left recursion and
// ambiguity are refused with clear errors; a Matcher copy is an independent state.
#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <random>

using namespace zaya;
using namespace zaya::grammar;

namespace {

bool matches(const Grammar& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.accepting();
}

// Fed one byte at a time must agree with fed whole, and every prefix of a match must be taken.
bool matches_bytewise(const Grammar& g, std::string_view text) {
  Matcher m(g);
  for (char c : text)
    if (!m.accept(std::string_view(&c, 1))) return false;
  return m.accepting();
}

Grammar single(const Expr& e) {
  GrammarBuilder b;
  return b.build(b.add("root", e));
}

}  // namespace

TEST(Grammar, LiteralsAndAlternatives) {
  const Grammar g = single(alt({lit("cat"), lit("car"), lit("cart")}));
  for (const char* s : {"cat", "car", "cart"}) {
    EXPECT_TRUE(matches(g, s)) << s;
    EXPECT_TRUE(matches_bytewise(g, s)) << s;
  }
  for (const char* s : {"", "ca", "cats", "dog", "carts"}) EXPECT_FALSE(matches(g, s)) << s;
  Matcher m(g);
  ASSERT_TRUE(m.accept("car"));
  EXPECT_TRUE(m.accepting());
  EXPECT_TRUE(m.can_continue());  // "cart"
  ASSERT_TRUE(m.accept("t"));
  EXPECT_FALSE(m.can_continue());
}

TEST(Grammar, RejectedBytesLeaveTheStateUnchanged) {
  const Grammar g = single(lit("abc"));
  Matcher m(g);
  ASSERT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.accept("bx"));  // "b" alone is fine, "x" is not: neither is taken
  EXPECT_TRUE(m.accept("bc"));
  EXPECT_TRUE(m.accepting());
}

TEST(Grammar, CopiesAreIndependent) {
  const Grammar g = single(seq({lit("<"), repeat(chars({{'a', 'z'}}), 0), lit(">")}));
  Matcher a(g);
  ASSERT_TRUE(a.accept("<ab"));
  Matcher b = a;
  ASSERT_TRUE(b.accept("c>"));
  EXPECT_TRUE(b.accepting());
  EXPECT_FALSE(a.accepting());
  ASSERT_TRUE(a.accept(">"));
  EXPECT_TRUE(a.accepting());
}

TEST(Grammar, Repetition) {
  const Grammar g = single(repeat(lit("ab"), 2, 4));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "abab"));
  EXPECT_TRUE(matches(g, "ababab"));
  EXPECT_TRUE(matches(g, "abababab"));
  EXPECT_FALSE(matches(g, "ababababab"));
  EXPECT_FALSE(matches(g, "ababa"));
  const Grammar star = single(seq({lit("x"), repeat(lit("y"), 0), lit("z")}));
  EXPECT_TRUE(matches(star, "xz"));
  EXPECT_TRUE(matches(star, "x" + std::string(10000, 'y') + "z"));
  // A long unbounded repetition keeps the stacks flat (no entry per repetition).
  Matcher m(star);
  ASSERT_TRUE(m.accept("x" + std::string(5000, 'y')));
  EXPECT_LT(m.stacks().size(), 16u);
}

TEST(Grammar, Utf8Classes) {
  const Grammar any = single(repeat(chars({}, true), 0));
  for (const char* s : {"", "plain", "é", "世界", "😀", "\x7f", "a\xC2\x80z"})
    EXPECT_TRUE(matches(any, s)) << s;
  // Invalid UTF-8: a lone continuation byte, an overlong form, a surrogate, beyond U+10FFFF, a
  // truncated sequence.
  for (const char* s : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8"})
    EXPECT_FALSE(matches(any, s)) << testing::PrintToString(std::string(s));
  const Grammar greek = single(repeat(chars({{U'α', U'ω'}}), 1));
  EXPECT_TRUE(matches(greek, "αβγω"));
  EXPECT_FALSE(matches(greek, "αβa"));
  EXPECT_FALSE(matches(greek, "Ω"));
  const Grammar not_quote = single(repeat(chars({{'"', '"'}, {'\\', '\\'}}, true), 0));
  EXPECT_TRUE(matches(not_quote, "it's 世界 😀"));
  EXPECT_FALSE(matches(not_quote, "a\"b"));
  // Every code point, encoded, against a class of a few ranges (the boundaries of each UTF-8
  // length included).
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x41, 0x5A},      {0x7F, 0x81},         {0x7FF, 0x800},
      {0xFFFF, 0x10000}, {0x10FFFF, 0x10FFFF}, {0xD7FF, 0xE000}};
  const Grammar in = single(chars(ranges)), out = single(chars(ranges, true));
  auto encode = [](char32_t c) {
    std::string s;
    if (c < 0x80) {
      s += char(c);
    } else if (c < 0x800) {
      s += char(0xC0 | (c >> 6));
      s += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += char(0xE0 | (c >> 12));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    } else {
      s += char(0xF0 | (c >> 18));
      s += char(0x80 | ((c >> 12) & 0x3F));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    }
    return s;
  };
  std::mt19937 rng(7);
  std::vector<char32_t> probe = {0,      0x40,   0x41,    0x5A,    0x5B,     0x7E,
                                 0x7F,   0x80,   0x81,    0x82,    0x7FE,    0x7FF,
                                 0x800,  0x801,  0xD7FE,  0xD7FF,  0xE000,   0xE001,
                                 0xFFFE, 0xFFFF, 0x10000, 0x10001, 0x10FFFE, 0x10FFFF};
  for (int i = 0; i < 2000; ++i) {
    char32_t c = rng() % 0x110000;
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    probe.push_back(c);
  }
  for (char32_t c : probe) {
    bool inside = false;
    for (auto [lo, hi] : ranges) inside = inside || (c >= lo && c <= hi);
    if (c >= 0xD800 && c <= 0xDFFF) inside = false;
    EXPECT_EQ(matches(in, encode(c)), inside) << std::hex << uint32_t(c);
    EXPECT_EQ(matches(out, encode(c)), !inside) << std::hex << uint32_t(c);
  }
}

TEST(Grammar, RecursiveRules) {
  // Balanced parentheses: recursion that is not at the left edge.
  GrammarBuilder b;
  const int p = b.declare("parens");
  b.define(p, repeat(seq({lit("("), ref(p), lit(")")}), 0));
  const Grammar g = b.build(p);
  for (const char* s : {"", "()", "(())", "()()", "(()())((()))"}) EXPECT_TRUE(matches(g, s)) << s;
  for (const char* s : {"(", ")", "(()", "())", ")("}) EXPECT_FALSE(matches(g, s)) << s;
  EXPECT_TRUE(matches(g, std::string(500, '(') + std::string(500, ')')));
}

TEST(Grammar, OneOfLiterals) {
  const Grammar g = single(one_of_literals({"10", "1", "100", "2", "", "20"}));
  for (const char* s : {"", "1", "10", "100", "2", "20"}) EXPECT_TRUE(matches(g, s)) << s;
  for (const char* s : {"0", "1000", "3", "200", "21"}) EXPECT_FALSE(matches(g, s)) << s;
  EXPECT_EQ(g.literals().size(), 5u);
}

TEST(Grammar, RefusesLeftRecursionAndUndefinedRules) {
  GrammarBuilder b;
  const int a = b.declare("list");
  b.define(a, alt({seq({ref(a), lit(",x")}), lit("x")}));
  try {
    b.build(a);
    FAIL() << "left recursion was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'list' is left-recursive"), std::string::npos)
        << e.what();
  }
  // Hidden behind a nullable prefix.
  GrammarBuilder c;
  const int n = c.add("maybe", opt(lit("y")));
  const int r = c.declare("loop");
  c.define(r, alt({seq({ref(n), ref(r), lit("z")}), lit("z")}));
  EXPECT_THROW(c.build(r), Error);
  GrammarBuilder d;
  const int u = d.declare("missing");
  const int root = d.add("root", seq({lit("a"), ref(u)}));
  try {
    d.build(root);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'missing' is declared but never defined"),
              std::string::npos);
  }
}

TEST(Grammar, TooAmbiguousIsAnError) {
  // R ::= "a" R "b" | "a" R "c" | "x": after n a's, each of the 2^n strings of pending closers
  // is a parse of its own.
  GrammarBuilder b;
  const int r = b.declare("r");
  b.define(r,
           alt({seq({lit("a"), ref(r), lit("b")}), seq({lit("a"), ref(r), lit("c")}), lit("x")}));
  const Grammar g = b.build(r);
  Matcher m(g);
  EXPECT_TRUE(m.accept(std::string(10, 'a')));  // 1024 parses: fine
  try {
    m.accept("aaaa");
    FAIL() << "the number of parses stayed bounded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
  }
  Matcher ok(g);
  EXPECT_TRUE(ok.accept("aaxcb"));
  EXPECT_TRUE(ok.accepting());
}
