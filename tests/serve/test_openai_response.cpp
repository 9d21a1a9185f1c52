// The OpenAI response formatters without a server: responses, streaming chunks, usage, the model
// list, server-sent events and response ids in OpenAI's shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
