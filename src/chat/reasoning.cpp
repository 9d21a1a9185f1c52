// ReasoningSplitter: one buffer of undecided text and a phase (chat/reasoning.h). Every push
// appends to the buffer and decides as much of it as it can; what stays in the buffer is at most a
// tag's length plus a character (or the leading whitespace before a possible "<think>"), so the
// work per push is linear in the piece.
#include "chat/reasoning.h"

#include <algorithm>

namespace zaya::chat {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
}  // namespace

size_t incomplete_utf8_tail(std::string_view s) {
  // Walk back over at most three continuation bytes (10xxxxxx) to the byte that starts the last
  // character; hold them when that lead byte announces more bytes than there are.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(n, 4); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep walking
    size_t need = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 4;
    }
    return need > back ? back : 0;  // ASCII, a complete character, or an invalid lead: nothing held
  }
  return 0;  // only continuation bytes: invalid, passed through
}

size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t len = std::min(s.size(), tag.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning)
    : starts_in_reasoning_(starts_in_reasoning), saw_reasoning_(starts_in_reasoning) {}

bool ReasoningSplitter::in_reasoning() const {
  return phase_ == Phase::Reasoning || (phase_ == Phase::Start && starts_in_reasoning_);
}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  Delta out;
  pending_.append(text);
  process(false, out);
  return out;
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta out;
  process(true, out);
  return out;
}

void ReasoningSplitter::process(bool final, Delta& out) {
  for (;;) {
    switch (phase_) {
      case Phase::Start: {
        // Leading whitespace, then "<think>" or not: undecided while what follows the whitespace
        // is still a prefix of "<think>". The whitespace moves aside as it comes (a long run of
        // it is not rescanned at every push).
        size_t at = 0;
        while (at < pending_.size() && is_space(pending_[at])) ++at;
        lead_space_.append(pending_, 0, at);
        pending_.erase(0, at);
        if (pending_.starts_with(kOpen)) {
          pending_.erase(0, kOpen.size());
          lead_space_.clear();
          phase_ = Phase::Reasoning;
          saw_reasoning_ = true;
          continue;
        }
        if (!final && kOpen.starts_with(pending_)) return;  // "", "<", "<th", …: wait
        pending_.insert(0, lead_space_);
        lead_space_.clear();
        phase_ = starts_in_reasoning_ ? Phase::Reasoning : Phase::Content;
        continue;
      }
      case Phase::Reasoning: {
        if (const size_t at = pending_.find(kClose); at != std::string::npos) {
          out.reasoning.append(pending_, 0, at);
          pending_.erase(0, at + kClose.size());
          phase_ = Phase::Content;
          drop_newlines_ = true;
          continue;
        }
        size_t n = pending_.size();
        if (!final) {
          n -= partial_tag_suffix(pending_, kClose);
          n -= incomplete_utf8_tail(std::string_view(pending_).substr(0, n));
        }
        out.reasoning.append(pending_, 0, n);
        pending_.erase(0, n);
        return;
      }
      case Phase::Content: {
        if (drop_newlines_) {
          size_t at = 0;
          while (at < pending_.size() && (pending_[at] == '\n' || pending_[at] == '\r')) ++at;
          pending_.erase(0, at);
          if (pending_.empty()) return;  // more newlines may follow
          drop_newlines_ = false;
        }
        size_t n = pending_.size();
        if (!final) n -= incomplete_utf8_tail(pending_);
        out.content.append(pending_, 0, n);
        pending_.erase(0, n);
        return;
      }
    }
  }
}

}  // namespace zaya::chat
