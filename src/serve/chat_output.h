// One chat choice's answer on its way to the client: the text the engine emits, split into
// reasoning (chat/reasoning.h: <think>…</think>, as vLLM's qwen3 reasoning parser does) and
// content, and the content parsed for ZAYA XML tool calls (chat/tool_calls.h) when the request
// declared tools and tool_choice is not "none". Streaming gets the pieces as they are decided
// (delta_json); a non-streaming response the whole (reasoning(), content(), tool_calls_json()).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace zaya::openai {

struct ChatOutputPlan {
  bool split_reasoning = false;      // run the reasoning splitter (a model with a chat template)
  bool starts_in_reasoning = false;  // the prompt ends inside an open <think>
  bool parse_tools = false;          // tools declared and tool_choice ≠ none
  nlohmann::ordered_json tools;      // the request's tools (for argument types)
  uint64_t tool_id_seed = 0;         // tool call ids: choice i uses tool_id_seed + i
};

class ChatOutput {
 public:
  ChatOutput(const ChatOutputPlan& plan, int index);

  struct Delta {
    std::string reasoning, content;
    std::vector<chat::ToolCallDelta> calls;
    bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  };
  Delta push(std::string_view text);
  Delta finish();  // the end of the choice: everything held back

  // The whole answer so far (complete after finish()).
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  bool has_tool_calls() const;
  nlohmann::json tool_calls_json() const;  // [{id, type: "function", function: {name, arguments}}]

  // A streaming delta: {"reasoning_content"?, "content"?, "tool_calls"?: [{index, id?, type?,
  // function: {name?, arguments}}]} (OpenAI's pieces: id, type and name on a call's first piece).
  static nlohmann::json delta_json(const Delta& d);

 private:
  Delta route(chat::ReasoningSplitter::Delta d, bool final);
  std::optional<chat::ReasoningSplitter> split_;
  std::optional<chat::ToolCallParser> tools_;
  std::string reasoning_, content_;
};

}  // namespace zaya::openai
