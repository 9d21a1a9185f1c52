// The OpenAI-compatible HTTP API's answers, as pure functions: response objects, streaming
// chunks, server-sent events and error bodies (the requests: serve/openai_request.h).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "infer/engine.h"
#include "serve/openai_request.h"

namespace zaya {
class Tokenizer;
}

namespace zaya::openai {

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& e);

// Response objects. `id` is "cmpl-…" / "chatcmpl-…" (new_response_id), `created` Unix seconds.
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;  // completion: summed over the choices
};
std::string new_response_id(Endpoint e);

// One choice of a finished (non-streaming) response.
struct ChoiceResult {
  int index = 0;
  std::string text;                     // completions: the text; chat: message.content
  std::string reasoning;                // chat: message.reasoning_content (absent when empty)
  nlohmann::json tool_calls = nullptr;  // chat: message.tool_calls (an array; null: absent)
  FinishReason finish = FinishReason::None;
  bool finish_tool_calls = false;     // finish_reason "tool_calls" (the answer is tool calls)
  nlohmann::json logprobs = nullptr;  // chat_logprobs / completion_logprobs, or null
};
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::vector<ChoiceResult>& choices, Usage u);
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const std::vector<ChoiceResult>& choices, Usage u);
// One choice (index 0), as before n existed.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::string& text, FinishReason finish_reason, Usage u);
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const std::string& content, FinishReason finish_reason, Usage u);

// Logprobs of generated tokens (engine.h TokenLogprob: the model's own distribution) in OpenAI's
// shapes. A token's text is its decoding alone (a byte token of a partial UTF-8 character decodes
// to U+FFFD); `bytes` are its exact bytes (a byte-fallback token <0xNN>: that byte).
//   chat:        {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}
//   completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}
//                (top_logprobs holds the alternatives and the chosen token, as OpenAI's does;
//                text_offset counts bytes of the token texts from `offset`, the text before)
// ids_as_tokens (vLLM's return_tokens_as_token_ids): each "token" is "token_id:ID" instead of its
// text, so a client can tell apart ids that decode alike. A log-probability that underflowed to
// -inf is written as -9999 (JSON has no infinity).
nlohmann::json chat_logprobs(const Tokenizer* tok, std::span<const TokenLogprob> lp,
                             bool ids_as_tokens = false);
nlohmann::json completion_logprobs(const Tokenizer* tok, std::span<const TokenLogprob> lp,
                                   int64_t& offset, bool ids_as_tokens = false);
// Appends chat_logprobs(b)'s content to a's (or the completions lists), for a choice's whole run.
void append_logprobs(nlohmann::json& a, const nlohmann::json& b);
// A token's text and bytes as above.
std::string token_text(const Tokenizer* tok, int32_t id);
std::vector<uint8_t> token_bytes(const Tokenizer* tok, int32_t id);

// Streaming chunks. FinishReason::None → null; finish_tool_calls → "tool_calls". A chat stream is,
// per choice: a role chunk, delta chunks (content, reasoning_content, tool_calls), a chunk with an
// empty delta and the finish_reason; after every choice has ended, (include_usage) a usage chunk.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, FinishReason finish_reason, int index = 0,
                                const nlohmann::json& logprobs = nullptr);
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          const nlohmann::json& delta, FinishReason finish_reason, int index = 0,
                          const nlohmann::json& logprobs = nullptr, bool finish_tool_calls = false);
nlohmann::json usage_chunk(Endpoint e, const std::string& id, int64_t created,
                           const std::string& model, Usage u);
nlohmann::json models_list(const std::string& model, int64_t created);

// One server-sent event: "data: <compact json>\n\n"; kSseDone ends a stream.
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace zaya::openai
