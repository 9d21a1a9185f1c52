// OpenAI response formatting (openai_response.h).
#include "serve/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <random>

#include "core/rng.h"

namespace zaya::openai {

using json = nlohmann::json;

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json() : json(e.param)},
            {"code", e.code.empty() ? json() : json(e.code)}}}};
}

std::string new_response_id(Endpoint e) {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  const uint64_t x = splitmix64(counter.fetch_add(1));
  return fmt::format("{}-{:016x}", e == Endpoint::Chat ? "chatcmpl" : "cmpl", x);
}

namespace {
json usage_json(Usage u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}
json reason(FinishReason r) {
  return r == FinishReason::None ? json() : json(std::string(enum_word(r)));
}
}  // namespace

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, FinishReason finish_reason, Usage u) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"text", text},
                                    {"index", 0},
                                    {"logprobs", nullptr},
                                    {"finish_reason", reason(finish_reason)}}})},
          {"usage", usage_json(u)}};
}

json chat_response(const std::string& id, int64_t created, const std::string& model,
                   const std::string& content, FinishReason finish_reason, Usage u) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"index", 0},
                                    {"message", {{"role", "assistant"}, {"content", content}}},
                                    {"logprobs", nullptr},
                                    {"finish_reason", reason(finish_reason)}}})},
          {"usage", usage_json(u)}};
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, FinishReason finish_reason) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"text", text},
                                    {"index", 0},
                                    {"logprobs", nullptr},
                                    {"finish_reason", reason(finish_reason)}}})}};
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, const json& delta,
                FinishReason finish_reason) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"index", 0},
                                    {"delta", delta},
                                    {"logprobs", nullptr},
                                    {"finish_reason", reason(finish_reason)}}})}};
}

json usage_chunk(Endpoint e, const std::string& id, int64_t created, const std::string& model,
                 Usage u) {
  return {{"id", id},
          {"object", e == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage_json(u)}};
}

json models_list(const std::string& model, int64_t created) {
  return {
      {"object", "list"},
      {"data",
       json::array(
           {{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "zaya"}}})}};
}

std::string sse_event(const json& j) {
  // Generated text may hold U+FFFD but is valid UTF-8; replace guards the dump all the same.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace zaya::openai
