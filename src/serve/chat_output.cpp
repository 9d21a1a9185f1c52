// ChatOutput (chat_output.h).
#include "serve/chat_output.h"

namespace zaya::openai {

using json = nlohmann::json;

ChatOutput::ChatOutput(const ChatOutputPlan& plan, int index) {
  if (plan.split_reasoning) split_.emplace(plan.starts_in_reasoning);
  if (plan.parse_tools) tools_.emplace(plan.tools, plan.tool_id_seed + uint64_t(index));
}

ChatOutput::Delta ChatOutput::route(chat::ReasoningSplitter::Delta d, bool final) {
  Delta out;
  out.reasoning = std::move(d.reasoning);
  if (tools_) {
    chat::ToolCallParser::Delta t = tools_->push(d.content);
    if (final) {
      chat::ToolCallParser::Delta f = tools_->finish();
      t.content += f.content;
      for (auto& c : f.calls) t.calls.push_back(std::move(c));
    }
    out.content = std::move(t.content);
    out.calls = std::move(t.calls);
  } else {
    out.content = std::move(d.content);
  }
  reasoning_ += out.reasoning;
  content_ += out.content;
  return out;
}

ChatOutput::Delta ChatOutput::push(std::string_view text) {
  if (split_) return route(split_->push(text), false);
  return route({"", std::string(text)}, false);
}

ChatOutput::Delta ChatOutput::finish() {
  if (split_) return route(split_->finish(), true);
  return route({}, true);
}

bool ChatOutput::has_tool_calls() const {
  return tools_ && !tools_->calls().empty();
}

json ChatOutput::tool_calls_json() const {
  json calls = json::array();
  if (tools_)
    for (const chat::ToolCall& c : tools_->calls())
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return calls;
}

json ChatOutput::delta_json(const Delta& d) {
  json j = json::object();
  if (!d.reasoning.empty()) j["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) j["content"] = d.content;
  if (!d.calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCallDelta& c : d.calls) {
      json piece = {{"index", c.index}};
      json fn = json::object();
      if (!c.id.empty()) piece["id"] = c.id, piece["type"] = "function";
      if (!c.name.empty()) fn["name"] = c.name;
      fn["arguments"] = c.arguments;
      piece["function"] = fn;
      calls.push_back(piece);
    }
    j["tool_calls"] = calls;
  }
  return j;
}

}  // namespace zaya::openai
