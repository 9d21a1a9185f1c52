// The filters and tests jinja2 3.1 defines that chat templates use, with jinja2's semantics
// (filters.py, tests.py) and transformers' tojson (json.dumps with ensure_ascii=False).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "jinja/eval.h"
#include "jinja/strings.h"

namespace zaya::jinja {

namespace {

using FilterFn = std::function<Value(Evaluator&, const Value&, Args&)>;
using TestFn = std::function<bool(Evaluator&, const Value&, Args&)>;

// jinja2's make_attrgetter: "a.b.0" looked up part by part with getitem (item, then attribute).
Value get_attribute(Evaluator& ev, const Value& v, const Value& attribute) {
  if (attribute.kind == Kind::Int) return ev.getitem(v, attribute);
  const std::string path = to_str(attribute);
  Value cur = v;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part =
        path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    cur = digits ? ev.getitem(cur, Value::integer(std::atoll(part.substr(0, 15).c_str())))
                 : ev.getitem(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == Kind::String) return Value::string(pystr::lower(v.str()));
  return v;
}

std::string soft_str(const Value& v) {
  return to_str(v);
}

Value f_default(Evaluator&, const Value& v, Args& a) {
  a.check("default", {"default_value", "boolean"});
  const bool boolean = truthy(a.get(1, "boolean", Value::boolean(false)));
  if (v.kind == Kind::Undefined || (boolean && !truthy(v)))
    return a.get(0, "default_value", Value::string(""));
  return v;
}

Value f_length(Evaluator&, const Value& v, Args& a) {
  a.check("length", {});
  switch (v.kind) {
    case Kind::String:
      return Value::integer(int64_t(utf8_length(v.str())));
    case Kind::List:
      return Value::integer(int64_t(v.items().size()));
    case Kind::Dict:
      return Value::integer(int64_t(v.entries().size()));
    case Kind::Undefined:
      check_safe(v);
      return Value::integer(0);
    default:
      throw ValueError("object of type '" + type_name(v) + "' has no len()");
  }
}

Value f_join(Evaluator& ev, const Value& v, Args& a) {
  a.check("join", {"d", "attribute"});
  const std::string sep = soft_str(a.get(0, "d", Value::string("")));
  const Value attr = a.get(1, "attribute", Value::none());
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(attr.is_none() ? x : get_attribute(ev, x, attr));
    ev.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_first(Evaluator&, const Value& v, Args& a) {
  a.check("first", {});
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Evaluator&, const Value& v, Args& a) {
  a.check("last", {});
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_tojson(Evaluator& ev, const Value& v, Args& a) {
  a.check("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  if (truthy(a.get(0, "ensure_ascii", Value::boolean(false))))
    throw ValueError("tojson(ensure_ascii=True) is not supported");
  const Value indent = a.get(1, "indent", Value::none());
  bool has_indent = false;
  std::string ind;
  if (indent.kind == Kind::Int || indent.kind == Kind::Bool) {
    has_indent = true;
    const int64_t n = indent.as_int();
    if (n > 1024) throw ValueError("tojson indent too large");
    if (n > 0) ind.assign(size_t(n), ' ');
  } else if (indent.kind == Kind::String) {
    has_indent = true;
    ind = indent.str();
  } else if (!indent.is_none() && !indent.is_undefined()) {
    throw ValueError("tojson indent must be an integer, a string or None");
  }
  std::string item_sep = has_indent ? "," : ", ", key_sep = ": ";
  const Value seps = a.get(2, "separators", Value::none());
  if (seps.kind == Kind::List) {
    if (seps.items().size() != 2) throw ValueError("tojson separators must be a pair of strings");
    item_sep = to_str(seps.items()[0]);
    key_sep = to_str(seps.items()[1]);
  } else if (!seps.is_none() && !seps.is_undefined()) {
    throw ValueError("tojson separators must be a pair of strings");
  }
  std::string out = to_json(v, has_indent, ind, item_sep, key_sep,
                            truthy(a.get(3, "sort_keys", Value::boolean(false))));
  ev.check_size(out.size());
  ev.step(out.size() / 256);
  return Value::string(std::move(out));
}

Value f_map(Evaluator& ev, const Value& v, Args& a) {
  std::vector<Value> out;
  const std::vector<Value> items = iterate(v);
  if (a.pos.empty()) {
    const Value attr = a.get(99, "attribute");
    if (attr.is_undefined()) throw ValueError("map() needs a filter name or attribute=");
    const bool has_default = a.has(99, "default");
    for (const auto& [k, x] : a.kw)
      if (k != "attribute" && k != "default")
        throw ValueError("Unexpected keyword argument '" + k + "'");
    for (const Value& x : items) {
      Value r = get_attribute(ev, x, attr);
      if (has_default && r.is_undefined()) r = a.get(99, "default");
      out.push_back(std::move(r));
    }
    return Value::list(std::move(out));
  }
  const std::string name = to_str(a.pos[0]);
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : items) {
    ev.step();
    Args copy = rest;
    out.push_back(apply_filter(ev, name, x, copy));
  }
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr
Value select_common(Evaluator& ev, const Value& v, Args& a, bool by_attr, bool keep) {
  size_t next = 0;
  Value attr;
  if (by_attr) {
    if (a.pos.empty()) throw ValueError("Missing parameter for attribute name");
    attr = a.pos[next++];
  }
  std::string test;
  Args targs;
  if (next < a.pos.size()) {
    test = to_str(a.pos[next++]);
    targs.pos.assign(a.pos.begin() + long(next), a.pos.end());
    targs.kw = a.kw;
    if (!is_test(test)) throw ValueError("No test named '" + test + "'.");
  }
  std::vector<Value> out;
  for (const Value& x : iterate(v)) {
    ev.step();
    const Value y = by_attr ? get_attribute(ev, x, attr) : x;
    bool r;
    if (test.empty()) {
      r = truthy(y);
    } else {
      Args copy = targs;
      r = apply_test(ev, test, y, copy);
    }
    if (r == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_int(Evaluator&, const Value& v, Args& a) {
  a.check("int", {"default", "base"});
  const Value def = a.get(0, "default", Value::integer(0));
  const int64_t base = a.has(1, "base") ? a.get(1, "base").as_int() : 10;
  switch (v.kind) {
    case Kind::Int:
    case Kind::Bool:
      return Value::integer(v.as_int());
    case Kind::Float:
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return def;
      return Value::integer(int64_t(v.f));
    case Kind::String: {
      std::string s = pystr::strip(v.str(), std::nullopt, true, true);
      std::string digits;
      for (size_t k = 0; k < s.size(); ++k)
        if (!(s[k] == '_' && k > 0 && k + 1 < s.size())) digits += s[k];
      if (base == 10 && !digits.empty()) {
        size_t k = digits[0] == '-' || digits[0] == '+' ? 1 : 0;
        bool all = k < digits.size();
        for (size_t j = k; j < digits.size(); ++j)
          all = all && digits[j] >= '0' && digits[j] <= '9';
        if (all) {
          errno = 0;
          const long long r = std::strtoll(digits.c_str(), nullptr, 10);
          if (errno != ERANGE) return Value::integer(r);
        }
      } else if (!digits.empty() && base >= 2 && base <= 36) {
        char* end = nullptr;
        const long long r = std::strtoll(digits.c_str(), &end, int(base));
        if (end && *end == 0) return Value::integer(r);
      }
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18 &&
          s.find_first_of("xXpP") == std::string::npos)
        return Value::integer(int64_t(d));
      return def;
    }
    default:
      return def;
  }
}

Value f_float(Evaluator&, const Value& v, Args& a) {
  a.check("float", {"default"});
  const Value def = a.get(0, "default", Value::real(0.0));
  if (v.is_number()) return Value::real(v.as_double());
  if (v.kind == Kind::String) {
    const std::string s = pystr::strip(v.str(), std::nullopt, true, true);
    std::string lower = pystr::lower(s);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == 0 && lower.find_first_of("xp") == std::string::npos)
      return Value::real(d);
  }
  return def;
}

Value f_round(Evaluator&, const Value& v, Args& a) {
  a.check("round", {"precision", "method"});
  const int64_t precision = a.has(0, "precision") ? a.get(0, "precision").as_int() : 0;
  const std::string method = a.has(1, "method") ? to_str(a.get(1, "method")) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw ValueError("method must be common, ceil or floor");
  if (!v.is_number()) throw ValueError("type " + type_name(v) + " doesn't define __round__ method");
  if (precision < -300 || precision > 300) throw ValueError("round() precision out of range");
  if (method == "common") {
    if (v.kind != Kind::Float) return Value::integer(v.as_int());  // round(int, n >= 0) is the int
    if (!std::isfinite(v.f)) return v;
    if (precision >= 0) {
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.*f", int(precision), v.f);
      return Value::real(std::strtod(buf, nullptr));
    }
    const double p = std::pow(10.0, double(-precision));
    return Value::real(std::nearbyint(v.f / p) * p);
  }
  const double p = std::pow(10.0, double(precision));
  const double x = v.as_double() * p;
  return Value::real((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value f_sort(Evaluator& ev, const Value& v, Args& a) {
  a.check("sort", {"reverse", "case_sensitive", "attribute"});
  const bool rev = truthy(a.get(0, "reverse", Value::boolean(false)));
  const bool cs = truthy(a.get(1, "case_sensitive", Value::boolean(false)));
  const Value attr = a.get(2, "attribute", Value::none());
  std::vector<Value> items = iterate(v);
  std::vector<std::pair<Value, size_t>> keys;
  for (size_t k = 0; k < items.size(); ++k)
    keys.emplace_back(fold_case(attr.is_none() ? items[k] : get_attribute(ev, items[k], attr), cs),
                      k);
  ev.step(items.size() * 8);
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (const auto& [k, i] : keys) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_dictsort(Evaluator& ev, const Value& v, Args& a) {
  a.check("dictsort", {"case_sensitive", "by", "reverse"});
  if (v.kind != Kind::Dict) throw ValueError("dictsort expects a mapping");
  const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const std::string by = a.has(1, "by") ? to_str(a.get(1, "by")) : "key";
  if (by != "key" && by != "value")
    throw ValueError("You can only sort by either 'key' or 'value'");
  const bool rev = truthy(a.get(2, "reverse", Value::boolean(false)));
  std::vector<std::pair<Value, Value>> e = v.entries();
  ev.step(e.size() * 8);
  std::stable_sort(e.begin(), e.end(), [&](const auto& x, const auto& y) {
    const Value& p = by == "key" ? x.first : x.second;
    const Value& q = by == "key" ? y.first : y.second;
    const int c = compare(fold_case(p, cs), fold_case(q, cs));
    return rev ? c > 0 : c < 0;
  });
  std::vector<Value> out;
  for (auto& [k, x] : e) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value f_unique(Evaluator& ev, const Value& v, Args& a) {
  a.check("unique", {"case_sensitive", "attribute"});
  const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value attr = a.get(1, "attribute", Value::none());
  std::vector<Value> out, seen;
  for (const Value& x : iterate(v)) {
    ev.step(seen.size() + 1);
    const Value key = fold_case(attr.is_none() ? x : get_attribute(ev, x, attr), cs);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, key);
    if (!dup) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return Value::list(std::move(out));
}

Value f_minmax(Evaluator& ev, const Value& v, Args& a, bool is_max) {
  a.check(is_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value attr = a.get(1, "attribute", Value::none());
  const std::vector<Value> items = iterate(v);
  if (items.empty())
    return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value best_key = fold_case(attr.is_none() ? items[0] : get_attribute(ev, items[0], attr), cs);
  for (size_t k = 1; k < items.size(); ++k) {
    const Value key = fold_case(attr.is_none() ? items[k] : get_attribute(ev, items[k], attr), cs);
    const int c = compare(key, best_key);
    if (is_max ? c > 0 : c < 0) {
      best = k;
      best_key = key;
    }
  }
  return items[best];
}

Value f_indent(Evaluator& ev, const Value& v, Args& a) {
  a.check("indent", {"width", "first", "blank"});
  const Value width = a.get(0, "width", Value::integer(4));
  std::string ind;
  if (width.kind == Kind::String) {
    ind = width.str();
  } else {
    const int64_t n = width.as_int();
    if (n > 4096) throw ValueError("indent width too large");
    if (n > 0) ind.assign(size_t(n), ' ');
  }
  const bool first = truthy(a.get(1, "first", Value::boolean(false)));
  const bool blank = truthy(a.get(2, "blank", Value::boolean(false)));
  const std::vector<std::string> lines = pystr::splitlines(soft_str(v) + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind) + lines[k];
  }
  if (first) rv = ind + rv;
  ev.check_size(rv.size());
  return Value::string(std::move(rv));
}

Value f_escape(Evaluator&, const Value& v, Args&) {
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_items(Evaluator&, const Value& v, Args& a) {
  a.check("items", {});
  if (v.kind == Kind::Undefined) return Value::list({});
  if (v.kind != Kind::Dict) throw ValueError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.entries()) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value f_wordcount(Evaluator&, const Value& v, Args&) {
  // len(re.findall(r"\w+", s)): letters, digits and '_' (any non-ASCII letter counted as one).
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(soft_str(v))) {
    const bool w = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   c == '_' ||
                   (c >= 0x80 && !is_py_space(c) && c < 0x1F000 && !(c >= 0x2000 && c <= 0x2BFF));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_sum(Evaluator& ev, const Value& v, Args& a) {
  a.check("sum", {"attribute", "start"});
  const Value attr = a.get(0, "attribute", Value::none());
  Value total = a.get(1, "start", Value::integer(0));
  for (const Value& x : iterate(v)) {
    const Value y = attr.is_none() ? x : get_attribute(ev, x, attr);
    if (!y.is_number() || !total.is_number())
      throw ValueError("unsupported operand type(s) for +: '" + type_name(total) + "' and '" +
                       type_name(y) + "'");
    if (total.kind == Kind::Float || y.kind == Kind::Float)
      total = Value::real(total.as_double() + y.as_double());
    else
      total = Value::integer(total.as_int() + y.as_int());
  }
  return total;
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = [] {
    std::unordered_map<std::string, FilterFn> t;
    t["default"] = t["d"] = f_default;
    t["length"] = t["count"] = f_length;
    t["join"] = f_join;
    t["first"] = f_first;
    t["last"] = f_last;
    t["tojson"] = f_tojson;
    t["map"] = f_map;
    t["select"] = [](Evaluator& ev, const Value& v, Args& a) {
      return select_common(ev, v, a, false, true);
    };
    t["reject"] = [](Evaluator& ev, const Value& v, Args& a) {
      return select_common(ev, v, a, false, false);
    };
    t["selectattr"] = [](Evaluator& ev, const Value& v, Args& a) {
      return select_common(ev, v, a, true, true);
    };
    t["rejectattr"] = [](Evaluator& ev, const Value& v, Args& a) {
      return select_common(ev, v, a, true, false);
    };
    t["list"] = [](Evaluator&, const Value& v, Args& a) {
      a.check("list", {});
      return Value::list(iterate(v));
    };
    t["string"] = [](Evaluator&, const Value& v, Args& a) {
      a.check("string", {});
      return Value::string(soft_str(v));
    };
    t["int"] = f_int;
    t["float"] = f_float;
    t["upper"] = [](Evaluator&, const Value& v, Args&) {
      return Value::string(pystr::upper(soft_str(v)));
    };
    t["lower"] = [](Evaluator&, const Value& v, Args&) {
      return Value::string(pystr::lower(soft_str(v)));
    };
    t["capitalize"] = [](Evaluator&, const Value& v, Args&) {
      return Value::string(pystr::capitalize(soft_str(v)));
    };
    t["title"] = [](Evaluator&, const Value& v, Args&) {
      return Value::string(pystr::jinja_title(soft_str(v)));
    };
    t["trim"] = [](Evaluator&, const Value& v, Args& a) {
      a.check("trim", {"chars"});
      const Value c = a.get(0, "chars", Value::none());
      return Value::string(pystr::strip(
          soft_str(v), c.is_none() ? std::nullopt : std::optional<std::string>(to_str(c)), true,
          true));
    };
    t["replace"] = [](Evaluator& ev, const Value& v, Args& a) {
      a.check("replace", {"old", "new", "count"});
      const Value count = a.get(2, "count", Value::none());
      std::string r =
          pystr::replace(soft_str(v), soft_str(a.get(0, "old")), soft_str(a.get(1, "new")),
                         count.is_none() ? -1 : count.as_int());
      ev.check_size(r.size());
      return Value::string(std::move(r));
    };
    t["safe"] = [](Evaluator&, const Value& v, Args&) {
      return v.kind == Kind::String ? v : Value::string(soft_str(v));
    };
    t["escape"] = t["e"] = t["forceescape"] = f_escape;
    t["items"] = f_items;
    t["dictsort"] = f_dictsort;
    t["abs"] = [](Evaluator&, const Value& v, Args&) {
      if (v.kind == Kind::Float) return Value::real(std::fabs(v.f));
      if (v.kind == Kind::Int || v.kind == Kind::Bool) {
        if (v.as_int() == INT64_MIN)
          throw ValueError("integer overflow (the engine's integers are 64-bit)");
        return Value::integer(std::llabs(v.as_int()));
      }
      throw ValueError("bad operand type for abs(): '" + type_name(v) + "'");
    };
    t["round"] = f_round;
    t["unique"] = f_unique;
    t["reverse"] = [](Evaluator&, const Value& v, Args&) {
      if (v.kind == Kind::String) {
        std::u32string cp = utf8_decode(v.str());
        std::reverse(cp.begin(), cp.end());
        return Value::string(utf8_encode(cp));
      }
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    t["sort"] = f_sort;
    t["indent"] = f_indent;
    t["wordcount"] = f_wordcount;
    t["sum"] = f_sum;
    t["max"] = [](Evaluator& ev, const Value& v, Args& a) { return f_minmax(ev, v, a, true); };
    t["min"] = [](Evaluator& ev, const Value& v, Args& a) { return f_minmax(ev, v, a, false); };
    t["attr"] = [](Evaluator& ev, const Value& v, Args& a) {
      return ev.getattr(v, to_str(a.get(0, "name")));
    };
    t["format"] = [](Evaluator&, const Value& v, Args& a) {
      return Value::string(percent_format(soft_str(v), Value::list(a.pos, true)));
    };
    t["center"] = [](Evaluator&, const Value& v, Args& a) {
      const int64_t width = a.has(0, "width") ? a.get(0, "width").as_int() : 80;
      const std::string s = soft_str(v);
      const int64_t len = int64_t(utf8_length(s));
      if (width > (int64_t(1) << 20)) throw ValueError("width too large");
      if (width <= len) return Value::string(s);
      const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
      return Value::string(std::string(size_t(left), ' ') + s +
                           std::string(size_t(pad - left), ' '));
    };
    return t;
  }();
  return table;
}

bool is_number_like(const Value& v) {
  return v.is_number();
}

int64_t int_of(const Value& v, const char* test) {
  if (v.kind != Kind::Int && v.kind != Kind::Bool)
    throw ValueError(std::string("the '") + test + "' test needs an integer, not " + type_name(v));
  return v.as_int();
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = [] {
    std::unordered_map<std::string, TestFn> t;
    t["defined"] = [](Evaluator&, const Value& v, Args&) { return !v.is_undefined(); };
    t["undefined"] = [](Evaluator&, const Value& v, Args&) { return v.is_undefined(); };
    t["none"] = [](Evaluator&, const Value& v, Args&) { return v.is_none(); };
    t["string"] = [](Evaluator&, const Value& v, Args&) { return v.is_string(); };
    t["number"] = [](Evaluator&, const Value& v, Args&) { return is_number_like(v); };
    t["integer"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Int; };
    t["float"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Float; };
    t["boolean"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Bool; };
    t["true"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Bool && v.b; };
    t["false"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Bool && !v.b; };
    t["mapping"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Dict; };
    t["iterable"] = [](Evaluator&, const Value& v, Args&) {
      return v.kind == Kind::List || v.kind == Kind::Dict || v.kind == Kind::String ||
             v.kind == Kind::Undefined || v.kind == Kind::Loop;
    };
    t["sequence"] = [](Evaluator&, const Value& v, Args&) {
      return v.kind == Kind::List || v.kind == Kind::Dict || v.kind == Kind::String ||
             v.kind == Kind::Undefined;
    };
    t["callable"] = [](Evaluator&, const Value& v, Args&) { return v.kind == Kind::Callable; };
    t["odd"] = [](Evaluator&, const Value& v, Args&) {
      return (int_of(v, "odd") % 2 + 2) % 2 == 1;
    };
    t["even"] = [](Evaluator&, const Value& v, Args&) { return int_of(v, "even") % 2 == 0; };
    t["divisibleby"] = [](Evaluator&, const Value& v, Args& a) {
      const int64_t n = int_of(a.get(0, "num"), "divisibleby");
      if (n == 0) throw ValueError("integer modulo by zero");
      return n == -1 || int_of(v, "divisibleby") % n == 0;
    };
    t["eq"] = t["equalto"] =
        t["=="] = [](Evaluator&, const Value& v, Args& a) { return equals(v, a.get(0, "other")); };
    t["ne"] =
        t["!="] = [](Evaluator&, const Value& v, Args& a) { return !equals(v, a.get(0, "other")); };
    t["lt"] = t["lessthan"] = t["<"] = [](Evaluator&, const Value& v, Args& a) {
      return compare(v, a.get(0, "other")) < 0;
    };
    t["le"] = t["<="] = [](Evaluator&, const Value& v, Args& a) {
      return compare(v, a.get(0, "other")) <= 0;
    };
    t["gt"] = t["greaterthan"] = t[">"] = [](Evaluator&, const Value& v, Args& a) {
      return compare(v, a.get(0, "other")) > 0;
    };
    t["ge"] = t[">="] = [](Evaluator&, const Value& v, Args& a) {
      return compare(v, a.get(0, "other")) >= 0;
    };
    t["in"] = [](Evaluator&, const Value& v, Args& a) {
      const Value seq = a.get(0, "seq");
      if (seq.kind == Kind::String) {
        if (v.kind != Kind::String)
          throw ValueError("'in <string>' requires string as left operand");
        return seq.str().find(v.str()) != std::string::npos;
      }
      if (seq.kind == Kind::Dict) return seq.dict_obj().find(v) != nullptr;
      for (const Value& x : iterate(seq))
        if (equals(x, v)) return true;
      return false;
    };
    t["sameas"] = [](Evaluator&, const Value& v, Args& a) {
      const Value o = a.get(0, "other");
      if (v.kind != o.kind) return false;
      if (v.kind == Kind::None || v.kind == Kind::Bool) return v.kind == Kind::None || v.b == o.b;
      return v.obj && v.obj == o.obj;
    };
    t["lower"] = [](Evaluator&, const Value& v, Args&) {
      return v.is_string() && pystr::lower(v.str()) == v.str();
    };
    t["upper"] = [](Evaluator&, const Value& v, Args&) {
      return v.is_string() && pystr::upper(v.str()) == v.str();
    };
    t["escaped"] = [](Evaluator&, const Value&, Args&) { return false; };
    t["filter"] = [](Evaluator&, const Value& v, Args&) {
      return v.is_string() && is_filter(v.str());
    };
    t["test"] = [](Evaluator&, const Value& v, Args&) { return v.is_string() && is_test(v.str()); };
    return t;
  }();
  return table;
}

}  // namespace

bool is_filter(const std::string& name) {
  return filters().count(name) != 0;
}
bool is_test(const std::string& name) {
  return tests().count(name) != 0;
}

Value apply_filter(Evaluator& ev, const std::string& name, const Value& v, Args& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) throw ValueError("No filter named '" + name + "'.");
  check_safe(v);
  for (const Value& a : args.pos) check_safe(a);
  return it->second(ev, v, args);
}

bool apply_test(Evaluator& ev, const std::string& name, const Value& v, Args& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) throw ValueError("No test named '" + name + "'.");
  if (name != "defined" && name != "undefined") check_safe(v);
  return it->second(ev, v, args);
}

}  // namespace zaya::jinja
