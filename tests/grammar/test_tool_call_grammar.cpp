// The ZAYA1 tool-call grammar: hand-written calls accepted or refused; random walks end in calls
// that a small parser of the format reads back (declared names, declared arguments, required ones
// present, JSON values valid by their schema, string values free of "</parameter>"); bad tools
// arrays and unknown forced names are SchemaErrors.
#include "grammar/tool_call_grammar.h"

#include "grammar_test_util.h"

using namespace zaya;
using namespace zaya::grammar;
using namespace zaya::test;

namespace {

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","description":"Weather",
   "parameters":{"type":"object","properties":{
     "city":{"type":"string","maxLength":12},
     "unit":{"type":"string","enum":["celsius","fahrenheit"]},
     "days":{"type":"integer","minimum":1,"maximum":14},
     "detail":{"type":"object","properties":{"hourly":{"type":"boolean"}},"required":["hourly"]}},
   "required":["city"]}}},
  {"type":"function","function":{"name":"now","description":"The time","parameters":{
   "type":"object","properties":{}}}},
  {"type":"function","function":{"name":"note","parameters":{"type":"object","properties":{
   "text":{"type":"string","minLength":1,"maxLength":30},"when":{"type":"string","format":"date"}},
   "required":["text","when"]}}}
])";

bool matches(const Grammar& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.accepting();
}

std::string call(const std::string& name,
                 const std::vector<std::pair<std::string, std::string>>& args) {
  std::string s = "<zyphra_tool_call>\n<function=" + name + ">\n";
  for (const auto& [k, v] : args) s += "<parameter=" + k + ">\n" + v + "\n</parameter>\n";
  return s + "</function>\n</zyphra_tool_call>";
}

struct Parsed {
  std::string name;
  std::vector<std::pair<std::string, std::string>> args;
};

// A strict reader of the format: the calls, or an error.
std::vector<Parsed> parse_calls(std::string_view s, std::string& error) {
  std::vector<Parsed> out;
  auto eat = [&](std::string_view what) {
    if (s.substr(0, what.size()) != what) return false;
    s.remove_prefix(what.size());
    return true;
  };
  for (;;) {
    Parsed p;
    if (!eat("<zyphra_tool_call>\n<function=")) return error = "no call at: " + std::string(s), out;
    const size_t gt = s.find(">\n");
    p.name = s.substr(0, gt);
    s.remove_prefix(gt + 2);
    while (eat("<parameter=")) {
      const size_t g2 = s.find(">\n");
      std::string k(s.substr(0, g2));
      s.remove_prefix(g2 + 2);
      const size_t end = s.find("</parameter>");
      if (end == std::string_view::npos || end == 0 || s[end - 1] != '\n')
        return error = "unterminated value", out;
      p.args.emplace_back(k, std::string(s.substr(0, end - 1)));
      s.remove_prefix(end + std::string_view("</parameter>\n").size());
    }
    if (!eat("</function>\n</zyphra_tool_call>")) return error = "no function end", out;
    out.push_back(std::move(p));
    if (s.empty()) return out;
    if (!eat("\n")) return error = "junk after a call", out;
  }
}

std::string why_bad_call(const Parsed& p, const ojson& tools) {
  for (const ojson& t : tools) {
    const ojson& fn = t["function"];
    if (fn["name"] != p.name) continue;
    const ojson params = fn.value("parameters", ojson::object());
    const ojson props = params.value("properties", ojson::object());
    for (const ojson& r : params.value("required", ojson::array())) {
      bool present = false;
      for (const auto& a : p.args) present = present || a.first == r.get<std::string>();
      if (!present) return "missing " + r.get<std::string>();
    }
    for (const auto& [k, v] : p.args) {
      if (!props.contains(k)) return "undeclared argument " + k;
      const ojson& s = props[k];
      const ojson value = s.value("type", "") == "string" ? ojson(v) : ojson::parse(v);
      if (auto w = why_invalid(value, s, params); !w.empty()) return k + ": " + w + " in " + v;
    }
    return "";
  }
  return "undeclared function " + p.name;
}

}  // namespace

