// TextStream on the toy byte-fallback tokenizer: deltas reassemble the whole decode, never carry
// half a character, stop strings spanning tokens cut the text, a held-back stop-string prefix is
// released once it stops matching (or at flush), and flush drops an incomplete character.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infer/text_stream.h"

using namespace zaya;

namespace {

const Tokenizer& toy() {
  static const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  return tok;
}

int32_t byte_id(uint8_t b) {
  return toy().token_id(fmt::format("<0x{:02X}>", b));
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    const size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

struct Streamed {
  std::vector<std::string> deltas;
  std::string text;  // all deltas plus the flush
  bool stopped = false;
  int stop_at = -1;  // index of the push that reported the stop
};

Streamed stream(const std::vector<int32_t>& ids, std::vector<std::string> stop, bool flush = true) {
  TextStream ts(toy(), std::move(stop));
  Streamed r;
  for (size_t i = 0; i < ids.size(); ++i) {
    TextStream::Delta d = ts.push(ids[i]);
    r.deltas.push_back(d.text);
    r.text += d.text;
    if (d.stopped && !r.stopped) r.stopped = true, r.stop_at = int(i);
  }
  if (flush) r.text += ts.flush();
  EXPECT_EQ(r.text, ts.emitted());
  return r;
}

const std::string kEuro = "\xE2\x82\xAC";

}  // namespace

TEST(TextStream, DeltasReassembleTheDecode) {
  const std::string text = "The quick brown fox, 42 times; καλημέρα 世界 😀!\n\nDone.";
  const std::vector<int32_t> ids = toy().encode(text);
  ASSERT_EQ(toy().decode(ids), text);
  const Streamed r = stream(ids, {});
  EXPECT_EQ(r.text, text);
  for (const std::string& d : r.deltas) EXPECT_TRUE(valid_utf8(d)) << d;
  EXPECT_FALSE(r.stopped);
}

TEST(TextStream, MultiByteCharacterSplitOverByteTokens) {
  // "€" is not in the toy vocabulary: three byte-fallback tokens.
  const std::vector<int32_t> ids = toy().encode("a" + kEuro + "b");
  ASSERT_EQ(ids.size(), 5u);
  ASSERT_EQ(ids[1], byte_id(0xE2));
  const Streamed r = stream(ids, {});
  EXPECT_EQ(r.deltas[0], "a");
  EXPECT_EQ(r.deltas[1], "");  // E2: incomplete, held
  EXPECT_EQ(r.deltas[2], "");  // 82: still incomplete
  EXPECT_EQ(r.deltas[3], kEuro);
  EXPECT_EQ(r.deltas[4], "b");
  EXPECT_EQ(r.text, "a" + kEuro + "b");
  // Two such characters back to back, then a plain token.
  std::vector<int32_t> two = {byte_id(0xE2), byte_id(0x82), byte_id(0xAC),
                              byte_id(0xE2), byte_id(0x82), byte_id(0xAC)};
  for (int32_t id : toy().encode(" ok")) two.push_back(id);
  EXPECT_EQ(stream(two, {}).text, kEuro + kEuro + " ok");
}

TEST(TextStream, FlushDropsAnIncompleteCharacter) {
  std::vector<int32_t> ids = toy().encode("ab");
  ids.push_back(byte_id(0xE2));
  ids.push_back(byte_id(0x82));
  const Streamed r = stream(ids, {});
  EXPECT_EQ(r.text, "ab");
  // A stray continuation byte is not an incomplete character: it is shown as U+FFFD.
  std::vector<int32_t> stray = toy().encode("ab");
  stray.push_back(byte_id(0x82));
  EXPECT_EQ(stream(stray, {}).text, "ab\xEF\xBF\xBD");
}

TEST(TextStream, StopStringSpanningTokens) {
  const std::string stop = "\nUser:";
  ASSERT_GT(toy().encode(stop).size(), 2u);  // the stop string spans several tokens
  const std::vector<int32_t> ids = toy().encode("one two\nUser: three four");
  const Streamed r = stream(ids, {stop});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "one two");
  // Stopped on the token that completed the stop string, not later.
  const size_t prefix_tokens = toy().encode("one two\nUser:").size();
  EXPECT_EQ(r.stop_at, int(prefix_tokens) - 1);
  // Nothing of the stop string was emitted before the match.
  for (int i = 0; i < r.stop_at; ++i) EXPECT_EQ(r.deltas[i].find('\n'), std::string::npos);
}

TEST(TextStream, EarliestOfSeveralStopStrings) {
  const Streamed r = stream(toy().encode("alpha beta gamma delta"), {"delta", "beta"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "alpha ");
}

TEST(TextStream, HeldPrefixReleasedWhenItStopsMatching) {
  // "two" could begin "two three"; once " four" arrives it cannot, and it is released.
  const std::vector<int32_t> ids = toy().encode("one two four");
  TextStream ts(toy(), {"two three"});
  std::string shown;
  bool held_two = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    shown += ts.push(ids[i]).text;
    const std::vector<int32_t> so_far(ids.begin(), ids.begin() + i + 1);
    const std::string decoded = toy().decode(so_far);
    // What is shown is always a prefix of the decode, and never ends in a prefix of the stop.
    EXPECT_EQ(decoded.compare(0, shown.size(), shown), 0);
    for (size_t len = 1; len < std::string("two three").size() && len <= shown.size(); ++len)
      EXPECT_NE(shown.substr(shown.size() - len), std::string("two three").substr(0, len));
    if (decoded.find("two") != std::string::npos && shown.find("two") == std::string::npos)
      held_two = true;
  }
  EXPECT_TRUE(held_two);
  EXPECT_EQ(shown, "one two four");
  EXPECT_EQ(ts.flush(), "");
}

TEST(TextStream, FlushReleasesAnUnfinishedStopPrefix) {
  const Streamed r = stream(toy().encode("one tw"), {"two"}, /*flush=*/false);
  EXPECT_EQ(r.text, "one ");
  TextStream ts(toy(), {"two"});
  std::string all;
  for (int32_t id : toy().encode("one tw")) all += ts.push(id).text;
  all += ts.flush();
  EXPECT_EQ(all, "one tw");
}

TEST(TextStream, StopOnMultiByteAndAfterStopNothing) {
  std::vector<int32_t> ids = toy().encode("a" + kEuro + "b c");
  TextStream ts(toy(), {kEuro});
  std::string all;
  bool stopped = false;
  for (int32_t id : ids) {
    TextStream::Delta d = ts.push(id);
    all += d.text;
    stopped = stopped || d.stopped;
    if (stopped) {
      EXPECT_TRUE(d.stopped);
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(all, "a");
  EXPECT_EQ(ts.flush(), "");
  EXPECT_EQ(ts.emitted(), "a");
}

TEST(TextStream, WindowedDecodeWithAStartStrippingDecoder) {
  // A Llama-style decoder strips one leading space of the whole text (Strip after Fuse): a naive
  // per-token decode would drop every word's space; the windowed decode must not.
  nlohmann::json j = toy().to_json();
  j["decoder"] = nlohmann::json::parse(R"({"type":"Sequence","decoders":[
      {"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},
      {"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]})");
  const Tokenizer tok = Tokenizer::from_json(j, "strip-test");
  const std::vector<int32_t> ids = tok.encode(" one two three " + kEuro + " four");
  const std::string whole = tok.decode(ids);
  ASSERT_EQ(whole, "one two three " + kEuro + " four");
  TextStream ts(tok, {});
  std::string text;
  for (int32_t id : ids) text += ts.push(id).text;
  text += ts.flush();
  EXPECT_EQ(text, whole);
}
