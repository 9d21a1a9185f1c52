// `zaya serve` as a chat server for a ZAYA1-8B-like model (tests/chat_model_dir.h: tiny random
// weights, the Gemma 3 vocabulary with ZAYA's special tokens, the ZAYA1 chat template), driven with
// curl and the official `openai` npm client (tests/serve/openai_chat_client.mjs): tool calls forced
// by a named tool_choice and by "required" (streamed as delta.tool_calls, the tool's result sent
// back), response_format json_schema in 20 sampled requests each parsing and validating against
// the schema, reasoning_content with thinking on and absent with it off (by the request, and by
// --reasoning off), chat logprobs equal to a full forward's log_softmax, n = 3, an unsupported
// schema construct refused naming it, and /v1/completions still served. The random model's output
// is noise, so everything is checked for shape and validity, not for words; requests use small
// max_tokens (every step decodes a 262,272-id vocabulary).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat_model_dir.h"
#include "cli_util.h"
#include "data/tokenizer.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "io/model_extras.h"
#include "serve/node_client.h"
#include "serve/serve_process.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const json kNoThinking = {{"enable_thinking", false}};

// Tools whose string parameters are bounded (enum, maxLength): the grammar bounds them, so a random
// model's forced call ends.
const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
      "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "lookup", "description": "Look a record up.",
    "parameters": {"type": "object", "properties": {
      "id": {"type": "integer", "minimum": 0, "maximum": 99},
      "note": {"type": "string", "maxLength": 6}}, "required": ["id"]}}}])");

const json kUser = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});

// The number of code points of UTF-8 text.
size_t code_points(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Why `call` (one of message.tool_calls) is not a valid call of kTools ("" when it is).
std::string invalid_call(const json& call) {
  if (!call.is_object() || call.value("type", "") != "function") return "type";
  const std::string id = call.value("id", "");
  if (id.size() != 29 || id.rfind("call_", 0) != 0) return "id " + id;
  const json args = json::parse(call["function"].value("arguments", ""), nullptr, false);
  if (!args.is_object()) return "arguments not a JSON object";
  const std::string name = call["function"].value("name", "");
  if (name == "get_weather") {
    const std::vector<std::string> cities = {"Paris", "Tokyo", "Lima"};
    if (!args.contains("city") || !args["city"].is_string() ||
        std::find(cities.begin(), cities.end(), args["city"].get<std::string>()) == cities.end())
      return "city";
    if (args.contains("unit") && args["unit"] != "c" && args["unit"] != "f") return "unit";
    for (const auto& [k, v] : args.items())
      if (k != "city" && k != "unit") return "extra " + k;
  } else if (name == "lookup") {
    if (!args.contains("id") || !args["id"].is_number_integer() || args["id"] < 0 ||
        args["id"] > 99)
      return "id";
    if (args.contains("note") &&
        (!args["note"].is_string() || code_points(args["note"].get<std::string>()) > 6))
      return "note";
    for (const auto& [k, v] : args.items())
      if (k != "id" && k != "note") return "extra " + k;
  } else {
    return "unknown tool " + name;
  }
  return "";
}

// The response_format schema of the structured-output test, and its validation written out.
const json kPersonSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
    "ok": {"type": "boolean"}},
  "required": ["name", "age"],
  "additionalProperties": false})");

std::string invalid_person(const json& p) {
  if (!p.is_object()) return "not an object";
  if (!p.contains("name") || !p["name"].is_string() ||
      code_points(p["name"].get<std::string>()) > 12)
    return "name";
  if (!p.contains("age") || !p["age"].is_number_integer() || p["age"] < 0 || p["age"] > 120)
    return "age";
  if (p.contains("tags")) {
    if (!p["tags"].is_array() || p["tags"].size() > 3) return "tags";
    for (const json& t : p["tags"])
      if (t != "a" && t != "b") return "tag " + t.dump();
  }
  if (p.contains("ok") && !p["ok"].is_boolean()) return "ok";
  for (const auto& [k, v] : p.items())
    if (k != "name" && k != "age" && k != "tags" && k != "ok") return "extra " + k;
  return "";
}

// SSE body → its events' JSON payloads ([DONE] last, checked).
std::vector<json> sse(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  bool done = false;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    if (ev == "data: [DONE]") {
      done = true;
      continue;
    }
    out.push_back(json::parse(ev.substr(6)));
  }
  EXPECT_TRUE(done) << body;
  return out;
}

class ServeChatTest : public ::testing::Test {
 protected:
  static inline std::unique_ptr<ServeProcess> server;
  static inline fs::path dir;

