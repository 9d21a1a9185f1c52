// OpenAI response formatting (openai_response.h).
#include "serve/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <random>

#include "core/rng.h"
#include "data/tokenizer.h"

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

json reason_of(FinishReason r, bool tool_calls) {
  return tool_calls && r != FinishReason::None ? json("tool_calls") : reason(r);
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const std::vector<ChoiceResult>& choices, Usage u) {
  json cs = json::array();
  for (const ChoiceResult& c : choices)
    cs.push_back({{"text", c.text},
                  {"index", c.index},
                  {"logprobs", c.logprobs},
                  {"finish_reason", reason(c.finish)}});
  return {{"id", id},      {"object", "text_completion"}, {"created", created}, {"model", model},
          {"choices", cs}, {"usage", usage_json(u)}};
}

json chat_response(const std::string& id, int64_t created, const std::string& model,
                   const std::vector<ChoiceResult>& choices, Usage u) {
  json cs = json::array();
  for (const ChoiceResult& c : choices) {
    json msg = {{"role", "assistant"}};
    // With tool calls and no text, content is null (OpenAI's shape).
    msg["content"] = c.text.empty() && c.tool_calls.is_array() ? json() : json(c.text);
    if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
    if (c.tool_calls.is_array()) msg["tool_calls"] = c.tool_calls;
    cs.push_back({{"index", c.index},
                  {"message", msg},
                  {"logprobs", c.logprobs},
                  {"finish_reason", reason_of(c.finish, c.finish_tool_calls)}});
  }
  return {{"id", id},      {"object", "chat.completion"}, {"created", created}, {"model", model},
          {"choices", cs}, {"usage", usage_json(u)}};
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, FinishReason finish_reason, Usage u) {
  ChoiceResult c;
  c.text = text;
  c.finish = finish_reason;
  return completion_response(id, created, model, std::vector<ChoiceResult>{c}, u);
}

json chat_response(const std::string& id, int64_t created, const std::string& model,
                   const std::string& content, FinishReason finish_reason, Usage u) {
  ChoiceResult c;
  c.text = content;
  c.finish = finish_reason;
  return chat_response(id, created, model, std::vector<ChoiceResult>{c}, u);
}

std::string token_text(const Tokenizer* tok, int32_t id) {
  if (!tok || id < 0 || id >= tok->vocab_size()) return fmt::format("token_id:{}", id);
  const int32_t one[] = {id};
  return tok->decode(one);
}

std::vector<uint8_t> token_bytes(const Tokenizer* tok, int32_t id) {
  if (tok && id >= 0 && id < tok->vocab_size()) {
    // A byte-fallback token stands for one byte, whatever its lone decoding shows.
    const std::string_view t = tok->token(id);
    unsigned v = 0;
    if (t.size() == 6 && t.substr(0, 3) == "<0x" && t[5] == '>' &&
        std::from_chars(t.data() + 3, t.data() + 5, v, 16).ptr == t.data() + 5)
      return {uint8_t(v)};
  }
  const std::string s = token_text(tok, id);
  return std::vector<uint8_t>(s.begin(), s.end());
}

namespace {
// JSON has no -inf: a log-probability that underflowed is written as -9999 (as vLLM does).
double finite_logprob(float l) {
  return std::isfinite(l) ? double(l) : -9999.0;
}
std::string shown_token(const Tokenizer* tok, int32_t id, bool ids_as_tokens) {
  return ids_as_tokens ? fmt::format("token_id:{}", id) : token_text(tok, id);
}
}  // namespace

json chat_logprobs(const Tokenizer* tok, std::span<const TokenLogprob> lp, bool ids_as_tokens) {
  json content = json::array();
  for (const TokenLogprob& t : lp) {
    json top = json::array();
    for (const auto& [id, l] : t.top)
      top.push_back({{"token", shown_token(tok, id, ids_as_tokens)},
                     {"logprob", finite_logprob(l)},
                     {"bytes", token_bytes(tok, id)}});
    content.push_back({{"token", shown_token(tok, t.id, ids_as_tokens)},
                       {"logprob", finite_logprob(t.logprob)},
                       {"bytes", token_bytes(tok, t.id)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const Tokenizer* tok, std::span<const TokenLogprob> lp, int64_t& offset,
                         bool ids_as_tokens) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : lp) {
    const std::string shown = shown_token(tok, t.id, ids_as_tokens);
    tokens.push_back(shown);
    logprobs.push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const auto& [id, l] : t.top) top[shown_token(tok, id, ids_as_tokens)] = finite_logprob(l);
    top[shown] = finite_logprob(t.logprob);
    tops.push_back(top);
    offsets.push_back(offset);
    offset += int64_t(token_text(tok, t.id).size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

void append_logprobs(json& a, const json& b) {
  if (b.is_null()) return;
  if (a.is_null()) {
    a = b;
    return;
  }
  for (const auto& [k, v] : b.items())
    for (const json& x : v) a[k].push_back(x);
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, FinishReason finish_reason, int index,
                      const json& logprobs) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"text", text},
                                    {"index", index},
                                    {"logprobs", logprobs},
                                    {"finish_reason", reason(finish_reason)}}})}};
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, const json& delta,
                FinishReason finish_reason, int index, const json& logprobs,
                bool finish_tool_calls) {
  return {
      {"id", id},
      {"object", "chat.completion.chunk"},
      {"created", created},
      {"model", model},
      {"choices", json::array({{{"index", index},
                                {"delta", delta},
                                {"logprobs", logprobs},
                                {"finish_reason", reason_of(finish_reason, finish_tool_calls)}}})}};
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
