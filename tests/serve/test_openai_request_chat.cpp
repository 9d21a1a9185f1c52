// The OpenAI chat request parser with a chat template (chat/chat_template.h), without a server:
// rendering (no BOS before a template's text, the transcript's BOS and stop), chat_template_kwargs
// over the server's, tools and tool_choice (the output plan, the grammar constraint, every
// rejection), response_format (json_object, json_schema, an unsupported construct named),
// parallel_tool_calls, return_tokens_as_token_ids and its logprobs shape.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "data/tokenizer.h"
#include "grammar/token_mask.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"

using namespace zaya;
using namespace zaya::openai;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const Tokenizer& toy() {
  static const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  return tok;
}

const chat::ChatTemplate& chatml() {
  static const chat::ChatTemplate t = chat::ChatTemplate::from_source(
      chat::builtin_chatml_source(), "built-in ChatML", chat::ChatFormat::BuiltinChatML);
  return t;
}

const chat::ChatTemplate& transcript() {
  static const chat::ChatTemplate t = [] {
    chat::ChatTemplate x;
    x.format = chat::ChatFormat::Transcript;
    x.origin = "transcript";
    return x;
  }();
  return t;
}

ServedModel served(const chat::ChatTemplate& t, bool with_index = true) {
  ServedModel m{"tiny", 4096, 1024, &toy()};
  m.chat_template = &t;
  m.eos_ids = {1};
  if (with_index) {
    auto index = std::make_shared<const grammar::VocabIndex>(toy());
    m.vocab_index = [index] { return index; };
  }
  return m;
}

ApiError rejection(const json& body, const ServedModel& m) {
  try {
    parse_chat_request(body.dump(), m);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "(accepted)");
}

const json kUser = json::array({{{"role", "user"}, {"content", "Hi"}}});
const json kTools = json::parse(R"([{"type": "function", "function": {"name": "f",
  "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}])");

}  // namespace

TEST(OpenAiChatParse, TemplateTextWithoutBosAndKwargsOverTheServers) {
  ServedModel m = served(chatml());
  m.chat_kwargs = {{"enable_thinking", false}};
  const ParsedRequest r = parse_chat_request(json{{"messages", kUser}}.dump(), m);
  const std::string off = chatml().render(ojson(kUser), nullptr, true, m.chat_kwargs);
  EXPECT_NE(off.find("</think>"), std::string::npos) << off;
  EXPECT_EQ(r.gen.prompt, toy().encode(off));  // no BOS id before the template's text
  EXPECT_TRUE(r.gen.sampling.stop.empty());
  EXPECT_TRUE(r.chat.split_reasoning);
  EXPECT_FALSE(r.chat.parse_tools);
  EXPECT_FALSE(r.gen.make_processor);

  // The request's chat_template_kwargs win over the server's.
  const ParsedRequest on = parse_chat_request(
      json{{"messages", kUser}, {"chat_template_kwargs", {{"enable_thinking", true}}}}.dump(), m);
  EXPECT_EQ(on.gen.prompt, toy().encode(chatml().render(ojson(kUser), nullptr, true,
                                                        ojson{{"enable_thinking", true}})));
  EXPECT_NE(on.gen.prompt, r.gen.prompt);
  EXPECT_EQ(rejection({{"messages", kUser}, {"chat_template_kwargs", 3}}, m).param,
            "chat_template_kwargs");
}