  static void SetUpTestSuite() {
    if (zaya_chat_model_dir().empty()) return;
    dir = fs::path(::testing::TempDir()) / ("zaya_serve_chat_" + std::to_string(getpid()));
    server = std::make_unique<ServeProcess>(
        dir, std::vector<std::string>{"--model", zaya_chat_model_dir(), "--model-name", "zaya-chat",
                                      "--max-context", "1024", "--threads", "2"});
  }
  static void TearDownTestSuite() {
    server.reset();
    fs::remove_all(dir);
  }
  void SetUp() override {
    if (zaya_chat_model_dir().empty()) GTEST_SKIP() << gemma3_missing_message();
    ASSERT_TRUE(server->started()) << server->why_not();
  }
  static HttpReply chat(const json& body) {
    return server->request("POST", "/v1/chat/completions", body.dump());
  }
  static json forced_body(const json& tool_choice, uint64_t seed) {
    return {{"messages", kUser},
            {"tools", kTools},
            {"tool_choice", tool_choice},
            {"max_tokens", 160},
            {"seed", seed},
            {"temperature", 1},
            {"chat_template_kwargs", kNoThinking}};
  }
};

TEST_F(ServeChatTest, StartupLogNamesTheChatFormat) {
  EXPECT_NE(server->err().find("chat format: model template (" + zaya_chat_model_dir() +
                               "/chat_template.jinja); reasoning on by default"),
            std::string::npos)
      << server->err();
}

