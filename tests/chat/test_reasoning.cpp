// ReasoningSplitter (src/chat/reasoning.cpp): where reasoning ends and content begins, held-back
// partial tags and UTF-8 characters, and the streaming property — any split of an output, byte by
// byte included, gives the same reasoning and content as the whole output, and as a plain
// non-streaming reading of the rules (reference() below), with no delta ending inside a character.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/reasoning.h"

using zaya::chat::ReasoningSplitter;

namespace {

struct Split {
  std::string reasoning, content;
  bool operator==(const Split&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Split& s) {
  return os << "{reasoning: \"" << s.reasoning << "\", content: \"" << s.content << "\"}";
}

// The rules of chat/reasoning.h applied to a whole output at once, written independently of the
// streaming code.
Split reference(const std::string& text, bool starts_in_reasoning) {
  size_t j = text.find_first_not_of(" \t\r\n");
  if (j == std::string::npos) j = text.size();
  bool reasoning = starts_in_reasoning;
  std::string rest = text;
  if (text.compare(j, 7, "<think>") == 0) {
    reasoning = true;
    rest = text.substr(j + 7);
  }
  if (!reasoning) return {"", rest};
  const size_t p = rest.find("</think>");
  if (p == std::string::npos) return {rest, ""};
  std::string content = rest.substr(p + 8);
  content.erase(0, content.find_first_not_of("\r\n") == std::string::npos
                       ? content.size()
                       : content.find_first_not_of("\r\n"));
  return {rest.substr(0, p), content};
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Pushes text cut at `cuts` (sorted byte offsets), checking every delta is whole UTF-8.
Split run(const std::string& text, bool starts, const std::vector<size_t>& cuts) {
  ReasoningSplitter s(starts);
  Split out;
  size_t from = 0;
  auto take = [&](const ReasoningSplitter::Delta& d) {
    EXPECT_TRUE(valid_utf8(d.reasoning)) << "reasoning delta splits a character: " << d.reasoning;
    EXPECT_TRUE(valid_utf8(d.content)) << "content delta splits a character: " << d.content;
    out.reasoning += d.reasoning;
    out.content += d.content;
  };
  for (size_t cut : cuts) {
    take(s.push(std::string_view(text).substr(from, cut - from)));
    from = cut;
  }
  take(s.push(std::string_view(text).substr(from)));
  take(s.finish());
  return out;
}

Split whole(const std::string& text, bool starts) {
  return run(text, starts, {});
}

}  // namespace

TEST(ReasoningSplitter, PromptOpenedThinking) {
  EXPECT_EQ(whole("Let me see.\n</think>\n\nThe answer is 4.", true),
            (Split{"Let me see.\n", "The answer is 4."}));
  // Never closed: all of it is reasoning.
  EXPECT_EQ(whole("still thinking", true), (Split{"still thinking", ""}));
  // A redundant <think> at the start is dropped with the whitespace before it.
  EXPECT_EQ(whole("\n<think>\nhmm</think>ok", true), (Split{"\nhmm", "ok"}));
  // Leading whitespace that opens nothing stays in the reasoning.
  EXPECT_EQ(whole("\n\nhmm</think>ok", true), (Split{"\n\nhmm", "ok"}));
}

TEST(ReasoningSplitter, LeadingThinkOpensReasoning) {
  ReasoningSplitter s(false);
  EXPECT_FALSE(s.saw_reasoning());
  EXPECT_FALSE(s.in_reasoning());
  const auto d = s.push("  \n<think>plan</think>\n\nanswer");
  EXPECT_EQ(d.reasoning, "plan");
  EXPECT_EQ(d.content, "answer");
  EXPECT_TRUE(s.saw_reasoning());
  EXPECT_FALSE(s.in_reasoning());
}

TEST(ReasoningSplitter, NoThinkingIsAllContent) {
  // enable_thinking false: the prompt closed an empty block; the output is the answer.
  ReasoningSplitter s(false);
  const auto d = s.push("Hello <think>not reasoning</think> there");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Hello <think>not reasoning</think> there");
  EXPECT_FALSE(s.saw_reasoning());
  EXPECT_EQ(whole("  spaced", false), (Split{"", "  spaced"}));
  EXPECT_EQ(whole("", false), (Split{"", ""}));
  EXPECT_EQ(whole("", true), (Split{"", ""}));
}

TEST(ReasoningSplitter, TagsInContentAreContent) {
  EXPECT_EQ(whole("r</think>\nA <think>B</think>\nC", true), (Split{"r", "A <think>B</think>\nC"}));
}

TEST(ReasoningSplitter, HoldsBackAPartialCloseTag) {
  ReasoningSplitter s(true);
  auto d = s.push("abc</th");
  EXPECT_EQ(d.reasoning, "abc");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(s.in_reasoning());
  d = s.push("ink>\n");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");  // the newline after </think> is dropped
  EXPECT_FALSE(s.in_reasoning());
  d = s.push("\nx");
  EXPECT_EQ(d.content, "x");

  // Not a tag after all: released as soon as that is clear.
  ReasoningSplitter t(true);
  EXPECT_EQ(t.push("a</th").reasoning, "a");
  EXPECT_EQ(t.push("x").reasoning, "</thx");
  // At the end, what was held is flushed where it was.
  ReasoningSplitter u(true);
  EXPECT_EQ(u.push("abc</thi").reasoning, "abc");
  EXPECT_EQ(u.finish().reasoning, "</thi");
}

TEST(ReasoningSplitter, HoldsBackAPossibleLeadingThink) {
  ReasoningSplitter s(false);
  auto d = s.push(" <thi");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(d.reasoning, "");
  d = s.push("nk>x");
  EXPECT_EQ(d.reasoning, "x");
  ReasoningSplitter t(false);
  EXPECT_EQ(t.push("<thi").content, "");
  EXPECT_EQ(t.finish().content, "<thi");
  ReasoningSplitter u(false);
  EXPECT_EQ(u.push("<thin").content, "");
  EXPECT_EQ(u.push("g").content, "<thing");
}

TEST(ReasoningSplitter, NeverSplitsACharacter) {
  const std::string e = "\xC3\xA9";              // é
  const std::string kanji = "\xE6\x9D\xB1";      // 東
  const std::string emoji = "\xF0\x9F\x98\x80";  // 😀
  ReasoningSplitter s(true);
  EXPECT_EQ(s.push(e.substr(0, 1)).reasoning, "");
  EXPECT_EQ(s.push(e.substr(1)).reasoning, e);
  EXPECT_EQ(s.push(kanji.substr(0, 2)).reasoning, "");
  EXPECT_EQ(s.push(kanji.substr(2) + emoji.substr(0, 3)).reasoning, kanji);
  EXPECT_EQ(s.push(emoji.substr(3) + "</think>" + e.substr(0, 1)).reasoning, emoji);
  auto d = s.push(e.substr(1));
  EXPECT_EQ(d.content, e);
  // Invalid UTF-8 is not held forever: it passes through (a lone continuation byte at once, a
  // truncated character at the end).
  ReasoningSplitter t(false);
  EXPECT_EQ(t.push("x\x80").content, "x\x80");
  EXPECT_EQ(t.push("\xE6\x9D").content, "");
  EXPECT_EQ(t.finish().content, "\xE6\x9D");
}

TEST(ReasoningSplitter, HelpersOnTheirOwn) {
  using zaya::chat::incomplete_utf8_tail;
  using zaya::chat::partial_tag_suffix;
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xC3"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("a\xC3\xA9"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xFF"), 0u);
  EXPECT_EQ(partial_tag_suffix("abc</thi", "</think>"), 5u);
  EXPECT_EQ(partial_tag_suffix("abc</think>", "</think>"), 0u);  // whole: not a partial
  EXPECT_EQ(partial_tag_suffix("<<", "<think>"), 1u);
  EXPECT_EQ(partial_tag_suffix("", "<think>"), 0u);
}

