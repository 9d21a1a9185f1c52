// GrammarProcessor (constrained.h).
#include "serve/constrained.h"

#include <algorithm>
#include <limits>

#include "core/assert.h"

namespace zaya::openai {

namespace {
constexpr std::string_view kThinkEnd = "</think>";
bool all_space(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
  });
}
}  // namespace

GrammarProcessor::GrammarProcessor(const grammar::Grammar& g,
                                   std::shared_ptr<const grammar::VocabIndex> vocab,
                                   std::vector<int32_t> eos_ids, bool after_reasoning,
                                   bool end_when_complete)
    : matcher_(g),
      vocab_(std::move(vocab)),
      eos_(std::move(eos_ids)),
      waiting_(after_reasoning),
      end_when_complete_(end_when_complete),
      leading_ws_(after_reasoning) {}

void GrammarProcessor::apply(std::span<float> logits) {
  if (waiting_) return;
  if (end_when_complete_ && matcher_.accepting()) {
    for (size_t id = 0; id < logits.size(); ++id)
      if (std::find(eos_.begin(), eos_.end(), int32_t(id)) == eos_.end())
        logits[id] = -std::numeric_limits<float>::infinity();
    return;
  }
  try {
    if (!leading_ws_) {
      grammar::mask_logits(*vocab_, matcher_, eos_, logits);
      return;
    }
    // Before the answer starts, whitespace-only tokens stay as they were.
    saved_.assign(logits.begin(), logits.end());
    grammar::mask_logits(*vocab_, matcher_, eos_, logits);
    const int64_t n = std::min<int64_t>(int64_t(logits.size()), vocab_->vocab_size());
    for (int64_t id = 0; id < n; ++id)
      if (all_space(vocab_->bytes(int32_t(id)))) logits[size_t(id)] = saved_[size_t(id)];
  } catch (const Error&) {
    // A grammar too ambiguous to follow (grammar.h: kMaxStacks): forbidding every id ends the
    // choice (engine.h) rather than letting the error reach the engine thread.
    std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  }
}

void GrammarProcessor::take(std::string_view bytes) {
  if (leading_ws_) {
    const size_t start = bytes.find_first_not_of(" \n\t\r");
    if (start == std::string_view::npos) return;
    bytes.remove_prefix(start);
    leading_ws_ = false;
  }
  try {
    (void)matcher_.accept(bytes);  // the mask allowed it, so the grammar takes it
  } catch (const Error&) {
    // Too ambiguous (see apply): the next apply throws again and ends the choice.
  }
}

void GrammarProcessor::accept(int32_t id) {
  const std::string& b = vocab_->bytes(id);
  if (!waiting_) {
    take(b);
    return;
  }
  tail_ += b;
  const size_t at = tail_.find(kThinkEnd);
  if (at == std::string::npos) {
    if (tail_.size() > kThinkEnd.size()) tail_.erase(0, tail_.size() - kThinkEnd.size());
    return;
  }
  waiting_ = false;
  const std::string rest = tail_.substr(at + kThinkEnd.size());
  tail_.clear();
  take(rest);
}

}  // namespace zaya::openai
