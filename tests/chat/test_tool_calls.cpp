// ToolCallParser (src/chat/tool_calls.cpp): the ZAYA XML tool calls of an answer as OpenAI calls —
// values typed by the tool's schema, arguments in the order written, several calls, whitespace
// leniency, what stays content (undeclared tools, malformed and unterminated calls, raw text
// exactly as written), stray closing tags dropped, deterministic ids, the streaming pieces, and the
// streaming property: any split of an output gives the content, calls and pieces of the whole.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "chat/tool_calls.h"

using zaya::chat::ToolCall;
using zaya::chat::ToolCallDelta;
using zaya::chat::ToolCallParser;
using ojson = nlohmann::ordered_json;

namespace {

const ojson& tools() {
  static const ojson t = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "units": {"type": "string", "enum": ["metric", "imperial"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "configure", "parameters": {"type": "object",
      "properties": {
        "flag": {"type": "boolean"}, "ratio": {"type": "number"}, "tags": {"type": "array"},
        "opts": {"type": "object"}, "nothing": {"type": "null"},
        "maybe": {"type": ["integer", "string"]}, "either": {"anyOf": [{"type": "integer"},
                                                                       {"type": "boolean"}]},
        "label": {"enum": ["a", "b"]}, "free": {"description": "no type"},
        "code": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "ping"}},
    {"type": "function", "function": {"name": "tool_b", "parameters": {}}}
  ])");
  return t;
}

std::string call(const std::string& name, const std::string& params) {
  return "<zyphra_tool_call>\n<function=" + name + ">\n" + params +
         "</function>\n</zyphra_tool_call>";
}
std::string param(const std::string& name, const std::string& value) {
  return "<parameter=" + name + ">\n" + value + "\n</parameter>\n";
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

struct Result {
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<ToolCallDelta> pieces;
};

// Pushes text cut at `cuts` (sorted byte offsets), then finish.
Result run(const std::string& text, const std::vector<size_t>& cuts, uint64_t seed = 7,
           const ojson& t = tools()) {
  ToolCallParser p(t, seed);
  Result r;
  auto take = [&](ToolCallParser::Delta d) {
    EXPECT_TRUE(valid_utf8(d.content)) << "a content delta splits a character: " << d.content;
    r.content += d.content;
    for (auto& c : d.calls) r.pieces.push_back(std::move(c));
  };
  size_t from = 0;
  for (size_t cut : cuts) {
    take(p.push(std::string_view(text).substr(from, cut - from)));
    from = cut;
  }
  take(p.push(std::string_view(text).substr(from)));
  take(p.finish());
  r.calls = p.calls();
  return r;
}
Result whole(const std::string& text) {
  return run(text, {});
}

// The arguments of each call put back together from its pieces.
std::vector<std::string> joined_arguments(const Result& r) {
  std::vector<std::string> args(r.calls.size());
  for (const auto& d : r.pieces) {
    EXPECT_LT(size_t(d.index), args.size());
    if (size_t(d.index) < args.size()) args[size_t(d.index)] += d.arguments;
  }
  return args;
}

void expect_same(const Result& a, const Result& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << what;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
  ASSERT_EQ(a.pieces.size(), b.pieces.size()) << what;
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    EXPECT_EQ(a.pieces[i].index, b.pieces[i].index) << what;
    EXPECT_EQ(a.pieces[i].id, b.pieces[i].id) << what;
    EXPECT_EQ(a.pieces[i].name, b.pieces[i].name) << what;
    EXPECT_EQ(a.pieces[i].arguments, b.pieces[i].arguments) << what;
  }
}

}  // namespace

TEST(ToolCallParser, OneCallWithContentBefore) {
  const Result r =
      whole("Let me check.\n" + call("get_weather", param("city", "Paris") + param("days", "3")));
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","days":3})");
  EXPECT_TRUE(std::regex_match(r.calls[0].id, std::regex("call_[a-z0-9]{24}"))) << r.calls[0].id;
}

