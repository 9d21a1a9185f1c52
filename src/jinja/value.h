// The values a template computes with, and Python's view of them where it shows in the output.
//
// Contract:
//   - Value is a small handle (kind + scalar + shared object): copies are cheap and share the
//     object. Strings, lists, dicts are immutable once built (the sandbox forbids mutating
//     methods); a namespace is the one mutable object ({% set ns.attr = … %}).
//   - Strings are UTF-8; indexing, slicing and length count code points, as Python does.
//   - to_str is Python's str() (True, None, 1.0, ['a', 1], {'k': 'v'}); repr is Python's repr;
//     to_json is Python's json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).
//   - A misuse (wrong types, an undefined value used as a value, a limit) throws ValueError with
//     a message only; the evaluator adds the template position (TemplateError).
//   - Lists and dicts record their nesting depth and refuse to nest deeper than kMaxValueDepth,
//     so no value is deep enough for a recursive copy, print or destructor to exhaust the stack.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zaya::jinja {

inline constexpr int kMaxValueDepth = 200;

struct ValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Dict,
  Namespace,
  Loop,
  Callable
};

struct Object {
  virtual ~Object() = default;
};
struct Value;
struct ListObj;
struct DictObj;
struct NsObj;
struct LoopObj;
struct Callable;

struct Value {
  Kind kind = Kind::Undefined;
  bool unsafe = false;  // an Undefined the sandbox produced: any use is an error
  bool tuple = false;   // a List that Python would hold as a tuple (prints with parentheses)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const Object> obj;  // StrObj / ListObj / DictObj / NsObj / LoopObj / Callable;
                                      // for Undefined: a StrObj naming what was undefined

  static Value undefined(std::string hint = "", bool unsafe = false);
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value real(double v);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(std::vector<std::pair<Value, Value>> items);
  static Value callable(std::shared_ptr<const Callable> fn);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  const std::string& str() const;                               // String (and an Undefined's hint)
  const std::vector<Value>& items() const;                      // List
  const std::vector<std::pair<Value, Value>>& entries() const;  // Dict
  const DictObj& dict_obj() const;
  NsObj& ns() const;
  const LoopObj& loop() const;
  const Callable& fn() const;
  double as_double() const;  // numbers
  int64_t as_int() const;    // Int / Bool
};

struct StrObj : Object {
  explicit StrObj(std::string v) : s(std::move(v)) {}
  std::string s;
};
struct ListObj : Object {
  std::vector<Value> items;
  int depth = 1;
};
struct DictObj : Object {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};
struct NsObj : Object {
  mutable std::vector<std::pair<std::string, Value>> attrs;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v) const;
};
struct LoopObj : Object {
  std::shared_ptr<const ListObj> seq;
  size_t index0 = 0;
  int depth = 1;
};

// Python's truth value (undefined: false; an unsafe undefined throws).
bool truthy(const Value& v);
// Python's str() / repr(); the output of {{ x }} is to_str(x).
std::string to_str(const Value& v);
std::string repr(const Value& v);
// float.__repr__: the shortest text that reads back the same double ("1.0", "1e+16", "inf").
std::string format_float(double d);
// "str", "int", "list", "dict", "NoneType", … (for messages).
std::string type_name(const Value& v);
// The value a JSON document is (objects keep their key order).
Value from_json(const nlohmann::ordered_json& j);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=(item_sep, key_sep),
// sort_keys=sort_keys); indent: "" none, else the text of one level (Python's int n = n spaces).
std::string to_json(const Value& v, bool has_indent, const std::string& indent,
                    const std::string& item_sep, const std::string& key_sep, bool sort_keys);
// Python ==, and the order of <, <= … (throws ValueError for types Python cannot order).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);
// Throws when an unsafe undefined is used as a value.
void check_safe(const Value& v);

// UTF-8 helpers: code points (invalid bytes read as U+FFFD-like single units, never skipped).
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);
bool is_ascii(std::string_view s);
bool is_py_space(char32_t c);  // str.isspace()

}  // namespace zaya::jinja
