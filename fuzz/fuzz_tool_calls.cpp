// Fuzz target: random bytes as a model's output, through ReasoningSplitter then ToolCallParser
// (chat/reasoning.h, chat/tool_calls.h) with a fixed tools array, pushed in pieces of random sizes.
// Input: byte 0 = flags (bit 0: the prompt opened <think>), bytes 1..4 = the seed of the piece
// sizes, the rest = the output. These parsers never throw on model output, so no exception is
// caught here: any one is a finding. Also a finding (abort): the pieces giving other reasoning,
// content, calls or call pieces than the whole output pushed at once, a call whose pieces do not
// join to its arguments, or arguments that are not a JSON object.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace {

const nlohmann::ordered_json& tools() {
  static const nlohmann::ordered_json t = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "configure", "parameters": {"type": "object",
      "properties": {"flag": {"type": "boolean"}, "ratio": {"type": "number"},
        "tags": {"type": "array"}, "opts": {"type": "object"}, "nothing": {"type": "null"},
        "maybe": {"type": ["integer", "string"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}}}}},
    {"type": "function", "function": {"name": "ping"}}
  ])");
  return t;
}

struct Outcome {
  std::string reasoning, content;
  std::vector<zaya::chat::ToolCall> calls;
  std::vector<zaya::chat::ToolCallDelta> pieces;
};

// sizes: the piece lengths to push in turn (the last piece is the rest); empty: all at once.
Outcome run(std::string_view text, bool starts, const std::vector<size_t>& sizes) {
  zaya::chat::ReasoningSplitter split(starts);
  zaya::chat::ToolCallParser parser(tools(), 42);
  Outcome o;
  auto to_parser = [&](const zaya::chat::ReasoningSplitter::Delta& d) {
    o.reasoning += d.reasoning;
    auto p = parser.push(d.content);
    o.content += p.content;
    for (auto& c : p.calls) o.pieces.push_back(std::move(c));
  };
  size_t at = 0;
  for (size_t n : sizes) {
    if (at >= text.size()) break;
    to_parser(split.push(text.substr(at, n)));
    at += n;
  }
  if (at < text.size()) to_parser(split.push(text.substr(at)));
  to_parser(split.finish());
  auto p = parser.finish();
  o.content += p.content;
  for (auto& c : p.calls) o.pieces.push_back(std::move(c));
  o.calls = parser.calls();
  return o;
}

bool same(const Outcome& a, const Outcome& b) {
  if (a.reasoning != b.reasoning || a.content != b.content || a.calls.size() != b.calls.size() ||
      a.pieces.size() != b.pieces.size())
    return false;
  for (size_t i = 0; i < a.calls.size(); ++i)
    if (a.calls[i].id != b.calls[i].id || a.calls[i].name != b.calls[i].name ||
        a.calls[i].arguments != b.calls[i].arguments)
      return false;
  for (size_t i = 0; i < a.pieces.size(); ++i)
    if (a.pieces[i].index != b.pieces[i].index || a.pieces[i].id != b.pieces[i].id ||
        a.pieces[i].name != b.pieces[i].name || a.pieces[i].arguments != b.pieces[i].arguments)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const bool starts = data[0] & 1;
  uint32_t seed = uint32_t(data[1]) | uint32_t(data[2]) << 8 | uint32_t(data[3]) << 16 |
                  uint32_t(data[4]) << 24;
  const std::string_view text(reinterpret_cast<const char*>(data + 5), size - 5);

  std::vector<size_t> sizes;  // 1..16 bytes mostly, now and then up to 256
  for (size_t total = 0; total < text.size();) {
    seed = seed * 1664525u + 1013904223u;
    const size_t n = (seed >> 28) == 0 ? 1 + ((seed >> 8) & 255) : 1 + ((seed >> 12) & 15);
    sizes.push_back(n);
    total += n;
  }
  const Outcome whole = run(text, starts, {});
  const Outcome pieces = run(text, starts, sizes);
  if (!same(whole, pieces)) std::abort();
  const Outcome bytes = run(text, starts, std::vector<size_t>(text.size(), 1));
  if (!same(whole, bytes)) std::abort();

  std::vector<std::string> joined(whole.calls.size());
  for (const auto& d : whole.pieces) {
    if (d.index < 0 || size_t(d.index) >= joined.size()) std::abort();
    joined[size_t(d.index)] += d.arguments;
  }
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    if (joined[i] != whole.calls[i].arguments) std::abort();
    const auto args = nlohmann::ordered_json::parse(whole.calls[i].arguments, nullptr, false);
    if (!args.is_object()) std::abort();
  }
  return 0;
}
