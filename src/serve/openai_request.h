// The OpenAI-compatible HTTP API's requests, as pure functions: request JSON → GenerationRequest
// (validated, every rejection an ApiError carrying the HTTP status and OpenAI's error fields). No
// sockets and no engine here, so all of it is unit-tested; serve/openai_response.h builds the
// answers.
//
// Requests (unknown fields are ignored, as OpenAI clients send extras):
//   POST /v1/completions       prompt: "text" | [ids] | ["text"] | [[ids]] (exactly one prompt)
//   POST /v1/chat/completions  messages: OpenAI messages (system, developer, user, assistant with
//                              optional tool_calls, tool), rendered by the model's chat template
//   both: model (optional, any string: the server has one model and serves every request with
//         it, as llama.cpp's server does, so a client configured with another name still works;
//         responses carry the served id), max_tokens (completions default 16, as OpenAI, or what
//         fits; chat default: the rest of the context, which is the trained context unless the
//         server was given another; chat also reads max_completion_tokens), temperature, top_p,
//         top_k, min_p, repetition_penalty (defaults: ServedModel::defaults, i.e. the model's
//         generation_config.json and the server's flags), seed (default: random per request), stop
//         (string or ≤ 4 strings), stop_token_ids (vLLM's: ids that end a choice like EOS), stream,
//         stream_options.include_usage, ignore_eos, frequency_penalty / presence_penalty
//         ([-2, 2], OpenAI's), logit_bias ({"ID": bias in [-100, 100]}, ≤ 300 entries),
//         n (1..8 choices; best_of absent or equal to n);
//         logprobs — chat: `logprobs` true (+ `top_logprobs` 0..20); completions: the legacy
//         integer 0..5 (that many alternatives) — the model's own distribution (engine.h);
//         return_tokens_as_token_ids (vLLM's: logprobs name tokens "token_id:ID");
//         echo only false; no suffix.
//   chat: tools, tool_choice (none | auto | required | {type: function, function: {name}}),
//         chat_template_kwargs (template variables over the server's: enable_thinking, …),
//         response_format (text | json_object | json_schema {schema}); tools and a forced
//         tool_choice need a chat template (not the plain transcript); a forced tool_choice and a
//         json response_format are enforced by a grammar (serve/constrained.h), and a schema the
//         grammar compiler does not support is a 400 naming the construct.
// A text prompt gets the model's BOS prepended (ServedModel::bos_id, as `zaya generate` does); a
// prompt of token ids is used exactly as given.
//
// Chat rendering (ServedModel::chat_template, chat/chat_template.h): the model's template, or the
// built-in ChatML one, tokenized with its special tokens and no BOS added (the template writes
// the model's BOS itself when the model wants one); a model with no chat format gets the plain
// transcript of a base model,
//   <bos>System: {content}\n\nUser: {content}\n\nAssistant: {content}\n\n … Assistant:
// with "\nUser:" always among the stop strings ("developer" messages are rendered as System; the
// reply usually starts with a space, as the model continues "Assistant:"). A ServedModel
// without a chat_template (unit tests) gets that transcript.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "infer/engine.h"
#include "serve/chat_output.h"

namespace zaya {

class Tokenizer;
namespace chat {
struct ChatTemplate;
}
namespace grammar {
class VocabIndex;
}

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
// What the parser needs to know about the served model.
struct ServedModel {
  std::string id;           // the name clients pass as "model"
  int64_t max_context = 0;  // prompt + generated tokens per request
  int64_t vocab_size = 0;   // the model's; token-id prompts must be below it
  const Tokenizer* tok = nullptr;
  // The id a text prompt starts with (infer/model_files.h: bos_id; -1 none); unset: the
  // tokenizer's "<bos>".
  std::optional<int32_t> bos_id = std::nullopt;
  // What a request starts from before its own fields: generation_config.json's sampling fields
  // (infer/model_files.h default_sampling) with `zaya serve`'s sampling flags in place. Only
  // temperature, top_k, top_p, min_p and repetition_penalty are read from it.
  SamplingParams defaults = {};
  // Chat: the model's template (chat/chat_template.h), loaded once at start; null: the built-in
  // plain transcript below (unit tests). chat_kwargs: the server's template variables
  // (--reasoning off: enable_thinking false), under a request's chat_template_kwargs.
  const chat::ChatTemplate* chat_template = nullptr;
  nlohmann::ordered_json chat_kwargs = nlohmann::ordered_json::object();
  // Structured output: the engine's stop ids (a grammar lets them through once its output is
  // complete) and the vocabulary index, built on the first constrained request (empty: none,
  // structured output is refused).
  std::vector<int32_t> eos_ids = {};
  std::function<std::shared_ptr<const grammar::VocabIndex>()> vocab_index = {};
};

enum class Endpoint { Completions, Chat };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: one last chunk carries usage
  std::string model;           // the "model" the client named ("" if none): logged, not checked
  ChatOutputPlan chat;         // chat: how the answer is split and parsed (serve/chat_output.h)
  bool tokens_as_ids = false;  // return_tokens_as_token_ids: logprobs name tokens "token_id:ID"
};

// Throw ApiError (400 for malformed or invalid input).
ParsedRequest parse_completion_request(std::string_view body, const ServedModel& m);
ParsedRequest parse_chat_request(std::string_view body, const ServedModel& m);

inline constexpr int kMaxChoices = 8;             // n
inline constexpr int kMaxTopLogprobs = 20;        // chat top_logprobs
inline constexpr int kMaxCompletionLogprobs = 5;  // completions logprobs
inline constexpr size_t kMaxLogitBias = 300;      // logit_bias entries (OpenAI's bound)
inline constexpr size_t kMaxStopTokenIds = 64;    // stop_token_ids

}  // namespace openai
}  // namespace zaya
