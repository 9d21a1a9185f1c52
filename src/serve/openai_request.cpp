// OpenAI request parsing and validation (openai_request.h).
#include "serve/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <regex>

#include "chat/chat_template.h"
#include "core/rng.h"
#include "data/tokenizer.h"
#include "grammar/json_schema.h"
#include "grammar/tool_call_grammar.h"
#include "io/json_parse.h"
#include "serve/constrained.h"

namespace zaya::openai {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg, std::string code = "") {
  throw ApiError(400, msg, param, std::move(code));
}

bool present(const json& j, const char* key) {
  return j.contains(key) && !j[key].is_null();
}

std::optional<double> get_number(const json& j, const char* key) {
  if (!present(j, key)) return std::nullopt;
  if (!j[key].is_number())
    bad(key, fmt::format("'{}' must be a number, got {}", key, j[key].dump()));
  return j[key].get<double>();
}

std::optional<int64_t> get_integer(const json& j, const char* key) {
  if (!present(j, key)) return std::nullopt;
  const json& v = j[key];
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad(key, fmt::format("'{}' is too large: {} (at most {})", key, v.dump(), INT64_MAX));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
      std::fabs(v.get<double>()) < 9e15)
    return int64_t(v.get<double>());
  bad(key, fmt::format("'{}' must be an integer, got {}", key, v.dump()));
}

std::optional<bool> get_bool(const json& j, const char* key) {
  if (!present(j, key)) return std::nullopt;
  if (!j[key].is_boolean())
    bad(key, fmt::format("'{}' must be true or false, got {}", key, j[key].dump()));
  return j[key].get<bool>();
}

json parse_object(std::string_view body) {
  json j;
  try {
    j = parse_json(body);
  } catch (const JsonError& e) {
    bad("", fmt::format("the request body is not valid JSON ({}); send a JSON object with "
                        "Content-Type: application/json",
                        e.what()));
  }
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  return j;
}

// Fields we cannot honour: accepted at their neutral value, rejected otherwise (never silently
// ignored, so a client never believes it got something it did not).
void reject_unsupported(const json& j, Endpoint e) {
  if (auto v = get_bool(j, "echo"); v && *v) bad("echo", "'echo' is not supported (only false)");
  if (present(j, "suffix")) bad("suffix", "'suffix' is not supported");
  if (e == Endpoint::Chat)
    for (const char* k : {"functions", "function_call"})
      if (present(j, k))
        bad(k, fmt::format("'{}' is the deprecated form: use 'tools' and 'tool_choice'", k));
}

// response_format on /v1/completions: only text (structured output is a chat feature here).
void reject_response_format(const json& j) {
  if (present(j, "response_format")) {
    const json& rf = j["response_format"];
    if (!(rf.is_object() && rf.value("type", "") == "text"))
      bad("response_format", "'response_format' is not supported (only {\"type\": \"text\"})");
  }
}

// n (1..kMaxChoices) and best_of (legacy completions: absent, or equal to n — no re-ranking).
int parse_n(const json& j) {
  int n = 1;
  if (auto v = get_integer(j, "n")) {
    if (*v < 1 || *v > kMaxChoices)
      bad("n", fmt::format("'n' must be an integer in [1, {}], got {}", kMaxChoices, *v));
    n = int(*v);
  }
  if (auto v = get_integer(j, "best_of"); v && *v != n)
    bad("best_of", fmt::format("'best_of' must equal 'n' ({}): this server does not re-rank "
                               "choices, got {}",
                               n, *v));
  return n;
}

