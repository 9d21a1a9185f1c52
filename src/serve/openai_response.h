// The OpenAI-compatible HTTP API's answers, as pure functions: response objects, streaming
// chunks, server-sent events and error bodies (the requests: serve/openai_request.h).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "infer/engine.h"
#include "serve/openai_request.h"

namespace zaya::openai {

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& e);

// Response objects. `id` is "cmpl-…" / "chatcmpl-…" (new_response_id), `created` Unix seconds.
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};
std::string new_response_id(Endpoint e);
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::string& text, FinishReason finish_reason, Usage u);
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const std::string& content, FinishReason finish_reason, Usage u);
// Streaming chunks. FinishReason::None → null. A chat stream is: role chunk, content chunks, a
// chunk with an empty delta and the finish_reason, then (include_usage) a usage chunk.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, FinishReason finish_reason);
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          const nlohmann::json& delta, FinishReason finish_reason);
nlohmann::json usage_chunk(Endpoint e, const std::string& id, int64_t created,
                           const std::string& model, Usage u);
nlohmann::json models_list(const std::string& model, int64_t created);

// One server-sent event: "data: <compact json>\n\n"; kSseDone ends a stream.
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace zaya::openai
