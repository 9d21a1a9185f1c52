// The OpenAI response formatters without a server: responses, streaming chunks, usage, the model
// list, server-sent events and response ids in OpenAI's shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "serve/openai_response.h"

using namespace zaya;
using namespace zaya::openai;
using json = nlohmann::json;

TEST(OpenAiFormat, ResponsesChunksAndEvents) {
  const json c = completion_response("cmpl-1", 100, "tiny", "abc", FinishReason::Length, {5, 3});
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "abc");
  EXPECT_EQ(c["choices"][0]["index"], 0);
  EXPECT_TRUE(c["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], 8);
  const json ch = chat_response("chatcmpl-1", 100, "tiny", "hi", FinishReason::Stop, {5, 1});
  EXPECT_EQ(ch["object"], "chat.completion");
  EXPECT_EQ(ch["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(ch["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(ch["choices"][0]["finish_reason"], "stop");
  const json k = chat_chunk("chatcmpl-1", 100, "tiny", {{"content", "h"}}, FinishReason::None);
  EXPECT_EQ(k["object"], "chat.completion.chunk");
  EXPECT_TRUE(k["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(k["choices"][0]["delta"]["content"], "h");
  const json u = usage_chunk(Endpoint::Chat, "chatcmpl-1", 100, "tiny", {2, 3});
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["completion_tokens"], 3);
  EXPECT_EQ(completion_chunk("cmpl-1", 1, "tiny", "x", FinishReason::None)["choices"][0]["text"],
            "x");
  EXPECT_EQ(models_list("tiny", 7)["data"][0]["id"], "tiny");
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(new_response_id(Endpoint::Completions).rfind("cmpl-", 0), 0u);
  EXPECT_EQ(new_response_id(Endpoint::Chat).rfind("chatcmpl-", 0), 0u);
  EXPECT_NE(new_response_id(Endpoint::Chat), new_response_id(Endpoint::Chat));
}

// n choices, logprobs in both shapes (the token's text and exact bytes), tool-call and reasoning
// fields of a chat message, and chunks carrying their choice's index.
TEST(OpenAiFormat, ChoicesAndLogprobs) {
  const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  const int32_t a = tok.encode("the")[0], b = tok.encode(" and")[0];
  const std::vector<TokenLogprob> lp = {{a, -0.5f, {{a, -0.5f}, {b, -1.25f}}},
                                        {b, -2.0f, {{a, -0.25f}, {b, -2.0f}}}};
  const json c = chat_logprobs(&tok, lp);
  ASSERT_EQ(c["content"].size(), 2u);
  EXPECT_EQ(c["content"][0]["token"], token_text(&tok, a));
  EXPECT_EQ(c["content"][0]["logprob"], -0.5f);
  const std::string ta = token_text(&tok, a);
  EXPECT_EQ(c["content"][0]["bytes"], std::vector<uint8_t>(ta.begin(), ta.end()));
  ASSERT_EQ(c["content"][1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(c["content"][1]["top_logprobs"][0]["token"], ta);
  EXPECT_EQ(c["content"][1]["top_logprobs"][0]["logprob"], -0.25f);
  EXPECT_EQ(c["content"][1]["top_logprobs"][1]["logprob"], -2.0f);

  int64_t offset = 3;
  const json k = completion_logprobs(&tok, lp, offset);
  EXPECT_EQ(k["tokens"], json({ta, token_text(&tok, b)}));
  EXPECT_EQ(k["token_logprobs"], json({-0.5f, -2.0f}));
  EXPECT_EQ(k["text_offset"], json({3, 3 + int64_t(ta.size())}));
  EXPECT_EQ(offset, 3 + int64_t(ta.size() + token_text(&tok, b).size()));
  EXPECT_EQ(k["top_logprobs"][0].size(), 2u);  // the alternatives, the chosen one among them
  EXPECT_EQ(k["top_logprobs"][1][token_text(&tok, b)], -2.0f);
  json all = nullptr;
  append_logprobs(all, chat_logprobs(&tok, std::span(lp).first(1)));
  append_logprobs(all, chat_logprobs(&tok, std::span(lp).subspan(1)));
  EXPECT_EQ(all, c);

  // A byte-fallback token is its one byte, whatever its lone decoding shows.
  const int32_t byte_tok = tok.token_id("<0xE2>");
  ASSERT_GE(byte_tok, 0) << "the toy tokenizer has byte-fallback tokens";
  EXPECT_EQ(token_bytes(&tok, byte_tok), std::vector<uint8_t>{0xE2});

  ChoiceResult x, y, z;
  x.index = 0, x.text = "one", x.finish = FinishReason::Stop;
  y.index = 1, y.text = "two", y.finish = FinishReason::Length, y.logprobs = c;
  z.index = 2, z.reasoning = "hmm", z.finish = FinishReason::Stop, z.finish_tool_calls = true;
  z.tool_calls = json::array({{{"id", "call_1"},
                               {"type", "function"},
                               {"function", {{"name", "f"}, {"arguments", "{}"}}}}});
  const json r = chat_response("chatcmpl-2", 1, "tiny", {x, y, z}, {4, 9});
  ASSERT_EQ(r["choices"].size(), 3u);
  EXPECT_EQ(r["choices"][1]["index"], 1);
  EXPECT_EQ(r["choices"][1]["message"]["content"], "two");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][1]["logprobs"], c);
  EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][2]["message"]["reasoning_content"], "hmm");
  EXPECT_TRUE(r["choices"][2]["message"]["content"].is_null());
  EXPECT_EQ(r["choices"][2]["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r["choices"][2]["finish_reason"], "tool_calls");
  EXPECT_EQ(r["usage"]["completion_tokens"], 9);
  const json cr = completion_response("cmpl-2", 1, "tiny", {x, y}, {4, 5});
  EXPECT_EQ(cr["choices"][1]["text"], "two");
  EXPECT_EQ(cr["choices"][1]["index"], 1);

  EXPECT_EQ(
      chat_chunk("c", 1, "tiny", {{"content", "x"}}, FinishReason::None, 2)["choices"][0]["index"],
      2);
  EXPECT_EQ(chat_chunk("c", 1, "tiny", json::object(), FinishReason::Stop, 1, nullptr,
                       true)["choices"][0]["finish_reason"],
            "tool_calls");
  const json kc = completion_chunk("c", 1, "tiny", "x", FinishReason::None, 1, k);
  EXPECT_EQ(kc["choices"][0]["index"], 1);
  EXPECT_EQ(kc["choices"][0]["logprobs"], k);
}