// Logprobs: chat's `logprobs` (bool) + `top_logprobs` (0..20, needs logprobs), completions' legacy
// `logprobs` (an integer 0..5: that many alternatives) → SamplingParams::top_logprobs.
int parse_logprobs(const json& j, Endpoint e) {
  if (e == Endpoint::Chat) {
    const bool on = get_bool(j, "logprobs").value_or(false);
    const std::optional<int64_t> top = get_integer(j, "top_logprobs");
    if (top && (*top < 0 || *top > kMaxTopLogprobs))
      bad("top_logprobs", fmt::format("'top_logprobs' must be an integer in [0, {}], got {}",
                                      kMaxTopLogprobs, *top));
    if (top && !on) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    return on ? int(top.value_or(0)) : -1;
  }
  if (!present(j, "logprobs")) return -1;
  if (j["logprobs"].is_boolean())  // some clients send false for "off"
    bad("logprobs",
        "'logprobs' of /v1/completions is an integer (the number of alternatives, "
        "0 to 5) or null");
  const int64_t k = *get_integer(j, "logprobs");
  if (k < 0 || k > kMaxCompletionLogprobs)
    bad("logprobs",
        fmt::format("'logprobs' must be an integer in [0, {}], got {}", kMaxCompletionLogprobs, k));
  return int(k);
}

// A token id field (logit_bias keys, stop_token_ids): an integer in [0, vocab).
int32_t token_id(int64_t id, const ServedModel& m, const char* param) {
  if (id < 0 || id >= m.vocab_size)
    bad(param, fmt::format("'{}': token id {} is outside the vocabulary [0, {})", param, id,
                           m.vocab_size));
  return int32_t(id);
}

// logit_bias {"ID": bias} and stop_token_ids [ID, …].
void parse_token_controls(const json& j, const ServedModel& m, SamplingParams& s) {
  if (present(j, "logit_bias")) {
    const json& lb = j["logit_bias"];
    if (!lb.is_object())
      bad("logit_bias", "'logit_bias' must be an object of token id strings to biases");
    if (lb.size() > kMaxLogitBias)
      bad("logit_bias",
          fmt::format("'logit_bias' takes at most {} entries, got {}", kMaxLogitBias, lb.size()));
    for (const auto& [key, v] : lb.items()) {
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || key.empty())
        bad("logit_bias", fmt::format("'logit_bias' keys are token ids (decimal strings), got "
                                      "{}",
                                      json(key).dump()));
      if (!v.is_number())
        bad("logit_bias",
            fmt::format("'logit_bias' values are numbers in [-100, 100], got {}", v.dump()));
      const double bias = v.get<double>();
      if (!(bias >= -100 && bias <= 100))
        bad("logit_bias",
            fmt::format("'logit_bias' for token id {} must be in [-100, 100], got {}", id, bias));
      s.logit_bias.emplace_back(token_id(id, m, "logit_bias"), float(bias));
    }
  }
  if (present(j, "stop_token_ids")) {
    const json& st = j["stop_token_ids"];
    if (!st.is_array()) bad("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    if (st.size() > kMaxStopTokenIds)
      bad("stop_token_ids", fmt::format("'stop_token_ids' takes at most {} ids, got {}",
                                        kMaxStopTokenIds, st.size()));
    for (const json& x : st) {
      if (!x.is_number_integer())
        bad("stop_token_ids", "'stop_token_ids' must be an array of token ids");
      s.stop_ids.push_back(token_id(x.get<int64_t>(), m, "stop_token_ids"));
    }
  }
}

// Any name is served (see the top of openai_request.h); a non-string is still malformed.
std::string requested_model(const json& j) {
  if (!present(j, "model")) return "";
  if (!j["model"].is_string()) bad("model", "'model' must be a string");
  return j["model"].get<std::string>();
}