// tool_choice named / required: the grammar makes the random model write a call, which comes back
// as tool_calls. A named function (or parallel_tool_calls false) is one call, ending the answer
// (finish_reason "tool_calls", content null); "required" may make several, until max_tokens.
// Streamed, the delta.tool_calls pieces add up to the same call.
TEST_F(ServeChatTest, ForcedToolCallsComeBackAsToolCalls) {
  const json named = {{"type", "function"}, {"function", {{"name", "lookup"}}}};
  struct Case {
    json choice;
    uint64_t seed;
    bool single;
  };
  for (const Case& k :
       std::vector<Case>{{named, 1, true}, {"required", 2, true}, {"required", 3, false}}) {
    json body = forced_body(k.choice, k.seed);
    if (k.choice == "required" && k.single) body["parallel_tool_calls"] = false;
    const HttpReply r = chat(body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json& c = r.j["choices"][0];
    const json& calls = c["message"]["tool_calls"];
    ASSERT_TRUE(calls.is_array() && !calls.empty()) << r.body;
    for (const json& call : calls) {
      EXPECT_EQ(invalid_call(call), "") << call.dump();
      if (k.choice.is_object()) {
        EXPECT_EQ(call["function"]["name"], "lookup") << r.body;
      }
    }
    if (k.single) {
      EXPECT_EQ(calls.size(), 1u) << r.body;
      EXPECT_EQ(c["finish_reason"], "tool_calls") << r.body;
      EXPECT_TRUE(c["message"]["content"].is_null()) << r.body;
    } else if (c["finish_reason"] != "length") {
      EXPECT_EQ(c["finish_reason"], "tool_calls") << r.body;
    }
    EXPECT_FALSE(c["message"].contains("reasoning_content")) << r.body;
  }
  // Streamed, the same request.
  json body = forced_body(named, 1);
  const HttpReply whole = chat(body);
  body["stream"] = true;
  const HttpReply streamed = chat(body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  json built = json::array();
  std::string finish;
  for (const json& ev : sse(streamed.body)) {
    const json& ch = ev["choices"][0];
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
    if (!ch["delta"].contains("tool_calls")) continue;
    for (const json& piece : ch["delta"]["tool_calls"]) {
      const size_t i = piece["index"].get<size_t>();
      while (built.size() <= i)
        built.push_back(
            {{"id", ""}, {"type", ""}, {"function", {{"name", ""}, {"arguments", ""}}}});
      if (piece.contains("id")) built[i]["id"] = piece["id"], built[i]["type"] = piece["type"];
      if (piece["function"].contains("name"))
        built[i]["function"]["name"] = piece["function"]["name"];
      built[i]["function"]["arguments"] = built[i]["function"]["arguments"].get<std::string>() +
                                          piece["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(built, whole.j["choices"][0]["message"]["tool_calls"]) << streamed.body;
  EXPECT_EQ(finish, whole.j["choices"][0]["finish_reason"].get<std::string>());
}

// The assistant's tool call and the tool's result render back through the template and get an
// answer; a tool_choice naming an undeclared function is a 400.
TEST_F(ServeChatTest, ToolResultRoundTrip) {
  const json history = json::parse(R"([
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_abc", "content": "{\"temperature\": 21}"}])");
  const HttpReply r = chat({{"messages", history},
                            {"tools", kTools},
                            {"max_tokens", 4},
                            {"seed", 1},
                            {"chat_template_kwargs", kNoThinking}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["choices"][0]["message"]["role"], "assistant");
  // The render holds the call and the result: more tokens than the user's turn alone.
  const HttpReply alone = chat({{"messages", kUser},
                                {"tools", kTools},
                                {"max_tokens", 1},
                                {"chat_template_kwargs", kNoThinking}});
  ASSERT_EQ(alone.status, 200) << alone.body;
  EXPECT_GT(r.j["usage"]["prompt_tokens"].get<int>(),
            alone.j["usage"]["prompt_tokens"].get<int>() + 20);
  const HttpReply bad =
      chat({{"messages", kUser},
            {"tools", kTools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.j["error"]["param"], "tool_choice") << bad.body;
}

// json_schema: 20 sampled requests (temperature 1, seeds 1..20), every answer parses and
// validates, sent four at a time (the engine batches them).
TEST_F(ServeChatTest, JsonSchemaOutputValidatesTwentyOfTwenty) {
  const json rf = {{"type", "json_schema"},
                   {"json_schema", {{"name", "person"}, {"schema", kPersonSchema}}}};
  std::vector<HttpReply> replies(20);
  for (int wave = 0; wave < 5; ++wave) {
    std::vector<std::thread> ts;
    for (int k = 0; k < 4; ++k) {
      const int i = wave * 4 + k;
      ts.emplace_back([&, i] {
        replies[size_t(i)] = chat({{"messages", kUser},
                                   {"response_format", rf},
                                   {"temperature", 1},
                                   {"seed", i + 1},
                                   {"max_tokens", 120},
                                   {"chat_template_kwargs", kNoThinking}});
      });
    }
    for (std::thread& t : ts) t.join();
  }
  int valid = 0;
  for (size_t i = 0; i < replies.size(); ++i) {
    const HttpReply& r = replies[i];
    ASSERT_EQ(r.status, 200) << r.body;
    const json& c = r.j["choices"][0];
    EXPECT_EQ(c["finish_reason"], "stop") << "seed " << i + 1 << ": " << r.body;
    const json p = json::parse(c["message"]["content"].get<std::string>(), nullptr, false);
    const std::string why = invalid_person(p);
    EXPECT_EQ(why, "") << "seed " << i + 1 << ": " << r.body;
    valid += why.empty();
  }
  EXPECT_EQ(valid, 20);
}

TEST_F(ServeChatTest, UnsupportedSchemaConstructIsA400NamingIt) {
  const json schema = {{"type", "object"},
                       {"properties", {{"code", {{"type", "string"}, {"pattern", "^[A-Z]+$"}}}}}};
  const HttpReply r =
      chat({{"messages", kUser},
            {"response_format",
             {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j["error"]["param"], "response_format") << r.body;
  const std::string msg = r.j["error"]["message"];
  EXPECT_NE(msg.find("'pattern'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("#/properties/code"), std::string::npos) << msg;
}

// The ZAYA template's generation prompt opens <think> with thinking on, so the random model's
// whole answer is reasoning; with enable_thinking false there is none.
TEST_F(ServeChatTest, ReasoningContentOnAndOff) {
  const HttpReply on = chat({{"messages", kUser}, {"max_tokens", 6}, {"seed", 4}});
  ASSERT_EQ(on.status, 200) << on.body;
  const json& m = on.j["choices"][0]["message"];
  ASSERT_TRUE(m.contains("reasoning_content")) << on.body;
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty()) << on.body;

  const HttpReply off = chat(
      {{"messages", kUser}, {"max_tokens", 6}, {"seed", 4}, {"chat_template_kwargs", kNoThinking}});
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_FALSE(off.j["choices"][0]["message"].contains("reasoning_content")) << off.body;
  EXPECT_FALSE(off.j["choices"][0]["message"]["content"].get<std::string>().empty()) << off.body;

  // Streamed with thinking on: the deltas carry reasoning_content.
  const HttpReply s = chat({{"messages", kUser}, {"max_tokens", 6}, {"seed", 4}, {"stream", true}});
  std::string reasoning;
  for (const json& ev : sse(s.body))
    if (ev["choices"][0]["delta"].contains("reasoning_content"))
      reasoning += ev["choices"][0]["delta"]["reasoning_content"].get<std::string>();
  EXPECT_EQ(reasoning, m["reasoning_content"].get<std::string>()) << s.body;
}

// --reasoning off: thinking is off unless the request's chat_template_kwargs turns it on.
TEST_F(ServeChatTest, ReasoningOffFlag) {
  ServeProcess off(dir / "off", {"--model", zaya_chat_model_dir(), "--max-context", "512",
                                 "--threads", "2", "--reasoning", "off"});
  ASSERT_TRUE(off.started()) << off.why_not();
  EXPECT_NE(off.err().find("reasoning off by default"), std::string::npos) << off.err();
  const json body = {{"messages", kUser}, {"max_tokens", 4}, {"seed", 4}};
  const HttpReply plain = off.request("POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_FALSE(plain.j["choices"][0]["message"].contains("reasoning_content")) << plain.body;
  json on = body;
  on["chat_template_kwargs"] = {{"enable_thinking", true}};
  const HttpReply think = off.request("POST", "/v1/chat/completions", on.dump());
  ASSERT_EQ(think.status, 200) << think.body;
  EXPECT_TRUE(think.j["choices"][0]["message"].contains("reasoning_content")) << think.body;
}

// Chat logprobs are the model's raw distribution: recomputed here by one forward of prompt +
// answer (the prompt rendered and tokenized as the server does: the model's template, no BOS).
TEST_F(ServeChatTest, LogprobsMatchAFullForward) {
  const HttpReply r = chat({{"messages", kUser},
                            {"max_tokens", 5},
                            {"seed", 8},
                            {"temperature", 1},
                            {"logprobs", true},
                            {"top_logprobs", 3},
                            {"return_tokens_as_token_ids", true},
                            {"chat_template_kwargs", kNoThinking}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json& content = r.j["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(content.is_array() && !content.empty()) << r.body;
  auto id_of = [](const json& e) { return std::stoi(e["token"].get<std::string>().substr(9)); };

  const std::string mdir = zaya_chat_model_dir();
  const Tokenizer tok = Tokenizer::load(mdir + "/tokenizer.json");
  const chat::ChatTemplate tpl = chat::ChatTemplate::load(mdir, "", read_model_extras(mdir), &tok);
  std::vector<int32_t> seq = tok.encode(tpl.render(nlohmann::ordered_json(kUser), nullptr, true,
                                                   nlohmann::ordered_json(kNoThinking)));
  const int64_t prompt_len = int64_t(seq.size());
  EXPECT_EQ(r.j["usage"]["prompt_tokens"], prompt_len);
  for (size_t j = 0; j + 1 < content.size(); ++j) seq.push_back(id_of(content[j]));

  const InferModel im = InferModel::load_dir(mdir);
  const int64_t V = im.config().vocab_size, T = int64_t(seq.size());
  SequenceCache cache(im.config(), T);
  std::vector<float> logits(size_t(T * V));
  Decoder dec(im);
  DecodeItem item{&cache, seq};
  dec.forward({&item, 1}, Tensor(logits.data(), {T, V}), /*all_positions=*/true);
  for (size_t j = 0; j < content.size(); ++j) {
    const float* row = logits.data() + (prompt_len - 1 + int64_t(j)) * V;
    double mx = row[0], sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    auto lp = [&](int id) { return double(row[id]) - mx - std::log(sum); };
    EXPECT_NEAR(content[j]["logprob"].get<double>(), lp(id_of(content[j])), 1e-4) << "token " << j;
    ASSERT_EQ(content[j]["top_logprobs"].size(), 3u);
    double best = -1e30;
    for (int64_t v = 0; v < V; ++v) best = std::max(best, lp(int(v)));
    EXPECT_NEAR(content[j]["top_logprobs"][0]["logprob"].get<double>(), best, 1e-4);
    for (const json& t : content[j]["top_logprobs"])
      EXPECT_NEAR(t["logprob"].get<double>(), lp(id_of(t)), 1e-4) << "token " << j;
  }
}

TEST_F(ServeChatTest, ThreeChoices) {
  const HttpReply r = chat({{"messages", kUser},
                            {"max_tokens", 3},
                            {"n", 3},
                            {"seed", 2},
                            {"chat_template_kwargs", kNoThinking}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.j["choices"].size(), 3u) << r.body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.j["choices"][size_t(i)]["index"], i);
    EXPECT_TRUE(r.j["choices"][size_t(i)]["message"]["content"].is_string());
  }
  EXPECT_LE(r.j["usage"]["completion_tokens"].get<int>(), 9);
}

TEST_F(ServeChatTest, CompletionsStillServed) {
  const HttpReply r = server->request(
      "POST", "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 3}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["object"], "text_completion");
  EXPECT_TRUE(r.j["choices"][0]["text"].is_string());
  EXPECT_LE(r.j["usage"]["completion_tokens"].get<int>(), 3);
}

// Needs node and the openai package (scripts/setup.sh installs both): without them it skips, a
// failure under ZAYA_STRICT_SKIPS=1 (tests/test_skips.h).
TEST_F(ServeChatTest, OfficialOpenAiNodeClient) {
  if (const std::string missing = node_client_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string log = (dir / "node_chat.log").string();
  EXPECT_TRUE(run_node_client("openai_chat_client.mjs",
                              shell_quote(server->base() + "/v1") + " zaya-chat", log))
      << slurp(log);
}

}  // namespace
