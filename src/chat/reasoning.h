// Separating a reasoning model's thinking from its answer, as the model streams it (docs/chat.md).
//
// A ZAYA1-style model thinks between "<think>" and "</think>" (plain text, not special tokens),
// then answers. With thinking on, the chat template's generation prompt already opens "<think>", so
// the output starts inside the reasoning; with thinking off the prompt closes an empty block and
// the output is all answer. ReasoningSplitter takes the output in pieces of any size and says,
// piece by piece, which text is reasoning and which is content:
//   - starts_in_reasoning (the prompt opened "<think>": chat/chat_template.h's opens_reasoning):
//     the output is reasoning until "</think>".
//   - otherwise a leading "<think>" (after optional whitespace, which is then dropped) opens the
//     reasoning; any other start makes the whole output content. A redundant leading "<think>"
//     when the prompt already opened one is dropped too.
//   - text before "</think>" is reasoning, text after it content, less the newlines right after
//     "</think>" (the template's separator). With no "</think>" ever, everything after the start
//     is reasoning (an answer cut short by max_tokens is still thinking).
//   - once in content, "<think>" and "</think>" are plain content: the model quoting the tags.
// Streaming: push() holds back what it cannot decide yet — a tail that may be the start of a tag,
// leading whitespace before a possible "<think>", and an incomplete UTF-8 character — so no delta
// splits a tag or a multibyte character. The concatenated deltas of any split of the output,
// finish() included, equal those of the whole output pushed at once. Never throws on model output.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace zaya::chat {

// The streaming helpers both output parsers share (chat/tool_calls.h uses them too).
// The number of bytes at the end of `s` that begin a UTF-8 character but do not complete it (0..3):
// what a stream holds back so that a delta never ends inside a character. Bytes that cannot begin
// a valid sequence are not held (invalid UTF-8 passes through as it came).
size_t incomplete_utf8_tail(std::string_view s);
// The length of the longest suffix of `s` that is a proper prefix of `tag` (what may still become
// `tag` when more text arrives).
size_t partial_tag_suffix(std::string_view s, std::string_view tag);

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_in_reasoning);

  struct Delta {
    std::string reasoning, content;
  };
  // The text of `text` (and of earlier held-back text) that can be decided now.
  Delta push(std::string_view text);
  // The end of the output: everything still held back, decided as if no more text came.
  Delta finish();

  // Whether text pushed now would be reasoning (the reasoning is open and "</think>" not seen).
  bool in_reasoning() const;
  // Whether the output was in reasoning at any point (the prompt opened it, or a leading <think>).
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class Phase { Start, Reasoning, Content };
  void process(bool final, Delta& out);

  Phase phase_ = Phase::Start;
  bool starts_in_reasoning_;
  bool saw_reasoning_;
  bool drop_newlines_ = false;  // right after "</think>"
  std::string pending_;         // pushed, not yet decided
  std::string lead_space_;      // Start: the whitespace before a possible "<think>"
};

}  // namespace zaya::chat
