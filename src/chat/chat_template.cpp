// Chat formats: loading the model's template (or the built-in ones) and rendering OpenAI messages
// through it (chat_template.h).
#include "chat/chat_template.h"

#include <filesystem>

#include "data/tokenizer.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya::chat {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

constexpr std::string_view kBuiltinChatML = R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" ~ (tool | tojson) }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' ~ messages[0].content ~ '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- set content = message.content if message.content is string else '' %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' ~ message.role ~ '\n' ~ content ~ '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {%- if '</think>' in content %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {{- '<|im_start|>assistant' }}
        {%- if content %}
            {{- '\n' ~ content }}
        {%- endif %}
        {%- for call in message.tool_calls | default([]) %}
            {%- set fn = call.function if call.function is defined else call %}
            {{- '\n<tool_call>\n{"name": "' ~ fn.name ~ '", "arguments": ' ~ (fn.arguments if fn.arguments is string else fn.arguments | tojson) ~ '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' ~ content ~ '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- elif message.role != 'system' %}
        {{- '<|im_start|>' ~ message.role ~ '\n' ~ content ~ '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})TPL";

[[noreturn]] void bad(const std::string& msg) {
  throw ChatError(msg);
}

// content: a string, null, or text parts concatenated (as the plain transcript always did).
ordered_json flat_content(const ordered_json& msg, size_t i, const std::string& role) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  if (!msg.contains("content") || msg["content"].is_null()) {
    if (role == "assistant")
      return msg.contains("content") ? ordered_json(nullptr) : ordered_json();
    bad("'" + where + "' is required");
  }
  const ordered_json& c = msg["content"];
  if (c.is_string()) return c;
  if (!c.is_array()) bad("'" + where + "' must be a string or an array of text parts");
  std::string text;
  for (const ordered_json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string())
      bad("'" + where +
          "': only parts of the form {\"type\": \"text\", \"text\": \"...\"} are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

ordered_json validate_messages(const ordered_json& messages) {
  if (!messages.is_array() || messages.empty())
    bad("'messages' must be a non-empty array of {role, content} objects");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& msg = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      bad(at + " must be an object with a string 'role'");
    const std::string role = msg["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool" && role != "function")
      bad(at + ".role '" + role +
          "' is not one of system, developer, user, assistant, tool, function");
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : msg.items()) {
      if (k == "content") {
        m[k] = flat_content(msg, i, role);
      } else if (k == "tool_calls" && !v.is_null()) {
        if (!v.is_array()) bad("'" + at + ".tool_calls' must be an array");
        ordered_json calls = ordered_json::array();
        for (size_t j = 0; j < v.size(); ++j) {
          const std::string cat = at + ".tool_calls[" + std::to_string(j) + "]";
          ordered_json call = v[j];
          if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
              !call["function"].contains("name") || !call["function"]["name"].is_string())
            bad("'" + cat + "' must be {\"type\": \"function\", \"function\": {\"name\": ..., " +
                "\"arguments\": ...}}");
          ordered_json& args = call["function"]["arguments"];
          if (args.is_string()) {
            try {
              args = parse_json_ordered(args.get<std::string>());
            } catch (const JsonError& e) {
              bad("'" + cat + ".function.arguments' is not valid JSON (" + e.what() + ")");
            }
          } else if (args.is_null()) {
            args = ordered_json::object();
          }
          if (!args.is_object())
            bad("'" + cat + ".function.arguments' must be a JSON object (or a string holding one)");
          calls.push_back(std::move(call));
        }
        m[k] = std::move(calls);
      } else {
        m[k] = v;
      }
    }
    if (!m.contains("content") && role != "assistant") bad("'" + at + ".content' is required");
    out.push_back(std::move(m));
  }
  return out;
}

std::string transcript(const ordered_json& messages) {
  std::string text;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& msg = messages[i];
    const std::string role = msg["role"].get<std::string>();
    const char* label = role == "system" || role == "developer" ? "System"
                        : role == "user"                        ? "User"
                        : role == "assistant"                   ? "Assistant"
                                                                : nullptr;
    if (!label)
      bad("messages[" + std::to_string(i) + "].role '" + role +
          "' is not one of system, developer, user, assistant");
    const ordered_json c = msg.value("content", ordered_json());
    text += std::string(label) + ": " + (c.is_string() ? c.get<std::string>() : "") + "\n\n";
  }
  return text + "Assistant:";
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template} ("default").
std::string config_template(const std::string& path) {
  ordered_json j;
  try {
    j = parse_json_ordered(read_text_file(path, "tokenizer config"));
  } catch (const JsonError& e) {
    fail("{}: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) return "";
  const ordered_json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const ordered_json& x : t)
      if (x.is_object() && x.value("name", "") == "default" && x.contains("template") &&
          x["template"].is_string())
        return x["template"].get<std::string>();
    fail("{}: 'chat_template' is a list with no template named \"default\"", path);
  }
  fail("{}: 'chat_template' must be a string or a list of {{name, template}}", path);
}

}  // namespace

