// The OpenAI request parser without a server: every accepted prompt shape, the chat template,
// defaults, and each rejection's status, param and code.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"

using namespace zaya;
using namespace zaya::openai;
using json = nlohmann::json;

namespace {

const Tokenizer& toy() {
  static const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  return tok;
}

ServedModel served() {
  return ServedModel{"tiny", 64, 1024, &toy()};
}

std::vector<int32_t> with_bos(const std::string& text) {
  std::vector<int32_t> ids = {toy().bos_id()};
  toy().encode(text, ids);
  return ids;
}

// The ApiError a request body raises (status 0 if it parses).
ApiError rejection(const std::string& body, bool chat = false) {
  try {
    chat ? parse_chat_request(body, served()) : parse_completion_request(body, served());
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "(accepted)");
}

void expect_rejected(const std::string& body, int status, const std::string& param,
                     const std::string& code = "", bool chat = false) {
  const ApiError e = rejection(body, chat);
  EXPECT_EQ(e.status, status) << body << " → " << e.what();
  EXPECT_EQ(e.param, param) << body << " → " << e.what();
  EXPECT_EQ(e.code, code) << body << " → " << e.what();
  if (e.status != 0) {
    const json b = error_body(e);
    EXPECT_EQ(b["error"]["message"], e.what());
    EXPECT_EQ(b["error"]["type"], "invalid_request_error");
    EXPECT_EQ(b["error"]["param"], param.empty() ? json() : json(param));
  }
}

}  // namespace

TEST(OpenAiParse, CompletionPromptShapesAndDefaults) {
  ParsedRequest r =
      parse_completion_request(R"({"model":"tiny","prompt":"Hello world"})", served());
  EXPECT_EQ(r.endpoint, Endpoint::Completions);
  EXPECT_EQ(r.gen.prompt, with_bos("Hello world"));
  EXPECT_EQ(r.gen.sampling.max_new_tokens, 16);
  EXPECT_EQ(r.gen.sampling.temperature, 1.0);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.gen.sampling.stop.empty());

  EXPECT_EQ(parse_completion_request(R"({"prompt":["Hello world"]})", served()).gen.prompt,
            with_bos("Hello world"));
  EXPECT_EQ(parse_completion_request(R"({"prompt":[5,6,7]})", served()).gen.prompt,
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(parse_completion_request(R"({"prompt":[[5,6]]})", served()).gen.prompt,
            (std::vector<int32_t>{5, 6}));

  r = parse_completion_request(
      R"({"prompt":"x","max_tokens":3,"temperature":0,"top_p":0.5,"top_k":4,"min_p":0.1,
          "repetition_penalty":1.2,"seed":42,"stop":["a","b"],"stream":true,
          "stream_options":{"include_usage":true},"n":1,"echo":false,"logprobs":null,
          "frequency_penalty":0,"presence_penalty":0.0,"user":"me","max_tokens_extra":1})",
      served());
  EXPECT_EQ(r.gen.sampling.max_new_tokens, 3);
  EXPECT_EQ(r.gen.sampling.temperature, 0.0);
  EXPECT_EQ(r.gen.sampling.top_p, 0.5);
  EXPECT_EQ(r.gen.sampling.top_k, 4);
  EXPECT_EQ(r.gen.sampling.min_p, 0.1);
  EXPECT_EQ(r.gen.sampling.repetition_penalty, 1.2);
  EXPECT_EQ(r.gen.sampling.seed, 42u);
  EXPECT_EQ(r.gen.sampling.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  // A single stop string; the default max_tokens is clipped to the context.
  r = parse_completion_request(R"({"prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,
      21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50],
      "stop":"\n"})",
                               served());
  EXPECT_EQ(r.gen.sampling.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(r.gen.sampling.max_new_tokens, 14);
}

