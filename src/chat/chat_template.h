// How a chat request becomes prompt text: the model's own chat template (rendered by src/jinja),
// a built-in ChatML template for models whose tokenizer speaks ChatML but ship no template, or the
// plain "System:/User:/Assistant:" transcript of a base model (docs/chat-templates.md, "How a
// model directory's template is found").
//
// Contract:
//   - ChatTemplate::load picks the first of: flag_path (--chat-template FILE) when not empty;
//     the template the model carries inside (extras.chat_template: a GGUF file's; model_dir is
//     then ""); DIR/chat_template.jinja; tokenizer_config.json's "chat_template" (a string, or a
//     list of {name, template} from which "default" is taken); the built-in ChatML template when
//     the tokenizer has both <|im_start|> and <|im_end|>; else Transcript. A template that does not
//     parse, an unreadable flag file or a malformed tokenizer_config.json is a zaya::Error naming
//     the file.
//   - render validates OpenAI messages (roles system, developer, user, assistant, tool, function;
//     content a string, null, or [{type: text, text}] parts concatenated to one string; assistant
//     tool_calls[].function.arguments given as a JSON string parsed to an object, as vLLM does)
//     and renders them with the context transformers builds: messages, tools (null when absent),
//     documents (null), add_generation_prompt, bos_token, eos_token, then the kwargs (which may
//     not set "messages"). Every failure is a ChatError whose message fits a 400 answer; a
//     template's raise_exception message is passed on verbatim.
//   - Transcript renders exactly the format zaya served before chat templates (without the BOS
//     id, which the caller prepends): "System: …\n\nUser: …\n\nAssistant: …\n\n" per message, then
//     "Assistant:"; it stops on "\nUser:" (stop_strings). Template outputs carry whatever the
//     template writes (often bos_token itself).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/assert.h"
#include "core/enum_words.h"
#include "io/model_extras.h"
#include "jinja/jinja.h"

namespace zaya {
class Tokenizer;
}

namespace zaya::chat {

// A request the chat format cannot render (bad messages, a template that raised): a 400.
struct ChatError : Error {
  using Error::Error;
};

enum class ChatFormat { ModelTemplate, BuiltinChatML, Transcript };
// Whether the model reasons before it answers: the template argument enable_thinking, which
// `zaya chat --reasoning` and `zaya serve --reasoning` set by default.
enum class Reasoning { On, Off };
}  // namespace zaya::chat

template <>
struct zaya::EnumWords<zaya::chat::Reasoning> {
  static constexpr std::pair<zaya::chat::Reasoning, std::string_view> words[] = {
      {zaya::chat::Reasoning::On, "on"}, {zaya::chat::Reasoning::Off, "off"}};
};

template <>
struct zaya::EnumWords<zaya::chat::ChatFormat> {
  static constexpr std::pair<zaya::chat::ChatFormat, std::string_view> words[] = {
      {zaya::chat::ChatFormat::ModelTemplate, "model template"},
      {zaya::chat::ChatFormat::BuiltinChatML, "built-in ChatML"},
      {zaya::chat::ChatFormat::Transcript, "plain transcript"}};
};

namespace zaya::chat {

struct ChatTemplate {
  ChatFormat format = ChatFormat::Transcript;
  std::string origin;                // where it came from, for logs ("DIR/chat_template.jinja")
  std::string bos_token, eos_token;  // texts passed to the template

  static ChatTemplate load(const std::string& model_dir, const std::string& flag_path,
                           const ModelExtras& extras, const Tokenizer* tok);
  // A template given as text (origin names it in messages).
  static ChatTemplate from_source(std::string_view source, std::string origin, ChatFormat format);

  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& kwargs) const;
  std::vector<std::string> stop_strings() const;  // Transcript: {"\nUser:"}; others: {}

  jinja::Template compiled;  // ModelTemplate / BuiltinChatML
};

// The built-in ChatML template's source (tools in the system turn as Qwen2.5 / Hermes declare
// them; enable_thinking false closes an empty <think> block in the generation prompt).
std::string_view builtin_chatml_source();

// The token ids the model reads for a rendered prompt: special tokens (<|im_start|>, …) as the
// single ids they are (the tokenizer cuts added tokens out first). A template writes its own BOS
// (bos_token), as transformers' chat rendering does; the Transcript gets `bos` prepended (-1:
// none).
std::vector<int32_t> prompt_ids(const ChatTemplate& t, const Tokenizer& tok, std::string_view text,
                                int32_t bos);

// True when `prompt` ends inside an open <think> (its last "<think>" is after its last "</think>").
bool opens_reasoning(std::string_view prompt);

}  // namespace zaya::chat