TEST(ToolCallGrammar, HandWrittenCalls) {
  const ojson tools = ojson::parse(kTools);
  const Grammar g = zaya_tool_calls(tools, "");
  const std::string weather = call("get_weather", {{"city", "Paris"}, {"days", "3"}});
  EXPECT_TRUE(matches(g, weather));
  EXPECT_TRUE(matches(g, call("now", {})));
  EXPECT_TRUE(matches(g, weather + "\n" + call("now", {})));
  EXPECT_TRUE(matches(
      g, call("get_weather",
              {{"city", "a</b>\n<c"}, {"unit", "celsius"}, {"detail", R"({"hourly": true})"}})));
  EXPECT_TRUE(matches(g, call("note", {{"text", "buy milk"}, {"when", "2025-06-01"}})));
  EXPECT_FALSE(matches(g, call("get_weather", {{"days", "3"}})));                 // required city
  EXPECT_FALSE(matches(g, call("get_weather", {{"days", "3"}, {"city", "P"}})));  // order
  EXPECT_FALSE(matches(g, call("get_weather", {{"city", "P"}, {"days", "15"}})));
  EXPECT_FALSE(matches(g, call("get_weather", {{"city", "P"}, {"unit", "kelvin"}})));
  EXPECT_FALSE(matches(g, call("get_weather", {{"city", "Paris</parameter>"}})));
  EXPECT_FALSE(matches(g, call("get_weather", {{"city", "much too long a name"}})));
  EXPECT_FALSE(matches(g, call("get_weather", {{"city", "P"}, {"wind", "1"}})));
  EXPECT_FALSE(matches(g, call("other", {})));
  EXPECT_FALSE(matches(g, call("note", {{"text", ""}, {"when", "2025-06-01"}})));  // minLength
  EXPECT_FALSE(matches(g, ""));
  EXPECT_FALSE(matches(g, weather + "\n"));
  // Forced: only that function.
  const Grammar only = zaya_tool_calls(tools, "now");
  EXPECT_TRUE(matches(only, call("now", {})));
  EXPECT_FALSE(matches(only, weather));
  // The control token's text is a literal of the grammar (token_mask.h admits it).
  bool found = false;
  for (const std::string& l : g.literals()) found = found || l.find("<zyphra_tool_call>") == 0;
  EXPECT_TRUE(found);
}

TEST(ToolCallGrammar, UnboundedStringValues) {
  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"write",
      "parameters":{"type":"object","properties":{"path":{"type":"string"},
      "body":{"type":"string","minLength":3}},"required":["path","body"]}}}])");
  const Grammar g = zaya_tool_calls(tools, "");
  const std::string code(20000, 'x');
  EXPECT_TRUE(
      matches(g, call("write", {{"path", "a.html"}, {"body", "<p>" + code + "</p>\n</pa"}})));
  EXPECT_FALSE(matches(g, call("write", {{"path", "a"}, {"body", "ab"}})));
  EXPECT_FALSE(matches(g, call("write", {{"path", "a"}, {"body", "abc</parameter>"}})));
  EXPECT_TRUE(matches(g, call("write", {{"path", "a"}, {"body", "abc</parameter"}})));
}

TEST(ToolCallGrammar, RandomWalksParseAndValidate) {
  const ojson tools = ojson::parse(kTools);
  const int32_t eos[] = {toy_tokenizer().eos_id()};
  for (const char* only : {"", "note"}) {
    const Grammar g = zaya_tool_calls(tools, only);
    std::mt19937 rng(21);
    int finished = 0;
    for (int w = 0; w < 12; ++w) {
      const Walk walk = random_walk(toy_vocab(), g, eos, rng, 800);
      if (!walk.finished) continue;
      ++finished;
      std::string error;
      const std::vector<Parsed> calls = parse_calls(walk.text, error);
      ASSERT_EQ(error, "") << walk.text;
      ASSERT_FALSE(calls.empty());
      for (const Parsed& p : calls) {
        EXPECT_EQ(why_bad_call(p, tools), "") << walk.text;
        if (*only) {
          EXPECT_EQ(p.name, only);
        }
      }
    }
    EXPECT_GE(finished, 6);
  }
}

TEST(ToolCallGrammar, BadToolsAreSchemaErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([])", "non-empty array"},
      {R"({"type":"function"})", "non-empty array"},
      {R"([{"type":"function"}])", "'function' object"},
      {R"([{"type":"retrieval","function":{"name":"a"}}])", "#/0/type"},
      {R"([{"type":"function","function":{"name":""}}])", "#/0/function/name"},
      {R"([{"type":"function","function":{"name":"a>b"}}])", "holds '>'"},
      {R"([{"type":"function","function":{"name":"a","parameters":{"type":"object",
          "properties":{"x":{"type":"string","pattern":"^a"}}}}}])",
       "#/0/function/parameters/properties/x: 'pattern' is not supported"},
      {R"([{"type":"function","function":{"name":"a","parameters":{"type":"object",
          "properties":{"x":{"type":"array","uniqueItems":true}}}}}])",
       "#/0/function/parameters/properties/x: 'uniqueItems' is not supported"},
      {R"([{"type":"function","function":{"name":"a","parameters":{"type":"array"}}}])",
       "type 'object'"},
  };
  for (const auto& [text, needle] : cases) {
    try {
      zaya_tool_calls(ojson::parse(text), "");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const SchemaError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  try {
    zaya_tool_calls(ojson::parse(kTools), "send_mail");
    FAIL();
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("'send_mail', which is not among the tools"),
              std::string::npos)
        << e.what();
  }
}
