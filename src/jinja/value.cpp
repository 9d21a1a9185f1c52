// Values: construction (with the nesting-depth bound), Python's str/repr/==/< and json.dumps.
#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/eval.h"

namespace zaya::jinja {

namespace {

const std::string& empty_string() {
  static const std::string e;
  return e;
}

int depth_of(const Value& v) {
  switch (v.kind) {
    case Kind::List:
      return static_cast<const ListObj&>(*v.obj).depth;
    case Kind::Dict:
      return static_cast<const DictObj&>(*v.obj).depth;
    case Kind::Namespace:
      return 1;  // a namespace's own depth is checked when an attribute is set
    default:
      return 0;
  }
}

void check_depth(int depth) {
  if (depth > kMaxValueDepth)
    throw ValueError("a list or dict nested deeper than " + std::to_string(kMaxValueDepth) +
                     " levels");
}

}  // namespace

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.unsafe = unsafe;
  if (!hint.empty()) v.obj = std::make_shared<StrObj>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}
Value Value::real(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.obj = std::make_shared<StrObj>(std::move(s));
  return v;
}
Value Value::list(std::vector<Value> items, bool tuple) {
  auto o = std::make_shared<ListObj>();
  int d = 0;
  for (const Value& x : items) d = std::max(d, depth_of(x));
  check_depth(d + 1);
  o->depth = d + 1;
  o->items = std::move(items);
  Value v;
  v.kind = Kind::List;
  v.tuple = tuple;
  v.obj = std::move(o);
  return v;
}
Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  auto o = std::make_shared<DictObj>();
  int d = 0;
  for (const auto& [k, x] : items) d = std::max({d, depth_of(k), depth_of(x)});
  check_depth(d + 1);
  o->depth = d + 1;
  o->items = std::move(items);
  Value v;
  v.kind = Kind::Dict;
  v.obj = std::move(o);
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> fn) {
  Value v;
  v.kind = Kind::Callable;
  v.obj = std::move(fn);
  return v;
}

const std::string& Value::str() const {
  if (!obj) return empty_string();
  return static_cast<const StrObj&>(*obj).s;
}
const std::vector<Value>& Value::items() const {
  return static_cast<const ListObj&>(*obj).items;
}
const std::vector<std::pair<Value, Value>>& Value::entries() const {
  return static_cast<const DictObj&>(*obj).items;
}
const DictObj& Value::dict_obj() const {
  return static_cast<const DictObj&>(*obj);
}
NsObj& Value::ns() const {
  return const_cast<NsObj&>(static_cast<const NsObj&>(*obj));
}
const LoopObj& Value::loop() const {
  return static_cast<const LoopObj&>(*obj);
}
const Callable& Value::fn() const {
  return static_cast<const Callable&>(*obj);
}
double Value::as_double() const {
  return kind == Kind::Float ? f : kind == Kind::Bool ? double(b) : double(i);
}
int64_t Value::as_int() const {
  return kind == Kind::Bool ? int64_t(b) : i;
}

const Value* DictObj::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}
const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Kind::String && k.str() == key) return &v;
  return nullptr;
}
const Value* NsObj::find(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}
void NsObj::set(const std::string& key, Value v) const {
  check_depth(depth_of(v) + 1);
  for (auto& [k, x] : attrs)
    if (k == key) {
      x = std::move(v);
      return;
    }
  attrs.emplace_back(key, std::move(v));
}

void check_safe(const Value& v) {
  if (v.kind == Kind::Undefined && v.unsafe) throw ValueError(v.str());
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      check_safe(v);
      return false;
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.b;
    case Kind::Int:
      return v.i != 0;
    case Kind::Float:
      return v.f != 0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
      return !v.items().empty();
    case Kind::Dict:
      return !v.entries().empty();
    default:
      return true;
  }
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string out;
  size_t p = 0;
  if (sci[0] == '-') {
    out = "-";
    p = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = p; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int decpt = exp10 + 1;
  const int n = int(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(size_t(-decpt), '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(size_t(decpt - n), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int x = decpt - 1;
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", x < 0 ? '-' : '+', std::abs(x));
    out += eb;
  }
  return out;
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return v.tuple ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Loop:
      return "LoopContext";
    case Kind::Callable:
      return "function";
  }
  return "object";
}

