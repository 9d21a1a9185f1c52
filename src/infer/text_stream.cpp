// TextStream: windowed incremental decoding plus stop-string hold-back (see text_stream.h).
#include "infer/text_stream.h"

#include <algorithm>
#include <span>

namespace zaya {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The byte of a byte-fallback token "<0xNN>", or -1.
int fallback_byte(const Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.vocab_size()) return -1;
  const std::string_view t = tok.token(id);
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Length of a UTF-8 sequence from its lead byte; 0 for a continuation or invalid byte.
int utf8_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop)
    : tok_(tok), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

TextStream::Delta TextStream::release(const std::string& text, bool final) {
  held_ += text;
  // The earliest stop string wins. None can start in emitted text: a tail that is a prefix of a
  // stop string is always held back below.
  size_t at = std::string::npos;
  for (const std::string& s : stop_) at = std::min(at, held_.find(s));
  Delta d;
  if (at != std::string::npos) {
    d.text = held_.substr(0, at);
    d.stopped = stopped_ = true;
    held_.clear();
  } else {
    size_t hold = 0;
    if (!final)
      for (const std::string& s : stop_)
        for (size_t len = std::min(s.size() - 1, held_.size()); len > hold; --len)
          if (ends_with(held_, std::string_view(s).substr(0, len))) {
            hold = len;
            break;
          }
    d.text = held_.substr(0, held_.size() - hold);
    held_.erase(0, held_.size() - hold);
  }
  emitted_ += d.text;
  return d;
}

TextStream::Delta TextStream::push(int32_t id) {
  if (stopped_) return {"", true};
  ids_.push_back(id);
  const std::span<const int32_t> ids(ids_);
  const std::string before = tok_.decode(ids.subspan(prefix_, read_ - prefix_));
  const std::string now = tok_.decode(ids.subspan(prefix_));
  // Nothing new yet, or an incomplete character at the end: wait for more tokens.
  if (now.size() <= before.size() || ends_with(now, kReplacement)) return {};
  // `now` extends `before` except when new fallback bytes joined the byte run that ended the last
  // emission and made it invalid; then the new tokens are decoded on their own.
  std::string text = now.compare(0, before.size(), before) == 0 ? now.substr(before.size())
                                                                : tok_.decode(ids.subspan(read_));
  prefix_ = read_;
  read_ = ids_.size();
  return release(text, false);
}

std::string TextStream::flush() {
  if (stopped_) return "";
  // Drop an incomplete UTF-8 character at the very end (its first bytes arrived, the rest never
  // will); anything else still held is decoded and emitted.
  size_t end = ids_.size();
  size_t tail = 0;  // trailing continuation bytes seen so far
  while (end > read_ && tail < 4) {
    const int b = fallback_byte(tok_, ids_[end - 1 - tail]);
    if (b < 0) break;
    if ((b & 0xC0) == 0x80) {  // a continuation byte: keep looking for its lead
      if (++tail > 3 || end - tail <= read_) break;
      continue;
    }
    if (utf8_length(uint8_t(b)) > int(tail) + 1) end -= tail + 1;  // lead without enough bytes
    break;
  }
  std::string text;
  if (end > read_) {
    const std::span<const int32_t> ids(ids_);
    const std::string before = tok_.decode(ids.subspan(prefix_, read_ - prefix_));
    const std::string now = tok_.decode(ids.subspan(prefix_, end - prefix_));
    text = now.compare(0, before.size(), before) == 0
               ? now.substr(before.size())
               : tok_.decode(ids.subspan(read_, end - read_));
    prefix_ = read_;
    read_ = end;
  }
  return release(text, true).text;
}

}  // namespace zaya