TEST(OpenAiParse, CompletionRejections) {
  expect_rejected("{not json", 400, "");
  expect_rejected("[1,2]", 400, "");
  expect_rejected(R"({"model":7,"prompt":"x"})", 400, "model");
  expect_rejected(R"({"max_tokens":2})", 400, "prompt");
  expect_rejected(R"({"prompt":["a","b"]})", 400, "prompt");
  expect_rejected(R"({"prompt":[[1],[2]]})", 400, "prompt");
  expect_rejected(R"({"prompt":{"text":"x"}})", 400, "prompt");
  expect_rejected(R"({"prompt":[1,"a"]})", 400, "prompt");
  expect_rejected(R"({"prompt":[1,5000]})", 400, "prompt");
  expect_rejected(R"({"prompt":[]})", 400, "prompt");
  expect_rejected(R"({"prompt":"x","temperature":-1})", 400, "temperature");
  expect_rejected(R"({"prompt":"x","temperature":"hot"})", 400, "temperature");
  expect_rejected(R"({"prompt":"x","top_p":0})", 400, "top_p");
  expect_rejected(R"({"prompt":"x","top_p":1.5})", 400, "top_p");
  expect_rejected(R"({"prompt":"x","top_k":-1})", 400, "top_k");
  expect_rejected(R"({"prompt":"x","top_k":2.5})", 400, "top_k");
  expect_rejected(R"({"prompt":"x","min_p":2})", 400, "min_p");
  expect_rejected(R"({"prompt":"x","repetition_penalty":0})", 400, "repetition_penalty");
  expect_rejected(R"({"prompt":"x","max_tokens":-1})", 400, "max_tokens");
  expect_rejected(R"({"prompt":"x","max_tokens":"many"})", 400, "max_tokens");
  expect_rejected(R"({"prompt":"x","max_tokens":100})", 400, "max_tokens",
                  "context_length_exceeded");
  std::string long_prompt(300, 'z');
  expect_rejected(R"({"prompt":")" + long_prompt + R"("})", 400, "prompt",
                  "context_length_exceeded");
  expect_rejected(R"({"prompt":"x","n":0})", 400, "n");
  expect_rejected(R"({"prompt":"x","n":9})", 400, "n");
  expect_rejected(R"({"prompt":"x","n":"two"})", 400, "n");
  expect_rejected(R"({"prompt":"x","best_of":3})", 400, "best_of");
  expect_rejected(R"({"prompt":"x","n":2,"best_of":3})", 400, "best_of");
  expect_rejected(R"({"prompt":"x","echo":true})", 400, "echo");
  expect_rejected(R"({"prompt":"x","logprobs":6})", 400, "logprobs");
  expect_rejected(R"({"prompt":"x","logprobs":-1})", 400, "logprobs");
  expect_rejected(R"({"prompt":"x","logprobs":true})", 400, "logprobs");
  expect_rejected(R"({"prompt":"x","frequency_penalty":2.5})", 400, "frequency_penalty");
  expect_rejected(R"({"prompt":"x","presence_penalty":-2.01})", 400, "presence_penalty");
  expect_rejected(R"({"prompt":"x","frequency_penalty":"lots"})", 400, "frequency_penalty");
  expect_rejected(R"({"prompt":"x","logit_bias":{"5":101}})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","logit_bias":{"5":"up"}})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","logit_bias":{"five":1}})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","logit_bias":{"5x":1}})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","logit_bias":{"1024":1}})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","logit_bias":{"-1":1}})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","logit_bias":[5]})", 400, "logit_bias");
  expect_rejected(R"({"prompt":"x","stop_token_ids":[1024]})", 400, "stop_token_ids");
  expect_rejected(R"({"prompt":"x","stop_token_ids":["a"]})", 400, "stop_token_ids");
  expect_rejected(R"({"prompt":"x","stop_token_ids":5})", 400, "stop_token_ids");
  expect_rejected(R"({"prompt":"x","stop":["a","b","c","d","e"]})", 400, "stop");
  expect_rejected(R"({"prompt":"x","stop":[""]})", 400, "stop");
  expect_rejected(R"({"prompt":"x","stop":5})", 400, "stop");
  expect_rejected(R"({"prompt":"x","stream":"yes"})", 400, "stream");
  expect_rejected(R"({"prompt":"x","seed":"s"})", 400, "seed");
  EXPECT_EQ(rejection(R"({"prompt":"x","temperature":-1})").what(),
            std::string("temperature must be a finite number ≥ 0 (0 = greedy); got -1"));
}

TEST(OpenAiParse, ChatTemplateAndStop) {
  const std::string body = R"({"model":"tiny","max_tokens":4,"messages":[
      {"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]},
      {"role":"assistant","content":"Hello."},
      {"role":"user","content":"Bye?"}],"stop":"END"})";
  const ParsedRequest r = parse_chat_request(body, served());
  EXPECT_EQ(r.endpoint, Endpoint::Chat);
  EXPECT_EQ(r.gen.prompt, with_bos("System: Be brief.\n\nUser: Hi there\n\nAssistant: Hello.\n\n"
                                   "User: Bye?\n\nAssistant:"));
  EXPECT_EQ(r.gen.sampling.stop, (std::vector<std::string>{"END", "\nUser:"}));
  EXPECT_EQ(r.gen.sampling.max_new_tokens, 4);
  // Without max_tokens: the rest of the context; max_completion_tokens is read too.
  const ParsedRequest d =
      parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})", served());
  EXPECT_EQ(d.gen.sampling.max_new_tokens, 64 - int64_t(d.gen.prompt.size()));
  EXPECT_EQ(
      parse_chat_request(
          R"({"max_completion_tokens":2,"messages":[{"role":"user","content":"x"}]})", served())
          .gen.sampling.max_new_tokens,
      2);
  // "developer" is rendered as System.
  std::vector<int32_t> developer = {toy().bos_id()};
  toy().encode("System: d\n\nAssistant:", developer);
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"developer","content":"d"}]})", served())
                .gen.prompt,
            developer);
}

