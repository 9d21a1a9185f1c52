// The builtins: the methods of str / list / dict / loop objects the sandbox allows, the globals
// (range, dict, namespace, raise_exception, strftime_now), Python's % and str.format, and the
// iteration rules. Filters and tests are in filters.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "jinja/eval.h"
#include "jinja/strings.h"

namespace zaya::jinja {

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Kind::List:
      return v.items();
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.entries().size());
      for (const auto& [k, x] : v.entries()) keys.push_back(k);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      for (char32_t c : utf8_decode(v.str())) {
        std::string one;
        utf8_append(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return chars;
    }
    case Kind::Undefined:
      check_safe(v);
      return {};
    default:
      throw ValueError("'" + type_name(v) + "' object is not iterable");
  }
}

namespace {

std::optional<std::string> opt_str(const Value& v, const char* what) {
  if (v.kind == Kind::Undefined || v.kind == Kind::None) return std::nullopt;
  if (v.kind != Kind::String)
    throw ValueError(std::string(what) + " must be str or None, not " + type_name(v));
  return v.str();
}

int64_t int_arg(const Value& v, int64_t def, const char* what) {
  if (v.kind == Kind::Undefined || v.kind == Kind::None) return def;
  if (v.kind != Kind::Int && v.kind != Kind::Bool)
    throw ValueError(std::string(what) + " must be an integer, not " + type_name(v));
  return v.as_int();
}

const std::string& str_arg(const Value& v, const char* what) {
  if (v.kind != Kind::String)
    throw ValueError(std::string(what) + " must be str, not " + type_name(v));
  return v.str();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& x = str_arg(a, prefix ? "startswith first arg" : "endswith first arg");
    return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0
                                           : s.compare(s.size() - x.size(), x.size(), x) == 0);
  };
  if (affix.kind == Kind::List && affix.tuple) {
    for (const Value& a : affix.items())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

template <class Pred>
Value all_chars(const std::string& s, Pred&& p) {
  const std::u32string cp = utf8_decode(s);
  if (cp.empty()) return Value::boolean(false);
  return Value::boolean(std::all_of(cp.begin(), cp.end(), p));
}

bool is_alpha(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && pystr::is_cased(c)) ||
         (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3040 && c <= 0x30FF) ||
         (c >= 0xAC00 && c <= 0xD7AF);
}
bool is_digit(char32_t c) {
  return c >= '0' && c <= '9';
}

std::string format_method(const std::string& fmt, const Args& a);