// Sampling fields shared by both endpoints; max_tokens is settled later against the prompt.
SamplingParams parse_sampling(const json& j, const ServedModel& m) {
  SamplingParams s;
  s.temperature = m.defaults.temperature;
  s.top_k = m.defaults.top_k;
  s.top_p = m.defaults.top_p;
  s.min_p = m.defaults.min_p;
  s.repetition_penalty = m.defaults.repetition_penalty;
  if (auto v = get_number(j, "temperature")) s.temperature = *v;
  if (auto v = get_number(j, "top_p")) s.top_p = *v;
  if (auto v = get_integer(j, "top_k")) s.top_k = *v;
  if (auto v = get_number(j, "min_p")) s.min_p = *v;
  if (auto v = get_number(j, "repetition_penalty")) s.repetition_penalty = *v;
  if (present(j, "seed") && j["seed"].is_number_unsigned()) {
    s.seed = j["seed"].get<uint64_t>();  // any 64-bit seed
  } else if (auto v = get_integer(j, "seed")) {
    s.seed = uint64_t(*v);
  } else {
    static std::atomic<uint64_t> counter{std::random_device{}()};
    s.seed = splitmix64(counter.fetch_add(1) ^
                        uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  }
  if (auto v = get_bool(j, "ignore_eos")) s.ignore_eos = *v;
  if (auto v = get_number(j, "frequency_penalty")) s.frequency_penalty = *v;
  if (auto v = get_number(j, "presence_penalty")) s.presence_penalty = *v;
  if (present(j, "stop")) {
    const json& st = j["stop"];
    if (st.is_string()) {
      s.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      if (st.size() > 4)
        bad("stop", fmt::format("'stop' takes at most 4 strings, got {}", st.size()));
      for (const json& x : st) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        s.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const std::string& x : s.stop)
      if (x.empty()) bad("stop", "'stop' strings must not be empty");
  }
  return s;
}

// max_tokens against the context, then every sampling range (the parameter named as the client
// spelled it).
void finish_sampling(ParsedRequest& r, const json& j, const ServedModel& m,
                     int64_t default_max_tokens) {
  const int64_t prompt_len = int64_t(r.gen.prompt.size());
  if (prompt_len == 0)
    bad(r.endpoint == Endpoint::Chat ? "messages" : "prompt", "the prompt is empty");
  if (prompt_len >= m.max_context)
    bad(r.endpoint == Endpoint::Chat ? "messages" : "prompt",
        fmt::format("This model's maximum context length is {} tokens, but the prompt has {} "
                    "tokens; shorten it",
                    m.max_context, prompt_len),
        "context_length_exceeded");
  const char* key = "max_tokens";
  std::optional<int64_t> max_tokens = get_integer(j, "max_tokens");
  if (!max_tokens && r.endpoint == Endpoint::Chat) {
    max_tokens = get_integer(j, "max_completion_tokens");
    if (max_tokens) key = "max_completion_tokens";
  }
  r.gen.sampling.max_new_tokens =
      max_tokens ? *max_tokens : std::min(default_max_tokens, m.max_context - prompt_len);
  if (r.gen.sampling.max_new_tokens < 0)
    bad(key,
        fmt::format("'{}' must be an integer ≥ 0, got {}", key, r.gen.sampling.max_new_tokens));
  // Compared without forming prompt + max_tokens, which overflows for max_tokens near INT64_MAX.
  if (r.gen.sampling.max_new_tokens > m.max_context - prompt_len)
    bad(key,
        fmt::format("This model's maximum context length is {} tokens, but {} + {} were "
                    "requested ({} in the prompt, {} for the completion); lower {} or shorten "
                    "the prompt",
                    m.max_context, prompt_len, r.gen.sampling.max_new_tokens, prompt_len,
                    r.gen.sampling.max_new_tokens, key),
        "context_length_exceeded");
  if (auto inv = r.gen.sampling.check()) {
    std::string field = inv->field;
    if (field == "max_new_tokens") field = key;
    if (field == "stop_ids") field = "stop_token_ids";
    if (field == "top_logprobs" && r.endpoint == Endpoint::Completions) field = "logprobs";
    bad(field, inv->message);
  }
  if (auto v = get_bool(j, "return_tokens_as_token_ids")) r.tokens_as_ids = *v;
  if (auto v = get_bool(j, "stream")) r.stream = *v;
  if (present(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (auto v = get_bool(so, "include_usage")) r.include_usage = *v;
  }
}

void append_text(std::vector<int32_t>& ids, const std::string& text, const ServedModel& m,
                 bool bos) {
  if (!m.tok)
    bad("prompt", "this server has no tokenizer: send the prompt as an array of token ids");
  const int32_t bos_id = m.bos_id ? *m.bos_id : m.tok->bos_id();
  if (bos && bos_id >= 0) ids.push_back(bos_id);
  m.tok->encode(text, ids);
}

std::vector<int32_t> parse_prompt(const json& j, const ServedModel& m) {
  if (!present(j, "prompt"))
    bad("prompt", "'prompt' is required (a string or an array of token ids)");
  json p = j["prompt"];
  const char* shape =
      "'prompt' must be a string, an array of token ids, or a one-element array "
      "holding either";
  // ["text"] and [[ids]]: batches of one.
  if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
    if (p.size() != 1)
      bad("prompt", fmt::format("this server takes one prompt per request, got {}", p.size()));
    p = json(p[0]);
  }
  std::vector<int32_t> ids;
  if (p.is_string()) {
    append_text(ids, p.get<std::string>(), m, true);
    return ids;
  }
  if (!p.is_array()) bad("prompt", shape);
  for (const json& x : p) {
    if (!x.is_number_integer()) bad("prompt", shape);
    const int64_t id = x.get<int64_t>();
    if (id < 0 || id >= m.vocab_size)
      bad("prompt", fmt::format("token id {} is outside the vocabulary [0, {})", id, m.vocab_size));
    ids.push_back(int32_t(id));
  }
  return ids;
}

// A JSON value of an unexpected type deep inside a field (nlohmann's type_error from value(), at(),
// get<>) is the client's fault too: 400, never the server's 500.
template <class F>
ParsedRequest guarded(F&& parse) {
  try {
    return parse();
  } catch (const json::exception& e) {
    bad("", fmt::format("the request does not have the expected shape ({})", e.what()));
  }
}

ParsedRequest completion_request(std::string_view body, const ServedModel& m) {
  const json j = parse_object(body);
  ParsedRequest r;
  r.model = requested_model(j);
  reject_unsupported(j, Endpoint::Completions);
  reject_response_format(j);
  r.endpoint = Endpoint::Completions;
  r.gen.sampling = parse_sampling(j, m);
  r.gen.n = parse_n(j);
  r.gen.sampling.top_logprobs = parse_logprobs(j, r.endpoint);
  parse_token_controls(j, m, r.gen.sampling);
  r.gen.prompt = parse_prompt(j, m);
  finish_sampling(r, j, m, 16);
  return r;
}

using ojson = nlohmann::ordered_json;

// The param of a message the template's validation refused: the "messages[I].FIELD" its message
// starts with ("messages" when it names none), as the plain transcript's parser reports it.
std::string message_param(std::string_view msg) {
  static const std::regex at(R"(^'?(messages\[\d+\])(\.(role|content|tool_calls))?)");
  std::cmatch mt;
  if (!std::regex_search(msg.data(), msg.data() + msg.size(), mt, at)) return "messages";
  if (mt[2].matched) return mt[1].str() + mt[2].str();
  return mt[1].str() + (msg.find("'role'") != std::string_view::npos ? ".role" : "");
}

// tools: [{type: "function", function: {name, description?, parameters?}}] (names unique).
void check_tools(const ojson& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array of {type: \"function\", function}");
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object())
      bad("tools",
          fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", where));
    const ojson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      bad("tools", fmt::format("'{}.function.name' must be a non-empty string", where));
    if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
      bad("tools", fmt::format("'{}.function.parameters' must be a JSON Schema object", where));
    const std::string name = f["name"];
    if (std::find(names.begin(), names.end(), name) != names.end())
      bad("tools", fmt::format("'{}': the tool name '{}' is declared twice", where, name));
    names.push_back(name);
  }
}