TEST(ToolCallParser, ArgumentsKeepTheOrderWritten) {
  const Result r = whole(call("get_weather", param("units", "metric") + param("city", "Oslo")));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"units":"metric","city":"Oslo"})");
}

TEST(ToolCallParser, StringValuesLoseOneNewlineEachSide) {
  // Only the template's framing newline on each side goes; the rest is the value.
  const Result r =
      whole(call("get_weather", "<parameter=city>\n\n  line1\nline2  \n\n</parameter>\n"));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(ojson::parse(r.calls[0].arguments)["city"], "\n  line1\nline2  \n");
  // Typed-looking text of a string parameter stays a string.
  const Result s = whole(call("get_weather", param("city", "42") + param("units", "null")));
  EXPECT_EQ(s.calls.at(0).arguments, R"({"city":"42","units":"null"})");
  // No newlines at all, and an empty string.
  const Result t = whole(call("get_weather", "<parameter=city>Rome</parameter>"));
  EXPECT_EQ(t.calls.at(0).arguments, R"({"city":"Rome"})");
  const Result u = whole(call("get_weather", "<parameter=city>\n\n</parameter>"));
  EXPECT_EQ(u.calls.at(0).arguments, R"({"city":""})");
}

TEST(ToolCallParser, ValuesTypedBySchema) {
  const Result r = whole(call(
      "configure", param("flag", "true") + param("ratio", "2.5") + param("tags", R"(["x", 1])") +
                       param("opts", R"({"z": 1, "a": {"k": [true]}})") + param("nothing", "null") +
                       param("maybe", "7") + param("either", "false") + param("label", "b") +
                       param("free", "12") + param("code", "x = [1, 2]")));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(
      r.calls[0].arguments,
      R"({"flag":true,"ratio":2.5,"tags":["x",1],"opts":{"z":1,"a":{"k":[true]}},)"
      R"("nothing":null,"maybe":7,"either":false,"label":"b","free":12,"code":"x = [1, 2]"})");
}

TEST(ToolCallParser, TypedValuesFallBackToText) {
  const Result r = whole(call("configure", param("flag", "True") + param("ratio", "fast") +
                                               param("tags", "[1, 2") + param("opts", "not json") +
                                               param("maybe", "seven") + param("either", "maybe") +
                                               param("free", "hello world")));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            R"({"flag":true,"ratio":"fast","tags":"[1, 2","opts":"not json","maybe":"seven",)"
            R"("either":"maybe","free":"hello world"})");
  // An integer parameter given a float keeps the number the model wrote.
  EXPECT_EQ(whole(call("get_weather", param("days", "2.5"))).calls.at(0).arguments,
            R"({"days":2.5})");
  // Nested past the JSON depth limit: the text, no crash.
  const std::string deep(5000, '[');
  EXPECT_EQ(
      ojson::parse(whole(call("configure", param("tags", deep))).calls.at(0).arguments)["tags"],
      deep);
}

TEST(ToolCallParser, UndeclaredParametersAreJsonWhenTheyParse) {
  const Result r =
      whole(call("get_weather", param("city", "Paris") + param("extra", "5") +
                                    param("note", "hi there") + param("obj", R"({"b":1,"a":2})")));
  EXPECT_EQ(r.calls.at(0).arguments,
            R"({"city":"Paris","extra":5,"note":"hi there","obj":{"b":1,"a":2}})");
  // A tool without parameters: the same rule for every parameter.
  EXPECT_EQ(whole(call("ping", param("n", "1"))).calls.at(0).arguments, R"({"n":1})");
}

TEST(ToolCallParser, EmptyArguments) {
  const Result r = whole(call("ping", ""));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(joined_arguments(r), std::vector<std::string>{"{}"});
  EXPECT_EQ(whole("<zyphra_tool_call><function=tool_b></function></zyphra_tool_call>")
                .calls.at(0)
                .arguments,
            "{}");
}