Value str_method(const std::string& s, const std::string& name, const Args& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    a.check(name, {"chars"});
    return Value::string(pystr::strip(s, opt_str(a.get(0, "chars"), name.c_str()), name != "rstrip",
                                      name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    a.check(name, {"sep", "maxsplit"});
    const auto sep = opt_str(a.get(0, "sep"), "sep");
    const int64_t maxsplit = int_arg(a.get(1, "maxsplit"), -1, "maxsplit");
    return string_list(name == "split" ? pystr::split(s, sep, maxsplit)
                                       : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    a.check(name, {"keepends"});
    return string_list(pystr::splitlines(s, truthy(a.get(0, "keepends"))));
  }
  if (name == "startswith" || name == "endswith") {
    a.check(name, {"prefix"});
    if (!a.has(0, "prefix")) throw ValueError(name + "() takes at least 1 argument (0 given)");
    return Value::boolean(affix_match(s, a.get(0, "prefix"), name == "startswith"));
  }
  if (name == "replace") {
    a.check(name, {"old", "new", "count"});
    std::string r = pystr::replace(s, str_arg(a.get(0, "old"), "replace() argument 1"),
                                   str_arg(a.get(1, "new"), "replace() argument 2"),
                                   int_arg(a.get(2, "count"), -1, "count"));
    return Value::string(std::move(r));
  }
  if (name == "lower" || name == "casefold") return Value::string(pystr::lower(s));
  if (name == "upper") return Value::string(pystr::upper(s));
  if (name == "title") return Value::string(pystr::title(s));
  if (name == "capitalize") return Value::string(pystr::capitalize(s));
  if (name == "swapcase") {
    std::u32string cp = utf8_decode(s);
    for (char32_t& c : cp) c = pystr::to_lower(c) != c ? pystr::to_lower(c) : pystr::to_upper(c);
    return Value::string(utf8_encode(cp));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    a.check(name, {"sub"});
    const int64_t r = pystr::find(s, str_arg(a.get(0, "sub"), "sub"), name[0] == 'r');
    if (r < 0 && name.find("index") != std::string::npos) throw ValueError("substring not found");
    return Value::integer(r);
  }
  if (name == "count") {
    a.check(name, {"sub"});
    return Value::integer(pystr::count(s, str_arg(a.get(0, "sub"), "sub")));
  }
  if (name == "join") {
    a.check(name, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& x : iterate(a.get(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += str_arg(x, "sequence item");
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(format_method(s, a));
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return all_chars(s, is_digit);
  if (name == "isalpha") return all_chars(s, is_alpha);
  if (name == "isalnum") return all_chars(s, [](char32_t c) { return is_alpha(c) || is_digit(c); });
  if (name == "isspace") return all_chars(s, is_py_space);
  if (name == "islower" || name == "isupper") {
    bool any = false, ok = true;
    for (char32_t c : utf8_decode(s)) {
      if (!pystr::is_cased(c)) continue;
      any = true;
      if (name == "islower" ? pystr::to_lower(c) != c : pystr::to_upper(c) != c) ok = false;
    }
    return Value::boolean(any && ok);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    a.check(name, {"affix"});
    const std::string& x = str_arg(a.get(0, "affix"), name.c_str());
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0)
      return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && x.size() <= s.size() && !x.empty() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    a.check(name, {"sep"});
    const std::string& sep = str_arg(a.get(0, "sep"), "sep");
    if (sep.empty()) throw ValueError("empty separator");
    const size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos)
      return name == "partition"
                 ? Value::list({Value::string(s), Value::string(""), Value::string("")}, true)
                 : Value::list({Value::string(""), Value::string(""), Value::string(s)}, true);
    return Value::list({Value::string(s.substr(0, f)), Value::string(sep),
                        Value::string(s.substr(f + sep.size()))},
                       true);
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    a.check(name, {"width", "fillchar"});
    const int64_t width = int_arg(a.get(0, "width"), 0, "width");
    const size_t len = utf8_length(s);
    if (width > (int64_t(1) << 24)) throw ValueError("width too large");
    if (width <= int64_t(len)) return Value::string(s);
    const size_t pad = size_t(width) - len;
    std::string fill = name == "zfill"        ? "0"
                       : a.has(1, "fillchar") ? str_arg(a.get(1, "fillchar"), "fillchar")
                                              : " ";
    auto rep = [&](size_t n) {
      std::string r;
      for (size_t k = 0; k < n; ++k) r += fill;
      return r;
    };
    if (name == "ljust") return Value::string(s + rep(pad));
    if (name == "rjust") return Value::string(rep(pad) + s);
    if (name == "zfill") {
      if (!s.empty() && (s[0] == '-' || s[0] == '+'))
        return Value::string(s.substr(0, 1) + rep(pad) + s.substr(1));
      return Value::string(rep(pad) + s);
    }
    const size_t left = pad / 2 + (pad & size_t(width) & 1);
    return Value::string(rep(left) + s + rep(pad - left));
  }
  throw ValueError("'str' object has no attribute '" + name + "'");
}

const char* const kStrMethods[] = {
    "strip",    "lstrip",  "rstrip",       "split",        "rsplit",    "splitlines", "startswith",
    "endswith", "replace", "lower",        "casefold",     "upper",     "title",      "capitalize",
    "swapcase", "find",    "rfind",        "index",        "rindex",    "count",      "join",
    "format",   "isdigit", "isnumeric",    "isdecimal",    "isalpha",   "isalnum",    "isspace",
    "islower",  "isupper", "removeprefix", "removesuffix", "partition", "rpartition", "zfill",
    "center",   "ljust",   "rjust"};
const char* const kListMethods[] = {"index", "count", "copy"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "copy"};
const char* const kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                   "pop",    "remove", "reverse", "sort"};
const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
bool in_list(const char* const (&list)[N], const std::string& name) {
  for (const char* x : list)
    if (name == x) return true;
  return false;
}

struct BoundMethod : Callable {
  Value self;
  std::string name;
  BoundMethod(Value s, std::string n) : self(std::move(s)), name(std::move(n)) {}
  std::string describe() const override {
    return "<built-in method " + name + " of " + type_name(self) + " object>";
  }
  Value call(Evaluator& ev, Args& a, const Expr& at) const override {
    switch (self.kind) {
      case Kind::String: {
        Value r = str_method(self.str(), name, a);
        if (r.kind == Kind::String) ev.check_size(r.str().size());
        return r;
      }
      case Kind::List:
        if (name == "copy") return self;
        a.check(name, {"value"});
        if (name == "count") {
          int64_t n = 0;
          for (const Value& x : self.items()) n += equals(x, a.get(0, "value"));
          return Value::integer(n);
        }
        for (size_t k = 0; k < self.items().size(); ++k)
          if (equals(self.items()[k], a.get(0, "value"))) return Value::integer(int64_t(k));
        throw ValueError(repr(a.get(0, "value")) + " is not in list");
      case Kind::Dict: {
        if (name == "copy") return self;
        if (name == "get") {
          a.check(name, {"key", "default"});
          if (const Value* v = self.dict_obj().find(a.get(0, "key"))) return *v;
          return a.get(1, "default", Value::none());
        }
        a.check(name, {});
        std::vector<Value> out;
        for (const auto& [k, v] : self.entries()) {
          if (name == "keys")
            out.push_back(k);
          else if (name == "values")
            out.push_back(v);
          else
            out.push_back(Value::list({k, v}, true));
        }
        return Value::list(std::move(out));
      }
      case Kind::Loop: {  // loop.cycle(a, b, …)
        if (a.pos.empty()) throw ValueError("no items for cycling given");
        return a.pos[self.loop().index0 % a.pos.size()];
      }
      default:
        throw ValueError("'" + type_name(self) + "' object has no attribute '" + name + "'");
    }
  }
};

// ---- globals -----------------------------------------------------------------------------------

struct GlobalFn : Callable {
  std::string name;
  explicit GlobalFn(std::string n) : name(std::move(n)) {}
  std::string describe() const override { return "<function " + name + ">"; }
  Value call(Evaluator& ev, Args& a, const Expr& at) const override {
    if (name == "range") {
      if (!a.kw.empty()) throw ValueError("range() takes no keyword arguments");
      if (a.pos.empty() || a.pos.size() > 3)
        throw ValueError("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
      int64_t start = 0, stop, step = 1;
      if (a.pos.size() == 1) {
        stop = int_arg(a.pos[0], 0, "range() argument");
      } else {
        start = int_arg(a.pos[0], 0, "range() argument");
        stop = int_arg(a.pos[1], 0, "range() argument");
        if (a.pos.size() == 3) step = int_arg(a.pos[2], 1, "range() argument");
      }
      for (const Value& x : a.pos)
        if (x.kind != Kind::Int && x.kind != Kind::Bool)
          throw ValueError("'" + type_name(x) + "' object cannot be interpreted as an integer");
      if (step == 0) throw ValueError("range() arg 3 must not be zero");
      const long double n = step > 0 ? std::ceil((long double)(stop - (long double)start) / step)
                                     : std::ceil(((long double)start - stop) / -(long double)step);
      if (n > 100000)
        throw ValueError(
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      std::vector<Value> items;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        ev.step();
        items.push_back(Value::integer(i));
      }
      return Value::list(std::move(items));
    }
    if (name == "dict") {
      std::vector<std::pair<Value, Value>> items;
      if (a.pos.size() > 1) throw ValueError("dict expected at most 1 argument");
      if (!a.pos.empty()) {
        if (a.pos[0].kind == Kind::Dict) {
          items = a.pos[0].entries();
        } else {
          for (const Value& x : iterate(a.pos[0])) {
            const std::vector<Value> kv = iterate(x);
            if (kv.size() != 2)
              throw ValueError("dictionary update sequence element has wrong length");
            items.emplace_back(kv[0], kv[1]);
          }
        }
      }
      for (const auto& [k, v] : a.kw) {
        bool found = false;
        for (auto& [k2, v2] : items)
          if (k2.kind == Kind::String && k2.str() == k) {
            v2 = v;
            found = true;
          }
        if (!found) items.emplace_back(Value::string(k), v);
      }
      return Value::dict(std::move(items));
    }
    if (name == "namespace") {
      auto ns = ev.new_namespace();
      if (a.pos.size() > 1) throw ValueError("namespace expected at most 1 argument");
      if (!a.pos.empty()) {
        if (a.pos[0].kind != Kind::Dict) throw ValueError("namespace() takes a mapping");
        for (const auto& [k, v] : a.pos[0].entries()) ns->set(to_str(k), v);
      }
      for (const auto& [k, v] : a.kw) ns->set(k, v);
      Value r;
      r.kind = Kind::Namespace;
      r.obj = ns;
      return r;
    }
    if (name == "raise_exception") {
      const Value msg = a.get(0, "message", Value::string(""));
      throw RaisedError(ev.template_name(), at.line, at.col, to_str(msg));
    }
    if (name == "strftime_now") {
      a.check(name, {"format"});
      const std::string& fmt = str_arg(a.get(0, "format"), "strftime_now() format");
      if (ev.options().strftime_now) return Value::string(ev.options().strftime_now(fmt));
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[512];
      const size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
      return Value::string(std::string(buf, n));
    }
    throw ValueError("'" + name + "' is undefined");
  }
};

// ---- str.format and % --------------------------------------------------------------------------

std::string format_method(const std::string& fmt, const Args& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw ValueError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t e = fmt.find('}', i);
    if (e == std::string::npos) throw ValueError("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, e - i - 1);
    i = e;
    char conv = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 0;
      field = field.substr(0, bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
        field.find('[') != std::string::npos)
      throw ValueError("format specs, attributes and indexes in str.format are not supported");
    Value v;
    if (field.empty()) {
      if (auto_index >= a.pos.size()) throw ValueError("Replacement index out of range");
      v = a.pos[auto_index++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = size_t(std::stoul(field.substr(0, 9)));
      if (idx >= a.pos.size()) throw ValueError("Replacement index out of range");
      v = a.pos[idx];
    } else {
      bool found = false;
      for (const auto& [k, x] : a.kw)
        if (k == field) {
          v = x;
          found = true;
        }
      if (!found) throw ValueError("KeyError: '" + field + "'");
    }
    out += conv == 'r' ? repr(v) : to_str(v);
  }
  return out;
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  const Value* mapping = nullptr;
  if (args.kind == Kind::List && args.tuple)
    pos = args.items();
  else if (args.kind == Kind::Dict)
    mapping = &args;
  else
    pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw ValueError("incomplete format");
    Value v;
    bool have = false;
    if (fmt[i] == '(') {
      const size_t e = fmt.find(')', i);
      if (e == std::string::npos || !mapping) throw ValueError("format requires a mapping");
      const Value* x = mapping->dict_obj().find(std::string_view(fmt).substr(i + 1, e - i - 1));
      if (!x) throw ValueError("KeyError: '" + fmt.substr(i + 1, e - i - 1) + "'");
      v = *x;
      have = true;
      i = e + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
      spec += fmt[i++];
    while (i < fmt.size() && ((fmt[i] >= '0' && fmt[i] <= '9') || fmt[i] == '.')) spec += fmt[i++];
    if (spec.size() > 12) throw ValueError("format spec too long");
    if (i >= fmt.size()) throw ValueError("incomplete format");
    const char type = fmt[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!have) {
      if (mapping && pos.empty())
        v = args;
      else if (next >= pos.size())
        throw ValueError("not enough arguments for format string");
      else
        v = pos[next++];
    }
    char buf[512];
    switch (type) {
      case 's':
      case 'r': {
        std::string s = type == 's' ? to_str(v) : repr(v);
        if (spec == "%") {
          out += s;
        } else {
          std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
          out += buf;
        }
        break;
      }
      case 'd':
      case 'i':
        if (!v.is_number())
          throw ValueError("%d format: a real number is required, not " + type_name(v));
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(),
                      (long long)(v.kind == Kind::Float ? std::trunc(v.f) : double(v.as_int())));
        out += buf;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'g':
        if (!v.is_number()) throw ValueError("must be real number, not " + type_name(v));
        std::snprintf(buf, sizeof buf, (spec + type).c_str(), v.as_double());
        out += buf;
        break;
      case 'x':
      case 'X':
      case 'o':
        if (v.kind != Kind::Int && v.kind != Kind::Bool) throw ValueError("an integer is required");
        std::snprintf(buf, sizeof buf, (spec + "ll" + type).c_str(), (long long)v.as_int());
        out += buf;
        break;
      default:
        throw ValueError(std::string("unsupported format character '") + type + "'");
    }
  }
  if (!mapping && next < pos.size())
    throw ValueError("not all arguments converted during string formatting");
  return out;
}

Value method_of(const Value& self, const std::string& name) {
  bool ok = false;
  switch (self.kind) {
    case Kind::String:
      ok = in_list(kStrMethods, name);
      break;
    case Kind::List:
      ok = in_list(kListMethods, name);
      break;
    case Kind::Dict:
      ok = in_list(kDictMethods, name);
      break;
    case Kind::Loop:
      ok = name == "cycle";
      break;
    default:
      break;
  }
  if (!ok) return Value();
  return Value::callable(std::make_shared<BoundMethod>(self, name));
}

bool unsafe_method(const Value& self, const std::string& name) {
  if (self.kind == Kind::List) return in_list(kListUnsafe, name);
  if (self.kind == Kind::Dict) return in_list(kDictUnsafe, name);
  return false;
}

Value global_value(const std::string& name) {
  static const char* const names[] = {"range", "dict", "namespace", "raise_exception",
                                      "strftime_now"};
  for (const char* n : names)
    if (name == n) return Value::callable(std::make_shared<GlobalFn>(name));
  return Value();
}

}  // namespace zaya::jinja