std::string_view builtin_chatml_source() {
  return kBuiltinChatML;
}

ChatTemplate ChatTemplate::from_source(std::string_view source, std::string origin,
                                       ChatFormat format) {
  ChatTemplate t;
  t.format = format;
  t.origin = std::move(origin);
  try {
    t.compiled = jinja::Template::parse(source, t.origin);
  } catch (const jinja::TemplateError& e) {
    fail("the chat template does not parse: {}", e.what());
  }
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& model_dir, const std::string& flag_path,
                                const ModelExtras& extras, const Tokenizer* tok) {
  ChatTemplate t;
  const fs::path dir_file = fs::path(model_dir) / "chat_template.jinja";
  std::error_code ec;
  std::string config_path = extras.tokenizer_config;
  if (config_path.empty() && !model_dir.empty() &&
      fs::exists(fs::path(model_dir) / "tokenizer_config.json", ec))
    config_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  // A model without a directory (a GGUF file) names its tokenizer config as the file and a key:
  // not a file to read here (its template, if any, is extras.chat_template).
  if (model_dir.empty() && !fs::is_regular_file(config_path, ec)) config_path.clear();
  if (!flag_path.empty()) {
    t = from_source(read_text_file(flag_path, "--chat-template"), flag_path,
                    ChatFormat::ModelTemplate);
  } else if (!extras.chat_template.empty()) {
    t = from_source(extras.chat_template, extras.chat_template_origin, ChatFormat::ModelTemplate);
  } else if (!model_dir.empty() && fs::exists(dir_file, ec)) {
    t = from_source(read_text_file(dir_file.string(), "chat template"), dir_file.string(),
                    ChatFormat::ModelTemplate);
  } else if (std::string s = config_path.empty() ? "" : config_template(config_path); !s.empty()) {
    t = from_source(s, config_path + " (chat_template)", ChatFormat::ModelTemplate);
  } else if (tok && tok->token_id("<|im_start|>") >= 0 && tok->token_id("<|im_end|>") >= 0) {
    t = from_source(kBuiltinChatML, "built-in ChatML", ChatFormat::BuiltinChatML);
  } else {
    t.format = ChatFormat::Transcript;
    t.origin = "built-in transcript (System:/User:/Assistant:)";
  }
  t.bos_token = extras.bos_token;
  t.eos_token = extras.eos_token;
  return t;
}

std::string ChatTemplate::render(const ordered_json& messages, const ordered_json& tools,
                                 bool add_generation_prompt, const ordered_json& kwargs) const {
  const ordered_json msgs = validate_messages(messages);
  if (format == ChatFormat::Transcript) return transcript(msgs);
  if (!tools.is_null() && !tools.is_array()) bad("'tools' must be an array of tools");
  if (!kwargs.is_null() && !kwargs.is_object()) bad("'chat_template_kwargs' must be an object");
  ordered_json ctx = ordered_json::object();
  ctx["messages"] = msgs;
  ctx["tools"] = tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (kwargs.is_object())
    for (const auto& [k, v] : kwargs.items()) {
      if (k == "messages") bad("'chat_template_kwargs' may not set 'messages'");
      ctx[k] = v;
    }
  try {
    return compiled.render(ctx);
  } catch (const jinja::RaisedError& e) {
    throw ChatError(e.message);
  } catch (const jinja::TemplateError& e) {
    throw ChatError(std::string("the chat template failed: ") + e.what());
  }
}

std::vector<std::string> ChatTemplate::stop_strings() const {
  if (format == ChatFormat::Transcript) return {"\nUser:"};
  return {};
}

bool opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind("<think>");
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind("</think>");
  return close == std::string_view::npos || open > close;
}

std::vector<int32_t> prompt_ids(const ChatTemplate& t, const Tokenizer& tok, std::string_view text,
                                int32_t bos) {
  std::vector<int32_t> ids;
  if (t.format == ChatFormat::Transcript && bos >= 0) ids.push_back(bos);
  tok.encode(text, ids);
  return ids;
}

}  // namespace zaya::chat