TEST(OpenAiChatParse, TranscriptKeepsBosStopAndMessageParams) {
  const ServedModel m = served(transcript());
  const ParsedRequest r = parse_chat_request(json{{"messages", kUser}}.dump(), m);
  std::vector<int32_t> want = {toy().bos_id()};
  toy().encode(transcript().render(ojson(kUser), nullptr, true, ojson::object()), want);
  EXPECT_EQ(r.gen.prompt, want);
  EXPECT_EQ(r.gen.sampling.stop, std::vector<std::string>{"\nUser:"});
  // A server given no chat format serves the same transcript.
  ServedModel none = m;
  none.chat_template = nullptr;
  EXPECT_EQ(parse_chat_request(json{{"messages", kUser}}.dump(), none).gen.prompt, want);
  EXPECT_FALSE(r.chat.split_reasoning);
  EXPECT_EQ(rejection({{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, m).param,
            "messages[0].role");
  EXPECT_EQ(rejection({{"messages", {{{"content", "x"}}}}}, m).param, "messages[0].role");
  EXPECT_EQ(rejection({{"messages", {{{"role", "user"}}}}}, m).param, "messages[0].content");
  // No tools without a template.
  EXPECT_EQ(rejection({{"messages", kUser}, {"tools", kTools}}, m).param, "tools");
}

TEST(OpenAiChatParse, ToolsAndToolChoice) {
  const ServedModel m = served(chatml());
  const ParsedRequest automatic =
      parse_chat_request(json{{"messages", kUser}, {"tools", kTools}, {"seed", 5}}.dump(), m);
  EXPECT_TRUE(automatic.chat.parse_tools);
  EXPECT_EQ(automatic.chat.tools, ojson(kTools));
  EXPECT_FALSE(automatic.gen.make_processor);  // auto: the model decides, unconstrained
  const ParsedRequest none = parse_chat_request(
      json{{"messages", kUser}, {"tools", kTools}, {"tool_choice", "none"}}.dump(), m);
  EXPECT_FALSE(none.chat.parse_tools);
  for (const json& forced :
       {json("required"), json{{"type", "function"}, {"function", {{"name", "f"}}}}}) {
    const ParsedRequest r = parse_chat_request(
        json{{"messages", kUser}, {"tools", kTools}, {"tool_choice", forced}}.dump(), m);
    EXPECT_TRUE(r.chat.parse_tools);
    ASSERT_TRUE(r.gen.make_processor);
    EXPECT_NE(r.gen.make_processor(), nullptr);
  }
  auto param = [&](const json& extra) {
    json body = {{"messages", kUser}, {"tools", kTools}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    return rejection(body, m).param;
  };
  EXPECT_EQ(param({{"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}),
            "tool_choice");
  EXPECT_EQ(param({{"tool_choice", "sometimes"}}), "tool_choice");
  EXPECT_EQ(param({{"tools", {{{"type", "function"}, {"function", {{"name", ""}}}}}}}), "tools");
  EXPECT_EQ(param({{"tools", json::array({kTools[0], kTools[0]})}}), "tools");
  EXPECT_EQ(param({{"tool_choice", "required"}, {"parallel_tool_calls", "no"}}),
            "parallel_tool_calls");
  EXPECT_EQ(param({{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}),
            "response_format");
  EXPECT_EQ(rejection({{"messages", kUser}, {"tool_choice", "required"}}, m).param, "tool_choice");
  // A tool schema the grammar cannot enforce (left-recursive) is the client's 400, not a 500.
  const json loop = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
    {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}}}])");
  const ApiError e =
      rejection({{"messages", kUser}, {"tools", loop}, {"tool_choice", "required"}}, m);
  EXPECT_EQ(e.status, 400) << e.what();
  EXPECT_EQ(e.param, "tools") << e.what();
  // Without a vocabulary index there is no constrained decoding.
  EXPECT_EQ(rejection({{"messages", kUser}, {"tools", kTools}, {"tool_choice", "required"}},
                      served(chatml(), false))
                .status,
            400);
}

TEST(OpenAiChatParse, ResponseFormat) {
  const ServedModel m = served(chatml());
  for (const json& rf :
       {json{{"type", "json_object"}},
        json{{"type", "json_schema"},
             {"json_schema",
              {{"name", "x"},
               {"schema",
                {{"type", "object"}, {"properties", {{"a", {{"type", "boolean"}}}}}}}}}}}) {
    const ParsedRequest r =
        parse_chat_request(json{{"messages", kUser}, {"response_format", rf}}.dump(), m);
    ASSERT_TRUE(r.gen.make_processor) << rf;
    // The mask holds from the first token: '{' only (and no EOS before the object is complete).
    std::unique_ptr<LogitsProcessor> p = r.gen.make_processor();
    std::vector<float> logits(1024, 0.f);
    p->apply(logits);
    EXPECT_EQ(logits[1], -std::numeric_limits<float>::infinity());
    const int32_t brace = toy().encode("{").at(0);
    EXPECT_EQ(logits[size_t(brace)], 0.f);
  }
  const ParsedRequest text = parse_chat_request(
      json{{"messages", kUser}, {"response_format", {{"type", "text"}}}}.dump(), m);
  EXPECT_FALSE(text.gen.make_processor);
  const json pattern = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "x"},
        {"schema",
         {{"type", "object"},
          {"properties", {{"code", {{"type", "string"}, {"pattern", "^a$"}}}}}}}}}};
  const ApiError e = rejection({{"messages", kUser}, {"response_format", pattern}}, m);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_NE(std::string(e.what()).find("'pattern'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("#/properties/code"), std::string::npos) << e.what();
  EXPECT_EQ(rejection({{"messages", kUser}, {"response_format", {{"type", "yaml"}}}}, m).param,
            "response_format");
}

TEST(OpenAiChatParse, TokensAsIdsInLogprobs) {
  const ServedModel m = served(chatml());
  const ParsedRequest r = parse_chat_request(
      json{{"messages", kUser}, {"logprobs", true}, {"return_tokens_as_token_ids", true}}.dump(),
      m);
  EXPECT_TRUE(r.tokens_as_ids);
  EXPECT_EQ(rejection({{"messages", kUser}, {"return_tokens_as_token_ids", 1}}, m).param,
            "return_tokens_as_token_ids");
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<TokenLogprob> lp = {{7, -0.5f, {{7, -0.5f}, {9, -inf}}}};
  const json c = chat_logprobs(&toy(), lp, true);
  EXPECT_EQ(c["content"][0]["token"], "token_id:7");
  EXPECT_EQ(c["content"][0]["top_logprobs"][1]["token"], "token_id:9");
  EXPECT_EQ(c["content"][0]["top_logprobs"][1]["logprob"], -9999.0);  // JSON has no -inf
  int64_t offset = 0;
  const json k = completion_logprobs(&toy(), lp, offset, true);
  EXPECT_EQ(k["tokens"][0], "token_id:7");
  EXPECT_EQ(offset, int64_t(token_text(&toy(), 7).size()));
  EXPECT_EQ(chat_logprobs(&toy(), lp)["content"][0]["token"], token_text(&toy(), 7));
}
