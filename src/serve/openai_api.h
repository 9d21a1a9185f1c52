// The OpenAI-compatible HTTP API as pure functions: request JSON → GenerationRequest (validated,
// every rejection an ApiError carrying the HTTP status and OpenAI's error fields), and the
// response / streaming-chunk JSON. No sockets and no engine here, so all of it is unit-tested.
//
// Requests (unknown fields are ignored, as OpenAI clients send extras):
//   POST /v1/completions       prompt: "text" | [ids] | ["text"] | [[ids]] (exactly one prompt)
//   POST /v1/chat/completions  messages: [{role: system|developer|user|assistant,
//                                          content: "text" | [{type:"text", text}]}]
//   both: model (optional; if given must be the served model's id, else 404 model_not_found),
//         max_tokens (completions default 16, as OpenAI; chat default: the rest of the context;
//         chat also reads max_completion_tokens), temperature (default 1), top_p, top_k, min_p,
//         repetition_penalty, seed (default: random per request), stop (string or ≤ 4 strings),
//         stream, stream_options.include_usage, ignore_eos; frequency_penalty / presence_penalty
//         only 0 (use repetition_penalty); n / best_of only 1; echo only false; logprobs only
//         null/false; logit_bias only empty; no tools.
// A text prompt gets the tokenizer's <bos> prepended (as `zaya generate` does); a prompt of token
// ids is used exactly as given.
//
// Chat template (ZAYA1-base is a base model, so a plain transcript):
//   <bos>System: {content}\n\nUser: {content}\n\nAssistant: {content}\n\n … Assistant:
// with "\nUser:" always among the stop strings. "developer" messages are rendered as System. The
// reply usually starts with a space (the model continues "Assistant:").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "infer/engine.h"

namespace zaya {

class Tokenizer;

namespace openai {

// A rejected request: HTTP status and the fields of {"error": {...}}.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;  // empty param / code are sent as null
  ApiError(int status_, std::string message, std::string param_ = "", std::string code_ = "",
           std::string type_ = "invalid_request_error")
      : std::runtime_error(std::move(message)),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
};
// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& e);

// What the parser needs to know about the served model.
struct ServedModel {
  std::string id;           // the name clients pass as "model"
  int64_t max_context = 0;  // prompt + generated tokens per request
  int64_t vocab_size = 0;   // the model's; token-id prompts must be below it
  const Tokenizer* tok = nullptr;
};

enum class Endpoint { Completions, Chat };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: one last chunk carries usage
};

// Throw ApiError (400 for malformed/invalid input, 404 for an unknown model).
ParsedRequest parse_completion_request(std::string_view body, const ServedModel& m);
ParsedRequest parse_chat_request(std::string_view body, const ServedModel& m);

// The chat template above, as text (without <bos>; the parser prepends its id).
std::string chat_prompt_text(const nlohmann::json& messages);
inline constexpr const char* kChatStop = "\nUser:";

// Response objects. `id` is "cmpl-…" / "chatcmpl-…" (new_response_id), `created` Unix seconds.
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};
std::string new_response_id(Endpoint e);
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::string& text, const std::string& finish_reason,
                                   Usage u);
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const std::string& content, const std::string& finish_reason, Usage u);
// Streaming chunks. finish_reason empty → null. A chat stream is: role chunk, content chunks, a
// chunk with an empty delta and the finish_reason, then (include_usage) a usage chunk.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, const std::string& finish_reason);
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          const nlohmann::json& delta, const std::string& finish_reason);
nlohmann::json usage_chunk(Endpoint e, const std::string& id, int64_t created,
                           const std::string& model, Usage u);
nlohmann::json models_list(const std::string& model, int64_t created);

// One server-sent event: "data: <compact json>\n\n"; kSseDone ends a stream.
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace openai
}  // namespace zaya