// ---- UTF-8 -------------------------------------------------------------------------------------

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = len > 0 && i + size_t(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {  // an invalid byte: kept as itself (Python's surrogateescape), so it round-trips
      out.push_back(0xDC00 + c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c >= 0xDC80 && c <= 0xDCFF) {
    out.push_back(char(c - 0xDC00));
  } else if (c < 0x80) {
    out.push_back(char(c));
  } else if (c < 0x800) {
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(char(0xE0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t utf8_length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  return utf8_decode(s).size();
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// ---- str / repr --------------------------------------------------------------------------------

namespace {

// str.isprintable(), for the code points a chat template meets (controls, separators, format
// characters and private use are not printable).
bool py_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || c == 0x1680)
    return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) || c > 0x10FFFF) return false;
  if (c >= 0xF0000) return false;  // supplementary private use
  return true;
}

void repr_string(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out.push_back(quote);
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    if (c == char32_t(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(char(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      std::snprintf(buf, sizeof buf, "\\udc%02x", unsigned(c & 0xFF));
      out += buf;
    } else if (!py_printable(c)) {
      if (c <= 0xFF)
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c <= 0xFFFF)
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(quote);
}

void repr_into(std::string& out, const Value& v, int depth);

void str_into(std::string& out, const Value& v, int depth) {
  switch (v.kind) {
    case Kind::Undefined:
      check_safe(v);
      return;
    case Kind::None:
      out += "None";
      return;
    case Kind::Bool:
      out += v.b ? "True" : "False";
      return;
    case Kind::Int:
      out += std::to_string(v.i);
      return;
    case Kind::Float:
      out += format_float(v.f);
      return;
    case Kind::String:
      out += v.str();
      return;
    case Kind::Loop: {
      const LoopObj& l = v.loop();
      out += "<LoopContext " + std::to_string(l.index0 + 1) + "/" +
             std::to_string(l.seq->items.size()) + ">";
      return;
    }
    case Kind::Callable:
      out += v.fn().describe();
      return;
    default:
      repr_into(out, v, depth);
  }
}

void repr_into(std::string& out, const Value& v, int depth) {
  if (depth > kMaxValueDepth + 8) throw ValueError("a value nested too deeply to print");
  switch (v.kind) {
    case Kind::Undefined:
      check_safe(v);
      out += "Undefined";
      return;
    case Kind::String:
      repr_string(out, v.str());
      return;
    case Kind::List: {
      out += v.tuple ? "(" : "[";
      bool first = true;
      for (const Value& x : v.items()) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, x, depth + 1);
      }
      if (v.tuple && v.items().size() == 1) out += ",";
      out += v.tuple ? ")" : "]";
      return;
    }
    case Kind::Dict: {
      out += "{";
      bool first = true;
      for (const auto& [k, x] : v.entries()) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, x, depth + 1);
      }
      out += "}";
      return;
    }
    case Kind::Namespace: {
      out += "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.ns().attrs) {
        if (!first) out += ", ";
        first = false;
        repr_string(out, k);
        out += ": ";
        repr_into(out, x, depth + 1);
      }
      out += "}>";
      return;
    }
    default:
      str_into(out, v, depth);
  }
}

// ---- json.dumps --------------------------------------------------------------------------------

void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return format_float(d);
}

struct JsonWriter {
  bool has_indent;
  const std::string& indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    out.push_back('\n');
    for (int k = 0; k < level; ++k) out += indent;
  }

  std::string key_text(const Value& k) {
    switch (k.kind) {
      case Kind::String:
        return k.str();
      case Kind::Int:
        return std::to_string(k.i);
      case Kind::Float:
        return json_float(k.f);
      case Kind::Bool:
        return k.b ? "true" : "false";
      case Kind::None:
        return "null";
      default:
        throw ValueError("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void write(const Value& v, int level) {
    if (level > kMaxValueDepth + 8) throw ValueError("a value nested too deeply for tojson");
    switch (v.kind) {
      case Kind::None:
        out += "null";
        return;
      case Kind::Bool:
        out += v.b ? "true" : "false";
        return;
      case Kind::Int:
        out += std::to_string(v.i);
        return;
      case Kind::Float:
        out += json_float(v.f);
        return;
      case Kind::String:
        json_string(out, v.str());
        return;
      case Kind::List: {
        if (v.items().empty()) {
          out += "[]";
          return;
        }
        out += "[";
        bool first = true;
        for (const Value& x : v.items()) {
          if (!first) out += item_sep;
          first = false;
          if (has_indent) newline(level + 1);
          write(x, level + 1);
        }
        if (has_indent) newline(level);
        out += "]";
        return;
      }
      case Kind::Dict: {
        if (v.entries().empty()) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> kv;
        for (const auto& [k, x] : v.entries()) kv.emplace_back(key_text(k), &x);
        if (sort_keys)
          std::stable_sort(kv.begin(), kv.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        out += "{";
        bool first = true;
        for (const auto& [k, x] : kv) {
          if (!first) out += item_sep;
          first = false;
          if (has_indent) newline(level + 1);
          json_string(out, k);
          out += key_sep;
          write(*x, level + 1);
        }
        if (has_indent) newline(level);
        out += "}";
        return;
      }
      case Kind::Undefined:
        check_safe(v);
        throw ValueError("Object of type Undefined is not JSON serializable");
      default:
        throw ValueError("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_str(const Value& v) {
  if (v.kind == Kind::String) return v.str();
  std::string out;
  str_into(out, v, 0);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string to_json(const Value& v, bool has_indent, const std::string& indent,
                    const std::string& item_sep, const std::string& key_sep, bool sort_keys) {
  JsonWriter w{has_indent, indent, item_sep, key_sep, sort_keys, {}};
  w.write(v, 0);
  return std::move(w.out);
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= uint64_t(INT64_MAX)) return Value::integer(int64_t(u));
      return Value::real(double(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, x] : j.items()) items.emplace_back(Value::string(k), from_json(x));
      return Value::dict(std::move(items));
    }
    default:
      return Value::none();  // binary / discarded: not produced by the JSON parser
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      if (a.tuple != b.tuple || a.items().size() != b.items().size()) return false;
      for (size_t k = 0; k < a.items().size(); ++k)
        if (!equals(a.items()[k], b.items()[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, x] : a.entries()) {
        const Value* y = b.dict_obj().find(k);
        if (!y || !equals(x, *y)) return false;
      }
      return true;
    }
    default:
      return a.obj == b.obj;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == Kind::String && b.kind == Kind::String) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind == Kind::List && b.kind == Kind::List) {
    const auto &x = a.items(), &y = b.items();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return compare(x[k], y[k]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw ValueError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                   type_name(b) + "'");
}

}  // namespace zaya::jinja