TEST(ToolCallParser, Unicode) {
  const std::string city = "Z\xC3\xBCrich \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80";
  const Result r = whole("\xC3\xA9t\xC3\xA9\n" + call("get_weather", param("city", city)));
  EXPECT_EQ(r.content, "\xC3\xA9t\xC3\xA9");
  // ensure_ascii off: the characters themselves, not \u escapes.
  EXPECT_EQ(r.calls.at(0).arguments, R"({"city":")" + city + R"("})");
  // Invalid UTF-8 from the model: replaced, still valid JSON.
  const Result bad = whole(call("get_weather", param("city",
                                                     "a\xFF"
                                                     "b")));
  EXPECT_EQ(ojson::parse(bad.calls.at(0).arguments)["city"],
            "a\xEF\xBF\xBD"
            "b");
}

TEST(ToolCallParser, SeveralCalls) {
  const Result r = whole("Two lookups.\n" + call("get_weather", param("city", "A")) + "\n" +
                         call("get_weather", param("city", "B")) + "\n" + call("ping", "") + "\n");
  EXPECT_EQ(r.content, "Two lookups.");
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"A"})");
  EXPECT_EQ(r.calls[1].arguments, R"({"city":"B"})");
  EXPECT_EQ(r.calls[2].name, "ping");
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  EXPECT_NE(r.calls[1].id, r.calls[2].id);
  // Two functions in one wrapper are two calls.
  const Result two =
      whole("<zyphra_tool_call>\n<function=ping>\n</function>\n<function=get_weather>" +
            param("city", "C") + "</function>\n</zyphra_tool_call>");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].name, "ping");
  EXPECT_EQ(two.calls[1].arguments, R"({"city":"C"})");
}

TEST(ToolCallParser, ContentAfterCalls) {
  // Text after a call is content; whitespace alone after the last call is not.
  EXPECT_EQ(whole("A\n" + call("ping", "") + "\nB").content, "A\nB");
  EXPECT_EQ(whole(call("ping", "") + "\n\n").content, "");
  EXPECT_EQ(whole(call("ping", "") + " \n done").content, " \n done");
  // Content with no calls at all is untouched, trailing newline included.
  EXPECT_EQ(whole("just text\n").content, "just text\n");
  EXPECT_EQ(whole("  <function=ping> bare, without the wrapper").content,
            "  <function=ping> bare, without the wrapper");
}

TEST(ToolCallParser, LenientAboutWhitespace) {
  const std::string tight =
      "<zyphra_tool_call><function=get_weather><parameter=city>Paris</parameter>"
      "<parameter=days>2</parameter></function></zyphra_tool_call>";
  EXPECT_EQ(whole(tight).calls.at(0).arguments, R"({"city":"Paris","days":2})");
  const std::string loose =
      "<zyphra_tool_call>\n\n  <function= get_weather >\n\n<parameter= days >\n 4 \n</parameter>"
      "\n\n\t</function>  \n</zyphra_tool_call>";
  EXPECT_EQ(whole(loose).calls.at(0).arguments, R"({"days":4})");
  // </parameter> left out before the next parameter or </function>; </function> left out.
  const std::string missing =
      "<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n<parameter=days>\n5\n"
      "</function>\n</zyphra_tool_call>";
  EXPECT_EQ(whole(missing).calls.at(0).arguments, R"({"city":"Lima","days":5})");
  const std::string no_function_close =
      "<zyphra_tool_call>\n<function=get_weather>\n<parameter=days>\n6\n</parameter>\n"
      "</zyphra_tool_call>";
  EXPECT_EQ(whole(no_function_close).calls.at(0).arguments, R"({"days":6})");
}

TEST(ToolCallParser, UndeclaredToolStaysContent) {
  const std::string raw = call("rm_rf", param("path", "/"));
  const Result r = whole("Sure.\n" + raw + "\nok");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_TRUE(r.pieces.empty());
  EXPECT_EQ(r.content, "Sure.\n" + raw + "\nok");  // exactly as written
  // No tools declared at all: every call is content.
  const Result none = run(call("ping", ""), {}, 7, ojson());
  EXPECT_TRUE(none.calls.empty());
  EXPECT_EQ(none.content, call("ping", ""));
}