TEST(OpenAiParse, ChatRejections) {
  expect_rejected(R"({"max_tokens":1})", 400, "messages", "", true);
  expect_rejected(R"({"messages":[]})", 400, "messages", "", true);
  expect_rejected(R"({"messages":"hi"})", 400, "messages", "", true);
  expect_rejected(R"({"messages":[{"role":"robot","content":"x"}]})", 400, "messages[0].role", "",
                  true);
  expect_rejected(R"({"messages":[{"content":"x"}]})", 400, "messages[0].role", "", true);
  expect_rejected(R"({"messages":[{"role":"user"}]})", 400, "messages[0].content", "", true);
  expect_rejected(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400,
                  "messages[0].content", "", true);
  expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
                  400, "tools", "", true);
  expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1000})", 400,
                  "max_tokens", "context_length_exceeded", true);
  expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"n":9})", 400, "n", "", true);
  expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", 400, "logprobs",
                  "", true);
  expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})", 400,
                  "top_logprobs", "", true);
  expect_rejected(
      R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", 400,
      "top_logprobs", "", true);
}

// The OpenAI controls map onto the generation request: n choices, logprobs in both endpoints'
// shapes, penalties, logit_bias (keys are token id strings), stop strings and stop_token_ids.
TEST(OpenAiParse, ChoicesLogprobsPenaltiesBiasAndStopIds) {
  ParsedRequest r = parse_completion_request(
      R"({"prompt":"x","n":3,"logprobs":2,"frequency_penalty":0.5,"presence_penalty":-1.5,
          "logit_bias":{"5":10,"7":-100},"stop_token_ids":[9,11],"stop":"zz","seed":4})",
      served());
  EXPECT_EQ(r.gen.n, 3);
  EXPECT_EQ(r.gen.sampling.top_logprobs, 2);
  EXPECT_EQ(r.gen.sampling.frequency_penalty, 0.5);
  EXPECT_EQ(r.gen.sampling.presence_penalty, -1.5);
  ASSERT_EQ(r.gen.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.gen.sampling.logit_bias[0], (std::pair<int32_t, float>{5, 10.f}));
  EXPECT_EQ(r.gen.sampling.logit_bias[1], (std::pair<int32_t, float>{7, -100.f}));
  EXPECT_EQ(r.gen.sampling.stop_ids, (std::vector<int32_t>{9, 11}));
  EXPECT_EQ(r.gen.sampling.stop, (std::vector<std::string>{"zz"}));
  EXPECT_EQ(r.gen.sampling.seed, 4u);
  // Off by default; logprobs 0: the chosen token's alone; best_of equal to n is fine.
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x"})", served()).gen.sampling.top_logprobs, -1);
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x"})", served()).gen.n, 1);
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x","logprobs":0,"n":2,"best_of":2})", served())
                .gen.sampling.top_logprobs,
            0);
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x","logprobs":null})", served())
                .gen.sampling.top_logprobs,
            -1);

  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(
      parse_chat_request("{" + msgs + R"(,"logprobs":true})", served()).gen.sampling.top_logprobs,
      0);
  EXPECT_EQ(parse_chat_request("{" + msgs + R"(,"logprobs":true,"top_logprobs":20})", served())
                .gen.sampling.top_logprobs,
            20);
  EXPECT_EQ(
      parse_chat_request("{" + msgs + R"(,"logprobs":false})", served()).gen.sampling.top_logprobs,
      -1);
  EXPECT_EQ(parse_chat_request("{" + msgs + R"(,"n":8})", served()).gen.n, 8);
}

// One model is served whatever name a request gives (as llama.cpp's server does): clients
// configured with another name work; the name asked for is kept for the request log.
TEST(OpenAiParse, AnyModelNameIsServed) {
  const ParsedRequest c = parse_completion_request(R"({"model":"gpt-4","prompt":"x"})", served());
  EXPECT_EQ(c.model, "gpt-4");
  EXPECT_EQ(c.gen.prompt, with_bos("x"));
  const ParsedRequest chat = parse_chat_request(
      R"({"model":"other","messages":[{"role":"user","content":"x"}]})", served());
  EXPECT_EQ(chat.model, "other");
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x"})", served()).model, "");
}

