// Python str methods over UTF-8 (see strings.h).
#include "jinja/strings.h"

#include <algorithm>

#include "jinja/value.h"

namespace zaya::jinja::pystr {

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17F) {
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17F) {
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

bool is_cased(char32_t c) {
  return to_lower(c) != c || to_upper(c) != c || c == 0xDF;
}

namespace {

template <class F>
std::string map_chars(std::string_view s, F&& f) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = char(f(char32_t(static_cast<unsigned char>(c))));
    return out;
  }
  std::u32string cp = utf8_decode(s);
  for (char32_t& c : cp) c = f(c);
  return utf8_encode(cp);
}

}  // namespace

std::string lower(std::string_view s) {
  return map_chars(s, to_lower);
}
std::string upper(std::string_view s) {
  if (s.find("\xc3\x9f") == std::string_view::npos) return map_chars(s, to_upper);
  std::string out;  // 'ß'.upper() == 'SS'
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xDF)
      out += "SS";
    else
      utf8_append(out, to_upper(c));
  }
  return out;
}

std::string title(std::string_view s) {
  std::u32string cp = utf8_decode(s);
  bool prev_cased = false;
  for (char32_t& c : cp) {
    const bool cased = is_cased(c);
    if (cased) c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = cased;
  }
  return utf8_encode(cp);
}

std::string capitalize(std::string_view s) {
  std::u32string cp = utf8_decode(s);
  for (size_t k = 0; k < cp.size(); ++k) cp[k] = k == 0 ? to_upper(cp[k]) : to_lower(cp[k]);
  return utf8_encode(cp);
}

std::string jinja_title(std::string_view s) {
  // "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
  const std::u32string cp = utf8_decode(s);
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_py_space(c);
  };
  std::u32string out;
  size_t i = 0;
  while (i < cp.size()) {
    size_t j = i;
    const bool sep = is_sep(cp[i]);
    while (j < cp.size() && is_sep(cp[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k)
      out.push_back(sep ? cp[k] : k == i ? to_upper(cp[k]) : to_lower(cp[k]));
    i = j;
  }
  return utf8_encode(out);
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string cp = utf8_decode(s);
  std::u32string set;
  if (chars) set = utf8_decode(*chars);
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_py_space(c);
  };
  size_t b = 0, e = cp.size();
  if (left)
    while (b < e && strip_it(cp[b])) ++b;
  if (right)
    while (e > b && strip_it(cp[e - 1])) --e;
  return utf8_encode(std::u32string_view(cp).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw ValueError("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string cp = utf8_decode(s);
  size_t i = 0;
  while (true) {
    while (i < cp.size() && is_py_space(cp[i])) ++i;
    if (i >= cp.size()) break;
    if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
      size_t e = cp.size();
      while (e > i && is_py_space(cp[e - 1])) --e;
      out.push_back(utf8_encode(std::u32string_view(cp).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < cp.size() && !is_py_space(cp[j])) ++j;
    out.push_back(utf8_encode(std::u32string_view(cp).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw ValueError("empty separator");
    size_t end = s.size();
    while (int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::u32string cp = utf8_decode(s);
  size_t e = cp.size();
  while (true) {
    while (e > 0 && is_py_space(cp[e - 1])) --e;
    if (e == 0) break;
    if (int64_t(out.size()) >= maxsplit) {
      size_t b = 0;
      while (b < e && is_py_space(cp[b])) ++b;
      out.push_back(utf8_encode(std::u32string_view(cp).substr(b, e - b)));
      break;
    }
    size_t b = e;
    while (b > 0 && !is_py_space(cp[b - 1])) --b;
    out.push_back(utf8_encode(std::u32string_view(cp).substr(b, e - b)));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string cp = utf8_decode(s);
  std::vector<std::string> out;
  size_t i = 0;
  while (i < cp.size()) {
    size_t j = i;
    auto is_break = [](char32_t c) {
      return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
             c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    };
    while (j < cp.size() && !is_break(cp[j])) ++j;
    size_t e = j;
    if (j < cp.size()) {
      e = j + 1;
      if (cp[j] == '\r' && j + 1 < cp.size() && cp[j + 1] == '\n') e = j + 2;
    }
    out.push_back(utf8_encode(std::u32string_view(cp).substr(i, (keepends ? e : j) - i)));
    i = e;
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // between every character, and at both ends
    const std::u32string cp = utf8_decode(s);
    int64_t done = 0;
    for (size_t k = 0; k <= cp.size(); ++k) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (k < cp.size()) utf8_append(out, cp[k]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(with);
    pos = f + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  const size_t f = reverse ? s.rfind(sub) : s.find(sub);
  if (f == std::string_view::npos) return -1;
  return int64_t(utf8_length(s.substr(0, f)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return int64_t(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

}  // namespace zaya::jinja::pystr