TEST(ToolCallParser, MalformedCallsStayContent) {
  for (const std::string raw : {
           "<zyphra_tool_call>\nI will call it\n</zyphra_tool_call>",
           "<zyphra_tool_call>\n<function=ping\n</zyphra_tool_call>",  // no ">"
           "<zyphra_tool_call>\n<function=>\n</function>\n</zyphra_tool_call>",
           "<zyphra_tool_call>\n<function=ping>\njunk\n</function>\n</zyphra_tool_call>",
           "<zyphra_tool_call>\n<function=ping>\n</function>\ntrailing\n</zyphra_tool_call>",
           "<zyphra_tool_call>\n<function=get_weather>\n<parameter=city\n</zyphra_tool_call>",
           "<zyphra_tool_call></zyphra_tool_call>",
       }) {
    const Result r = whole("x\n" + raw + "\ny");
    EXPECT_TRUE(r.calls.empty()) << raw;
    EXPECT_EQ(r.content, "x\n" + raw + "\ny") << raw;
  }
}

TEST(ToolCallParser, UnterminatedCallStaysContent) {
  const std::string open = "<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nPar";
  Result r = whole("Hi\n" + open);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "Hi\n" + open);
  // Closed function, wrapper never closed: still unterminated.
  const std::string almost = "<zyphra_tool_call>\n<function=ping>\n</function>\n";
  r = whole(almost);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, almost);
  // A new call opens before the first closed: the first is content, the second a call.
  r = whole("a\n" + open + "\n" + call("ping", ""));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "ping");
  EXPECT_EQ(r.calls[0].id, zaya::chat::tool_call_id(7, 0));
  EXPECT_EQ(r.content, "a\n" + open);
}

TEST(ToolCallParser, StrayClosingTagsNeverLeak) {
  EXPECT_EQ(whole("A</zyphra_tool_call>B</function>C").content, "ABC");
  const Result r = whole(call("ping", "") + "</zyphra_tool_call>\n</function>done");
  EXPECT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "\ndone");
  // Streamed a byte at a time, the partial tags are held and then dropped.
  const std::string text = "x</zyphra_tool_call>y</function>z";
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  EXPECT_EQ(run(text, every).content, "xyz");
}

TEST(ToolCallParser, Ids) {
  const std::string a = zaya::chat::tool_call_id(1, 0);
  EXPECT_TRUE(std::regex_match(a, std::regex("call_[a-z0-9]{24}"))) << a;
  EXPECT_EQ(a, zaya::chat::tool_call_id(1, 0));
  EXPECT_NE(a, zaya::chat::tool_call_id(1, 1));
  EXPECT_NE(a, zaya::chat::tool_call_id(2, 0));
  // The parser's ids are those, by seed and index.
  const Result r = run(call("ping", "") + call("ping", ""), {}, 99);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, zaya::chat::tool_call_id(99, 0));
  EXPECT_EQ(r.calls[1].id, zaya::chat::tool_call_id(99, 1));
}

