// The tool calls in a ZAYA1 model's answer, parsed into OpenAI tool calls as the model streams them
// (docs/chat.md). The model calls a tool by writing, in its content (after any reasoning:
// chat/reasoning.h separates that first),
//   <zyphra_tool_call>
//   <function=NAME>
//   <parameter=ARG>
//   VALUE
//   </parameter>
//   …
//   </function>
//   </zyphra_tool_call>
// (the Qwen3-Coder XML body inside ZAYA's wrapper, whose two tags are special tokens).
//
// Parsing, leniently about whitespace as vLLM's Qwen3-Coder parser is:
//   - A call is everything from "<zyphra_tool_call>" to the next "</zyphra_tool_call>". Its body
//     is one or more functions; whitespace and newlines around the tags do not matter. A
//     parameter's value ends at "</parameter>", or at the next "<parameter=" or "</function>" when
//     the model left "</parameter>" out; a function ends at "</function>", or at the next
//     "<function=" or the end of the body.
//   - Values are typed by the tool's JSON schema (its function.parameters.properties): a "string"
//     is the text as written, less exactly one leading and one trailing newline (the template's
//     framing); integer, number, boolean, null, object and array are parsed as JSON (a boolean
//     also as True/False in any case), falling back to the text when it does not parse as that
//     type; a type list or anyOf/oneOf is tried in order; a parameter the schema does not declare,
//     or one whose schema names no type, is JSON when it parses and the text otherwise.
//   - arguments: the parameters as a JSON object in the order the model wrote them, compact
//     (no spaces), UTF-8 as is (invalid UTF-8 from the model replaced by U+FFFD).
//   - A call whose body is malformed (anything but whitespace outside the tags, a tag without its
//     ">"), names a function the request did not declare, or is still open when the output ends
//     or when another "<zyphra_tool_call>" begins, is not a call: its raw text, tags included,
//     goes back into the content exactly as the model wrote it.
//   - Content: the text outside calls. The one newline right before "<zyphra_tool_call>" is the
//     template's separator and is dropped, as is text between calls or after the last one that is
//     only whitespace. A stray "</zyphra_tool_call>" or "</function>" outside a call is dropped
//     (never leaks into content). A bare "<function=" without the wrapper is plain content.
// Streaming: push() holds back content that may be the start of one of those tags (or of the
// newline before a call) and an incomplete UTF-8 character, and a call's text until the call is
// decided. A call comes out when it closes, as OpenAI streaming pieces: the first carries its
// index, id and name (arguments ""), the next ones the arguments' JSON text — the opening brace
// with the first parameter, each further parameter, the closing brace — so that a call's pieces
// concatenated are its arguments. Any split of the output gives the same content (concatenated),
// calls and pieces as the whole output at once. Never throws on model output.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::chat {

struct ToolCall {
  std::string id, name, arguments;  // arguments: a JSON object as a string
};

struct ToolCallDelta {  // one OpenAI streaming piece of tool_calls[]
  int index = 0;
  std::string id, name, arguments;  // id and name on a call's first piece only
};

// "call_" and 24 characters of [a-z0-9], a function of (id_seed, index) only: a request's seed
// makes its ids reproducible, and the index tells its calls apart.
std::string tool_call_id(uint64_t id_seed, int index);

class ToolCallParser {
 public:
  // tools: the request's OpenAI tools array ([{type: "function", function: {name, parameters}}];
  // entries without a function name are ignored; null or not an array: no tool is declared, so
  // every call stays content).
  ToolCallParser(const nlohmann::ordered_json& tools, uint64_t id_seed);

  struct Delta {
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  Delta push(std::string_view text);
  Delta finish();  // the end of the output: an open call becomes content

  const std::vector<ToolCall>& calls() const { return calls_; }  // the calls decided so far

 private:
  enum class Phase { Content, Call };
  void process(bool final, Delta& out);
  void emit_content(std::string_view text, Delta& out);
  bool parse_call(std::string_view body, Delta& out);

  std::map<std::string, nlohmann::ordered_json, std::less<>> tools_;  // name → properties (or null)
  uint64_t id_seed_;
  std::vector<ToolCall> calls_;

  Phase phase_ = Phase::Content;
  std::string pending_;      // Content: pushed, not yet decided
  bool after_call_ = false;  // right after a call: whitespace is held until text decides it
  std::string held_ws_;      // that whitespace
  std::string call_lead_;    // the whitespace dropped before the open call (restored if it fails)
  std::string body_;         // Call: the text after "<zyphra_tool_call>"
  size_t scan_ = 0;          // Call: body_ before this holds no tag
};

}  // namespace zaya::chat
