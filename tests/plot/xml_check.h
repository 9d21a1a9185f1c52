// A strict reader of the XML subset the SVG writer emits (plot/svg.h), for tests and the fuzz
// target: one XML declaration, elements with double-quoted attributes, text, the five named
// entities and numeric character references; no comments, CDATA or DTD. It checks that the
// document is well-formed (tags nest and match, one root, no duplicate attribute, no raw '<' or
// stray '&', valid UTF-8) and returns its elements, so a test can ask for an id, a class or an
// attribute. No gtest here: the fuzz target includes it too.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::test::xml {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;  // values with the entities decoded
  std::string text;                          // the direct text content, decoded
  int parent = -1;                           // index into Document::elements; −1: the root
  int depth = 0;
  std::string attr(const std::string& k) const {
    const auto it = attrs.find(k);
    return it == attrs.end() ? std::string() : it->second;
  }
  bool has_class(const std::string& c) const {
    const std::string v = " " + attr("class") + " ";
    return v.find(" " + c + " ") != std::string::npos;
  }
};

struct Document {
  std::string error;              // empty: well-formed
  std::vector<Element> elements;  // in document order

  bool ok() const { return error.empty(); }
  // The index of the element with this id, or −1.
  int by_id(const std::string& id) const {
    for (size_t i = 0; i < elements.size(); ++i)
      if (elements[i].attr("id") == id) return int(i);
    return -1;
  }
  int index(const Element* e) const { return int(e - elements.data()); }
  // Whether element i lies inside element a.
  bool inside(int i, int a) const {
    for (int p = elements[i].parent; p >= 0; p = elements[p].parent)
      if (p == a) return true;
    return false;
  }
  // The elements named `name` (any name when empty) with class `cls` (any when empty) inside
  // element `within` (anywhere when −1).
  std::vector<const Element*> find(const std::string& name, const std::string& cls = "",
                                   int within = -1) const {
    std::vector<const Element*> out;
    for (size_t i = 0; i < elements.size(); ++i)
      if ((name.empty() || elements[i].name == name) &&
          (cls.empty() || elements[i].has_class(cls)) && (within < 0 || inside(int(i), within)))
        out.push_back(&elements[i]);
    return out;
  }
};

namespace detail {

inline bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == ':' || c == '.';
}

inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    if (n == 1 && c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
    i += n;
  }
  return true;
}

// Decodes the entities of `s` into `out`; false on a stray '&' or an unknown entity.
inline bool decode(std::string_view s, std::string& out) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) return false;
    const std::string_view e = s.substr(i + 1, semi - i - 1);
    if (e == "amp")
      out += '&';
    else if (e == "lt")
      out += '<';
    else if (e == "gt")
      out += '>';
    else if (e == "quot")
      out += '"';
    else if (e == "apos")
      out += '\'';
    else if (e.size() > 1 && e[0] == '#') {
      out += '?';  // a character reference: well-formed is all that matters here
      for (size_t k = 1; k < e.size(); ++k)
        if (!(e[k] >= '0' && e[k] <= '9') && !(k == 1 && e[k] == 'x') &&
            !(e[1] == 'x' && ((e[k] >= 'a' && e[k] <= 'f') || (e[k] >= 'A' && e[k] <= 'F'))))
          return false;
    } else {
      return false;
    }
    i = semi;
  }
  return true;
}

}  // namespace detail

inline Document parse(std::string_view s) {
  Document d;
  const auto fail = [&](const std::string& why, size_t at) {
    d.error = why + " at byte " + std::to_string(at);
    return d;
  };
  if (!detail::valid_utf8(s)) return fail("invalid UTF-8 or a control character", 0);
  size_t i = 0;
  if (s.substr(0, 5) == "<?xml") {
    i = s.find("?>");
    if (i == std::string_view::npos) return fail("unterminated declaration", 0);
    i += 2;
  }
  std::vector<int> stack;
  bool root_done = false;
  while (i < s.size()) {
    if (s[i] != '<') {
      const size_t next = s.find('<', i);
      const std::string_view text =
          s.substr(i, next == std::string_view::npos ? s.size() - i : next - i);
      std::string decoded;
      if (!detail::decode(text, decoded)) return fail("a stray '&' in text", i);
      if (stack.empty()) {
        if (text.find_first_not_of(" \t\r\n") != std::string_view::npos)
          return fail("text outside the root element", i);
      } else {
        d.elements[stack.back()].text += decoded;
      }
      i = next == std::string_view::npos ? s.size() : next;
      continue;
    }
    if (s.substr(i, 2) == "</") {
      size_t j = i + 2;
      while (j < s.size() && detail::name_char(s[j])) ++j;
      const std::string name(s.substr(i + 2, j - i - 2));
      while (j < s.size() && (s[j] == ' ' || s[j] == '\n')) ++j;
      if (j >= s.size() || s[j] != '>') return fail("a malformed end tag", i);
      if (stack.empty() || d.elements[stack.back()].name != name)
        return fail("</" + name + "> does not close the open element", i);
      stack.pop_back();
      if (stack.empty()) root_done = true;
      i = j + 1;
      continue;
    }
    if (root_done) return fail("a second root element", i);
    size_t j = i + 1;
    while (j < s.size() && detail::name_char(s[j])) ++j;
    Element e;
    e.name = std::string(s.substr(i + 1, j - i - 1));
    if (e.name.empty()) return fail("a '<' that starts no tag", i);
    e.parent = stack.empty() ? -1 : stack.back();
    e.depth = int(stack.size());
    bool empty = false;
    for (;;) {
      const size_t ws = j;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t')) ++j;
      if (j >= s.size()) return fail("an unterminated tag", i);
      if (s[j] == '>') {
        ++j;
        break;
      }
      if (s.substr(j, 2) == "/>") {
        j += 2;
        empty = true;
        break;
      }
      if (j == ws) return fail("attributes not separated by space", j);
      const size_t k0 = j;
      while (j < s.size() && detail::name_char(s[j])) ++j;
      const std::string key(s.substr(k0, j - k0));
      if (key.empty() || s.substr(j, 2) != "=\"") return fail("a malformed attribute", k0);
      const size_t v0 = j + 2, v1 = s.find('"', v0);
      if (v1 == std::string_view::npos) return fail("an unterminated attribute value", v0);
      const std::string_view raw = s.substr(v0, v1 - v0);
      if (raw.find('<') != std::string_view::npos) return fail("a '<' in an attribute value", v0);
      std::string value;
      if (!detail::decode(raw, value)) return fail("a stray '&' in an attribute value", v0);
      if (!e.attrs.emplace(key, value).second) return fail("a duplicate attribute " + key, k0);
      j = v1 + 1;
    }
    d.elements.push_back(std::move(e));
    if (empty) {
      if (stack.empty()) root_done = true;
    } else {
      stack.push_back(int(d.elements.size()) - 1);
    }
    i = j;
  }
  if (!stack.empty())
    return fail("<" + d.elements[stack.back()].name + "> is never closed", s.size());
  if (!root_done) return fail("no root element", s.size());
  return d;
}

// The points of a polyline's "points" attribute: "x,y x,y".
struct XY {
  double x, y;
};
inline std::vector<XY> points(const Element& e) {
  std::vector<XY> out;
  const std::string p = e.attr("points");
  size_t i = 0;
  while (i < p.size()) {
    const size_t sp = p.find(' ', i), end = sp == std::string::npos ? p.size() : sp;
    const std::string pair = p.substr(i, end - i);
    const size_t comma = pair.find(',');
    if (comma != std::string::npos)
      out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
    i = end + 1;
  }
  return out;
}

}  // namespace zaya::test::xml