TEST(ToolCallParser, StreamingPieces) {
  ToolCallParser p(tools(), 5);
  auto d = p.push("Checking.\n<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nPa");
  EXPECT_EQ(d.content, "Checking.");
  EXPECT_TRUE(d.calls.empty());  // a call comes out when it closes
  d = p.push("ris\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.calls.empty());
  d = p.push("</zyphra_tool_call>");
  ASSERT_EQ(d.calls.size(), 4u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_EQ(d.calls[0].id, zaya::chat::tool_call_id(5, 0));
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "");
  EXPECT_EQ(d.calls[1].arguments, R"({"city":"Paris")");
  EXPECT_EQ(d.calls[2].arguments, R"(,"days":2)");
  EXPECT_EQ(d.calls[3].arguments, "}");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(d.calls[i].index, 0);
    EXPECT_EQ(d.calls[i].id, "");
    EXPECT_EQ(d.calls[i].name, "");
  }
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(p.calls()[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(p.finish().content, "");
}

TEST(ToolCallParser, HoldsBackWhatMayBeATag) {
  ToolCallParser p(tools(), 1);
  EXPECT_EQ(p.push("Hello <zyph").content, "Hello ");
  EXPECT_EQ(p.push("ony").content, "<zyphony");
  EXPECT_EQ(p.push("line\n").content, "line");  // the newline may precede a call
  EXPECT_EQ(p.push("next").content, "\nnext");
  EXPECT_EQ(p.push("</func").content, "");
  EXPECT_EQ(p.push("tion>").content, "");
  EXPECT_EQ(p.push("\xE6\x9D").content, "");  // half a character
  EXPECT_EQ(p.push("\xB1").content, "\xE6\x9D\xB1");
  EXPECT_EQ(p.push("end\n").content, "end");
  EXPECT_EQ(p.finish().content, "\n");
}

// The streaming property over outputs assembled from calls (valid, undeclared, malformed,
// unterminated), stray tags, pieces of tags, newlines and multibyte text, each pushed whole, byte
// by byte and in random pieces.
TEST(ToolCallParser, AnySplitEqualsTheWholeOutput) {
  const std::vector<std::string> parts = {
      call("get_weather", param("city", "Paris") + param("days", "3")),
      call("configure", param("opts", R"({"b": [1, "\u00e9"]})") + param("flag", "false")),
      call("ping", ""),
      call("nope", param("a", "1")),
      "<zyphra_tool_call>\n<function=ping>\njunk</zyphra_tool_call>",
      "<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\n\xC3\xA9",
      "<zyphra_tool_call>",
      "</zyphra_tool_call>",
      "</function>",
      "<zyph",
      "</func",
      "\n",
      " ",
      "text",
      "\xC3\xA9",
      "\xE6\x9D\xB1\xE4\xBA\xAC",
      "\xF0\x9F\x98\x80",
      "<parameter=x>",
  };
  std::mt19937 rng(33);
  size_t calls = 0, raw = 0;  // the outputs exercise both outcomes
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 10)(rng);
    for (int i = 0; i < n; ++i)
      text += parts[std::uniform_int_distribution<size_t>(0, parts.size() - 1)(rng)];
    const Result expected = whole(text);
    calls += expected.calls.size();
    raw += expected.content.find("<zyphra_tool_call>") != std::string::npos;
    // A call's pieces join to its arguments, which are a JSON object.
    const auto args = joined_arguments(expected);
    for (size_t i = 0; i < expected.calls.size(); ++i) {
      EXPECT_EQ(args[i], expected.calls[i].arguments);
      EXPECT_TRUE(ojson::parse(expected.calls[i].arguments).is_object());
    }
    std::vector<size_t> every;
    for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
    expect_same(run(text, every), expected, "byte by byte: " + text);
    for (int k = 0; k < 6; ++k) {
      std::vector<size_t> cuts;
      const int m = std::uniform_int_distribution<int>(1, 8)(rng);
      for (int i = 0; i < m; ++i)
        cuts.push_back(std::uniform_int_distribution<size_t>(0, text.size())(rng));
      std::sort(cuts.begin(), cuts.end());
      expect_same(run(text, cuts), expected, "random cuts: " + text);
    }
    if (HasFailure()) break;
  }
  EXPECT_GT(calls, 100u);
  EXPECT_GT(raw, 30u);
}

// A long call and long content pushed a byte at a time stay linear.
TEST(ToolCallParser, LongOutputsByteByByte) {
  const std::string value(200'000, 'v');
  const std::string text = std::string(100'000, ' ') + "\n" +
                           call("get_weather", param("city", value)) + std::string(100'000, '\n');
  ToolCallParser p(tools(), 3);
  std::string content;
  for (char c : text) content += p.push(std::string_view(&c, 1)).content;
  content += p.finish().content;
  EXPECT_EQ(content, std::string(100'000, ' '));
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(p.calls()[0].arguments, R"({"city":")" + value + R"("})");
}