enum class ToolChoice { None, Auto, Required, Named };

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name": N}}
// (N declared). Default: auto with tools, none without.
ToolChoice parse_tool_choice(const ojson& j, const ojson& tools, std::string& name) {
  const bool have_tools = tools.is_array() && !tools.empty();
  if (!j.contains("tool_choice") || j["tool_choice"].is_null())
    return have_tools ? ToolChoice::Auto : ToolChoice::None;
  const ojson& c = j["tool_choice"];
  ToolChoice tc;
  if (c.is_string() && c == "none") return ToolChoice::None;
  if (c.is_string() && c == "auto") {
    tc = ToolChoice::Auto;
  } else if (c.is_string() && c == "required") {
    tc = ToolChoice::Required;
  } else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") &&
             c["function"].is_object() && c["function"].contains("name") &&
             c["function"]["name"].is_string()) {
    tc = ToolChoice::Named;
    name = c["function"]["name"];
    bool declared = false;
    for (const ojson& t : tools) declared = declared || t["function"]["name"] == name;
    if (!declared)
      bad("tool_choice", fmt::format("'tool_choice' names the function '{}', which 'tools' does "
                                     "not declare",
                                     name));
  } else {
    bad("tool_choice",
        "'tool_choice' must be \"none\", \"auto\", \"required\" or "
        "{\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (!have_tools)
    bad("tool_choice", "'tool_choice' other than \"none\" needs a non-empty 'tools' array");
  return tc;
}

// response_format: text (nothing), json_object, json_schema {name, schema, strict}. Returns the
// grammar, or null for text.
std::shared_ptr<const grammar::Grammar> parse_response_format(const ojson& j) {
  if (!j.contains("response_format") || j["response_format"].is_null()) return nullptr;
  const ojson& rf = j["response_format"];
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    bad("response_format", "'response_format' must be an object with a string 'type'");
  const std::string type = rf["type"];
  if (type == "text") return nullptr;
  if (type == "json_object") return std::make_shared<grammar::Grammar>(grammar::any_json_object());
  if (type != "json_schema")
    bad("response_format", fmt::format("'response_format.type' must be text, json_object or "
                                       "json_schema, got '{}'",
                                       type));
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    bad("response_format", "'response_format.json_schema' must be an object {name, schema}");
  const ojson& js = rf["json_schema"];
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
    bad("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
  try {
    return std::make_shared<grammar::Grammar>(grammar::from_json_schema(js["schema"]));
  } catch (const Error& e) {  // SchemaError, or a grammar too large to build
    bad("response_format", fmt::format("'response_format.json_schema.schema': {}", e.what()));
  }
}

// Chat through the model's template (chat/chat_template.h): the rendered prompt, tokenized with
// its special tokens; the output plan (reasoning, tool calls) and any grammar constraint.
void templated_chat(ParsedRequest& r, const json& j, std::string_view body, const ServedModel& m,
                    const chat::ChatTemplate& tpl) {
  ojson oj;
  try {
    oj = parse_json_ordered(body);
  } catch (const JsonError& e) {
    bad("", fmt::format("the request body is not valid JSON ({})", e.what()));
  }
  ojson tools = nullptr;
  if (oj.contains("tools") && !oj["tools"].is_null()) {
    check_tools(oj["tools"]);
    if (!oj["tools"].empty()) tools = oj["tools"];
  }
  std::string forced;
  const ToolChoice tc = parse_tool_choice(oj, tools, forced);
  if (tools.is_array() && tpl.format == chat::ChatFormat::Transcript)
    bad("tools",
        fmt::format("'tools' needs a chat template; this model has none ({})", tpl.origin));
  ojson kwargs = m.chat_kwargs.is_object() ? m.chat_kwargs : ojson::object();
  if (oj.contains("chat_template_kwargs") && !oj["chat_template_kwargs"].is_null()) {
    if (!oj["chat_template_kwargs"].is_object())
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : oj["chat_template_kwargs"].items()) kwargs[k] = v;
  }
  std::string text;
  try {
    text = tpl.render(oj["messages"], tools, true, kwargs);
  } catch (const chat::ChatError& e) {
    bad(message_param(e.what()), e.what());
  }
  // A template writes whatever BOS its model wants (bos_token) itself, and its text is tokenized
  // as transformers' apply_chat_template does it, with no special token added; only the plain
  // transcript of a base model starts with the model's BOS id, as a text prompt does.
  append_text(r.gen.prompt, text, m, tpl.format == chat::ChatFormat::Transcript);
  for (const std::string& s : tpl.stop_strings()) r.gen.sampling.stop.push_back(s);

  r.chat.split_reasoning = tpl.format != chat::ChatFormat::Transcript;
  r.chat.starts_in_reasoning = r.chat.split_reasoning && chat::opens_reasoning(text);
  r.chat.parse_tools = tools.is_array() && tc != ToolChoice::None;
  r.chat.tools = tools;
  r.chat.tool_id_seed = splitmix64(r.gen.sampling.seed ^ 0x7001c411ULL);

  std::shared_ptr<const grammar::Grammar> g = parse_response_format(oj);
  if (tc == ToolChoice::Required || tc == ToolChoice::Named) {
    if (g)
      bad("response_format",
          "'response_format' and a forced 'tool_choice' (required or a named "
          "function) cannot be combined");
    try {
      g = std::make_shared<grammar::Grammar>(grammar::zaya_tool_calls(tools, forced));
    } catch (const Error& e) {  // SchemaError, or a grammar too large to build
      bad("tools", fmt::format("'tools' cannot be enforced for tool_choice: {}", e.what()));
    }
  }
  // One call only for a named function (OpenAI's forced call) or parallel_tool_calls false.
  bool single = tc == ToolChoice::Named;
  if (oj.contains("parallel_tool_calls") && !oj["parallel_tool_calls"].is_null()) {
    if (!oj["parallel_tool_calls"].is_boolean())
      bad("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    single = single || !oj["parallel_tool_calls"].get<bool>();
  }
  if (g) {
    if (!m.vocab_index)
      bad(tc == ToolChoice::Required || tc == ToolChoice::Named ? "tool_choice" : "response_format",
          "structured output is not available on this server (no vocabulary index)");
    r.gen.make_processor = [g, vocab = m.vocab_index, eos = m.eos_ids,
                            after = r.chat.starts_in_reasoning,
                            single]() -> std::unique_ptr<LogitsProcessor> {
      return std::make_unique<GrammarProcessor>(*g, vocab(), eos, after, single);
    };
  }
  (void)j;
}

ParsedRequest chat_request(std::string_view body, const ServedModel& m) {
  const json j = parse_object(body);
  ParsedRequest r;
  r.model = requested_model(j);
  reject_unsupported(j, Endpoint::Chat);
  r.endpoint = Endpoint::Chat;
  r.gen.sampling = parse_sampling(j, m);
  r.gen.n = parse_n(j);
  r.gen.sampling.top_logprobs = parse_logprobs(j, r.endpoint);
  parse_token_controls(j, m, r.gen.sampling);
  if (!present(j, "messages")) bad("messages", "'messages' is required");
  // A server without a chat format given (unit tests) serves the plain transcript, as a model
  // directory that declares none does.
  static const chat::ChatTemplate kTranscript = [] {
    chat::ChatTemplate t;
    t.origin = "no chat template";
    return t;
  }();
  templated_chat(r, j, body, m, m.chat_template ? *m.chat_template : kTranscript);
  finish_sampling(r, j, m, m.max_context);
  return r;
}

}  // namespace

ParsedRequest parse_completion_request(std::string_view body, const ServedModel& m) {
  return guarded([&] { return completion_request(body, m); });
}

ParsedRequest parse_chat_request(std::string_view body, const ServedModel& m) {
  return guarded([&] { return chat_request(body, m); });
}

}  // namespace zaya::openai