// The streaming property over many outputs (made of tags, pieces of tags, newlines, ASCII and
// multibyte characters) and many splits each, cut at random bytes (inside characters too).
TEST(ReasoningSplitter, AnySplitEqualsTheWholeOutput) {
  const std::vector<std::string> parts = {"<think>",
                                          "</think>",
                                          "<",
                                          "</",
                                          "</th",
                                          "<thi",
                                          "think>",
                                          ">",
                                          "\n",
                                          "\r\n",
                                          " ",
                                          "a",
                                          "bc",
                                          "\xC3\xA9",
                                          "\xE6\x9D\xB1\xE4\xBA\xAC",
                                          "\xF0\x9F\x98\x80",
                                          "<think",
                                          "</think"};
  std::mt19937 rng(20240533);
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int i = 0; i < n; ++i)
      text += parts[std::uniform_int_distribution<size_t>(0, parts.size() - 1)(rng)];
    for (bool starts : {false, true}) {
      const Split expected = reference(text, starts);
      ASSERT_EQ(whole(text, starts), expected) << "text: " << text << " starts: " << starts;
      std::vector<size_t> every(text.size() > 0 ? text.size() - 1 : 0);
      for (size_t i = 0; i < every.size(); ++i) every[i] = i + 1;
      ASSERT_EQ(run(text, starts, every), expected) << "byte by byte: " << text;
      for (int k = 0; k < 8; ++k) {
        std::vector<size_t> cuts;
        const int m = std::uniform_int_distribution<int>(1, 6)(rng);
        for (int i = 0; i < m; ++i)
          cuts.push_back(std::uniform_int_distribution<size_t>(0, text.size())(rng));
        std::sort(cuts.begin(), cuts.end());
        ASSERT_EQ(run(text, starts, cuts), expected) << "text: " << text;
      }
    }
  }
}

// Long outputs pushed a byte at a time stay linear (held text is never rescanned from its start):
// quadratic work here would take minutes.
TEST(ReasoningSplitter, LongRunsByteByByte) {
  const std::string spaces(200'000, ' ');
  for (bool think : {false, true}) {
    ReasoningSplitter s(false);
    Split out;
    for (char c : spaces) {
      const auto d = s.push(std::string_view(&c, 1));
      out.reasoning += d.reasoning;
      out.content += d.content;
    }
    const auto d = s.push(think ? "<think>x" : "y");
    out.reasoning += d.reasoning + s.finish().reasoning;
    out.content += d.content;
    EXPECT_EQ(out, think ? (Split{"x", ""}) : (Split{"", spaces + "y"}));
  }
}
