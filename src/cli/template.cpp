// `zaya template`: prints the prompt a chat request would feed the model — the model's chat
// template rendered with the given messages, tools and template arguments (docs/chat.md) — as text
// (exactly, with no newline added) or, with --ids, as the token ids the server would decode from.
//
//   zaya template --model DIR|FILE.gguf --messages FILE.json [--tools FILE.json] [--kwargs JSON]
//                 [--no-generation-prompt] [--ids] [--chat-template FILE] [--tokenizer FILE]
//
// FILE.json is an OpenAI messages array, or a request body ({"messages": [...], "tools": [...],
// "chat_template_kwargs": {...}}) whose tools and kwargs are used when the flags do not give them;
// "-" reads standard input. Only the tokenizer and the small JSON files (a GGUF file's metadata)
// are read, never the weights.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "data/tokenizer.h"
#include "infer/model_files.h"
#include "infer/model_source.h"
#include "io/file.h"
#include "io/json_parse.h"
#include "io/model_extras.h"
#include "io/zaya_config.h"

namespace zaya::cli {

namespace {

using ojson = nlohmann::ordered_json;

struct TemplateArgs {
  std::string model, messages, tools, kwargs, chat_template, tokenizer;
  bool no_generation_prompt = false, ids = false;
};

// A JSON file (or "-": standard input) named by `flag`.
ojson read_json_arg(const std::string& path, const char* flag) {
  const std::string text = read_text_file(path == "-" ? "/dev/stdin" : path, flag);
  try {
    return parse_json_ordered(text);
  } catch (const JsonError& e) {
    fail("{} {}: not valid JSON ({})", flag, path, e.what());
  }
}

int run_template(const TemplateArgs& a) {
  ojson messages = read_json_arg(a.messages, "--messages");
  ojson tools = nullptr, kwargs = ojson::object();
  if (messages.is_object()) {  // a request body
    if (messages.contains("tools")) tools = messages["tools"];
    if (messages.contains("chat_template_kwargs")) kwargs = messages["chat_template_kwargs"];
    if (!messages.contains("messages"))
      fail("--messages {}: an object must be a request body with \"messages\"", a.messages);
    ojson m = messages["messages"];
    messages = std::move(m);
  }
  if (!messages.is_array())
    fail("--messages {}: must be an array of messages (or a request body), got {}", a.messages,
         messages.type_name());
  if (!a.tools.empty()) tools = read_json_arg(a.tools, "--tools");
  if (!a.kwargs.empty()) {
    try {
      kwargs = parse_json_ordered(a.kwargs);
    } catch (const JsonError& e) {
      fail("--kwargs: not valid JSON ({})", e.what());
    }
  }
  if (!kwargs.is_object()) fail("--kwargs: must be a JSON object, got {}", kwargs.dump());

  const ModelSource src = open_model_source(a.model);
  if (const std::string line = src.line(); !line.empty()) log_info("template: {}", line);
  const ModelExtras& extras = src.extras;
  const std::unique_ptr<Tokenizer> tok =
      (a.ids ? src.require_tokenizer(a.tokenizer) : src.load_tokenizer(a.tokenizer)).tok;

  const chat::ChatTemplate tmpl = src.chat_template(a.chat_template, tok.get());
  std::string text;
  try {
    text = tmpl.render(messages, tools, !a.no_generation_prompt, kwargs);
  } catch (const chat::ChatError& e) {
    fail("{}", e.what());
  }
  log_info("template: {} ({})", tmpl.origin, enum_word(tmpl.format));  // after any error
  if (!a.ids) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::string line;
  for (int32_t id : chat::prompt_ids(tmpl, *tok, text, bos_id(src.config, extras, tok.get())))
    line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

Action add_template_command(CLI::App& app) {
  auto a = std::make_shared<TemplateArgs>();
  CLI::App* sub = app.add_subcommand(
      "template", "Print the prompt a chat request would feed the model (its chat template)");
  sub->add_option("--model", a->model,
                  "model directory, GGUF file, checkpoint (step_N), run (its newest valid "
                  "checkpoint) or a file in a model directory")
      ->required();
  sub->add_option("--messages", a->messages,
                  "OpenAI messages JSON (an array, or a request body), - for standard input")
      ->required();
  sub->add_option("--tools", a->tools, "OpenAI tools JSON array");
  sub->add_option("--kwargs", a->kwargs,
                  "template arguments as a JSON object, e.g. '{\"enable_thinking\": false}'");
  sub->add_option("--chat-template", a->chat_template,
                  "a Jinja chat template file to use instead of the model's")
      ->check(CLI::ExistingFile);
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (default: DIR/tokenizer.json, or the GGUF file's)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--no-generation-prompt", a->no_generation_prompt,
                "end after the last message (no opened assistant turn)");
  sub->add_flag("--ids", a->ids, "print the token ids instead of the text");
  return [a] { return run_template(*a); };
}

}  // namespace zaya::cli