// The model directory's BOS (generation_config.json, tokenizer_config.json) replaces the
// tokenizer's "<bos>" for text prompts; -1: none. Token-id prompts are never changed.
TEST(OpenAiParse, TheServedModelsBosStartsTextPrompts) {
  ServedModel m = served();
  m.bos_id = 7;
  std::vector<int32_t> want = {7};
  toy().encode("x", want);
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x"})", m).gen.prompt, want);
  m.bos_id = -1;
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x"})", m).gen.prompt, toy().encode("x"));
  EXPECT_EQ(parse_completion_request(R"({"prompt":[5,6]})", m).gen.prompt,
            (std::vector<int32_t>{5, 6}));
}

// Request-killers found by probing: each is a 400 in OpenAI's shape, never a crash or a 500.
TEST(OpenAiParse, HostileRequestsAre400s) {
  // max_tokens near INT64_MAX: prompt + max_tokens overflowed the context check.
  expect_rejected(R"({"prompt":"x","max_tokens":9223372036854775807})", 400, "max_tokens",
                  "context_length_exceeded");
  expect_rejected(
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":9223372036854775807})", 400,
      "max_tokens", "context_length_exceeded", true);
  expect_rejected(R"({"prompt":"x","max_tokens":18446744073709551615})", 400, "max_tokens");
  expect_rejected(R"({"prompt":"x","max_tokens":-9223372036854775808})", 400, "max_tokens");
  expect_rejected(R"({"prompt":"x","max_tokens":1e300})", 400, "max_tokens");
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x","seed":18446744073709551615})", served())
                .gen.sampling.seed,
            UINT64_MAX);
  // A number that overflows a double.
  expect_rejected(R"({"prompt":"x","temperature":1e309})", 400, "");
  // Nested a million deep, in the prompt and in max_tokens.
  expect_rejected(
      R"({"prompt":)" + std::string(1'000'000, '[') + "1" + std::string(1'000'000, ']') + "}", 400,
      "");
  expect_rejected(R"({"prompt":"x","max_tokens":)" + std::string(100'000, '[') + "}", 400, "");
  // Wrongly typed values deep inside (nlohmann's type errors).
  expect_rejected(R"({"prompt":"x","response_format":{"type":5}})", 400, "");
  expect_rejected(R"({"messages":[{"role":"user","content":[{"type":7,"text":"a"}]}]})", 400,
                  "messages[0].content", "", true);
  expect_rejected(R"({"messages":[{"role":"assistant","content":[{"type":"text","text":1}]}]})",
                  400, "messages[0].content", "", true);
}

// ServedModel::defaults (generation_config.json, then `zaya serve`'s flags) are what a request
// without sampling fields gets; its own fields override them; seed, stop and max_tokens never come
// from them.
TEST(OpenAiParse, SamplingDefaultsComeFromTheServedModel) {
  ServedModel m = served();
  m.defaults.temperature = 0.6;
  m.defaults.top_p = 0.95;
  m.defaults.top_k = 20;
  m.defaults.min_p = 0.05;
  m.defaults.repetition_penalty = 1.1;
  m.defaults.seed = 1234;
  m.defaults.max_new_tokens = 5;
  m.defaults.stop = {"never"};
  for (bool chat : {false, true}) {
    const std::string body = chat
                                 ? R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})"
                                 : R"({"prompt":"hi","max_tokens":2})";
    const ParsedRequest r = chat ? parse_chat_request(body, m) : parse_completion_request(body, m);
    EXPECT_EQ(r.gen.sampling.temperature, 0.6);
    EXPECT_EQ(r.gen.sampling.top_p, 0.95);
    EXPECT_EQ(r.gen.sampling.top_k, 20);
    EXPECT_EQ(r.gen.sampling.min_p, 0.05);
    EXPECT_EQ(r.gen.sampling.repetition_penalty, 1.1);
    EXPECT_EQ(r.gen.sampling.max_new_tokens, 2);
    EXPECT_EQ(std::count(r.gen.sampling.stop.begin(), r.gen.sampling.stop.end(), "never"), 0);
  }
  const ParsedRequest o = parse_completion_request(
      R"({"prompt":"hi","temperature":0,"top_p":1,"top_k":0,"min_p":0,"repetition_penalty":1})", m);
  EXPECT_EQ(o.gen.sampling.temperature, 0.0);
  EXPECT_EQ(o.gen.sampling.top_p, 1.0);
  EXPECT_EQ(o.gen.sampling.top_k, 0);
  EXPECT_EQ(o.gen.sampling.min_p, 0.0);
  EXPECT_EQ(o.gen.sampling.repetition_penalty, 1.0);
  // Without a seed, each request draws its own (not the defaults' field).
  EXPECT_NE(parse_completion_request(R"({"prompt":"hi"})", m).gen.sampling.seed,
            parse_completion_request(R"({"prompt":"hi"})", m).gen.sampling.seed);
}
