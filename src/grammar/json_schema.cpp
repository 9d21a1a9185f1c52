// The JSON Schema compiler (json_schema.h): each schema node becomes one rule (so a schema used in
// several places is written once and a $ref cycle is a rule referring to itself), built from the
// shared primitives: string characters, integers, numbers, any value at each nesting depth.
#include "grammar/json_schema.h"

#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace zaya::grammar {

namespace {

using json = nlohmann::ordered_json;

std::string child(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

[[noreturn]] void refuse(const std::string& ptr, const std::string& what) {
  throw SchemaError(fmt::format("JSON schema at #{}: {}", ptr, what));
}

[[noreturn]] void unsupported(const std::string& ptr, std::string_view key,
                              const std::string& detail = "") {
  refuse(ptr,
         fmt::format("'{}' is not supported{}", key, detail.empty() ? "" : " (" + detail + ")"));
}

// Keywords that change which texts validate and that the grammar cannot enforce.
const std::set<std::string, std::less<>> kRefused = {"pattern",
                                                     "patternProperties",
                                                     "not",
                                                     "if",
                                                     "then",
                                                     "else",
                                                     "dependentRequired",
                                                     "dependentSchemas",
                                                     "dependencies",
                                                     "propertyNames",
                                                     "unevaluatedProperties",
                                                     "unevaluatedItems",
                                                     "contains",
                                                     "minContains",
                                                     "maxContains",
                                                     "multipleOf",
                                                     "$dynamicRef",
                                                     "$recursiveRef",
                                                     "additionalItems"};

// Keywords that only annotate; allowed beside $ref and the combinators.
const std::set<std::string, std::less<>> kAnnotations = {
    "title",       "description",     "examples",         "default",    "$schema", "$id",
    "$comment",    "deprecated",      "readOnly",         "writeOnly",  "$anchor", "$defs",
    "definitions", "contentEncoding", "contentMediaType", "$vocabulary"};

const char* const kTypes[] = {"string", "number", "integer", "boolean", "null", "object", "array"};

bool matches_type(const json& v, std::string_view t) {
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                     v.get<double>() == std::floor(v.get<double>()));
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

// A non-negative integer keyword, or -1 when absent.
int64_t count_keyword(const json& s, const char* key, const std::string& ptr) {
  auto it = s.find(key);
  if (it == s.end()) return -1;
  const json& v = *it;
  if (v.is_number_unsigned()) return int64_t(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX / 2));
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>()))
    return v.get<double>() > 1e15 ? int64_t(1e15) : int64_t(v.get<double>());
  refuse(child(ptr, key), fmt::format("'{}' must be a non-negative integer", key));
}

std::optional<double> number_keyword(const json& s, const char* key, const std::string& ptr) {
  auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  if (it->is_boolean())
    unsupported(ptr, key, "a boolean, as in draft 4: write the bound in 'exclusiveMinimum' itself");
  if (!it->is_number()) refuse(child(ptr, key), fmt::format("'{}' must be a number", key));
  return it->get<double>();
}

}  // namespace

struct JsonSchemaCompiler::State {
  GrammarBuilder& b;
  int ws = -1, chr = -1, string = -1, integer = -1, number = -1, nonneg_number = -1;
  std::vector<int> any;  // any value, by remaining depth
  std::vector<int> any_obj;
  int any_map = -1;
  std::map<std::pair<const json*, std::string>, int> refs;
  int counter = 0;

  explicit State(GrammarBuilder& builder) : b(builder) {}

  std::string name(const std::string& base) { return base + "#" + std::to_string(counter++); }

  Expr ws_e() {
    if (ws < 0) ws = b.add("ws", opt(lit(" ")));
    return ref(ws);
  }
  Expr comma() { return seq({lit(","), ws_e()}); }
  Expr colon() { return seq({lit(":"), ws_e()}); }

  Expr char_e() {
    if (chr < 0) {
      const Expr hex = chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
      // \uXXXX outside U+D800..U+DFFF: a lone surrogate escape is not valid JSON text.
      Expr u = alt({seq({chars({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}), hex,
                         hex, hex}),
                    seq({chars({{'d', 'd'}, {'D', 'D'}}), chars({{'0', '7'}}), hex, hex})});
      chr = b.add("char", alt({chars({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true),
                               seq({lit("\\"), alt({chars({{'"', '"'},
                                                           {'\\', '\\'},
                                                           {'/', '/'},
                                                           {'b', 'b'},
                                                           {'f', 'f'},
                                                           {'n', 'n'},
                                                           {'r', 'r'},
                                                           {'t', 't'}}),
                                                    seq({lit("u"), u})})})}));
    }
    return ref(chr);
  }

  Expr string_e() {
    if (string < 0) string = b.add("string", seq({lit("\""), repeat(char_e(), 0), lit("\"")}));
    return ref(string);
  }

  Expr digits(int min, int max) { return repeat(chars({{'0', '9'}}), min, max); }
  Expr uint_e() { return alt({lit("0"), seq({chars({{'1', '9'}}), digits(0, 15)})}); }
  Expr frac_exp() {
    return seq({opt(seq({lit("."), digits(1, 16)})),
                opt(seq({chars({{'e', 'e'}, {'E', 'E'}}), opt(chars({{'+', '+'}, {'-', '-'}})),
                         digits(1, 2)}))});
  }

  Expr integer_e() {
    if (integer < 0) integer = b.add("integer", seq({opt(lit("-")), uint_e()}));
    return ref(integer);
  }
  Expr number_e() {
    if (number < 0) number = b.add("number", seq({opt(lit("-")), uint_e(), frac_exp()}));
    return ref(number);
  }
  Expr nonneg_number_e() {
    if (nonneg_number < 0) nonneg_number = b.add("nonneg_number", seq({uint_e(), frac_exp()}));
    return ref(nonneg_number);
  }

  Expr scalar() { return alt({string_e(), number_e(), lit("true"), lit("false"), lit("null")}); }

  // Any value nested at most `depth` more levels.
  Expr any_e(int depth) {
    if (any.empty()) {
      any.assign(kAnyJsonDepth + 1, -1);
      any_obj.assign(kAnyJsonDepth + 1, -1);
    }
    if (any[depth] >= 0) return ref(any[depth]);
    if (depth == 0) {
      any[0] = b.add("any0", scalar());
      return ref(any[0]);
    }
    const Expr inner = any_e(depth - 1);
    const Expr member = seq({string_e(), colon(), inner});
    any_obj[depth] =
        b.add("object" + std::to_string(depth),
              seq({lit("{"), opt(seq({member, repeat(seq({comma(), member}), 0)})), lit("}")}));
    const int arr =
        b.add("array" + std::to_string(depth),
              seq({lit("["), opt(seq({inner, repeat(seq({comma(), inner}), 0)})), lit("]")}));
    any[depth] =
        b.add("any" + std::to_string(depth), alt({ref(any_obj[depth]), ref(arr), scalar()}));
    return ref(any[depth]);
  }
  Expr any_object_e() {
    any_e(kAnyJsonDepth);
    return ref(any_obj[kAnyJsonDepth]);
  }

  // Memoized: every property with the same bounds shares one chain of rules.
  std::map<std::pair<int, int>, int> bounded;
  Expr string_chars(int min, int max) {
    auto [it, added] = bounded.emplace(std::pair{min, max}, -1);
    if (added) it->second = b.add(name("chars"), repeat(char_e(), min, max));
    return ref(it->second);
  }

  Expr format_e(const std::string& f, const std::string& ptr) {
    const auto d = [](char lo, char hi) { return chars({{char32_t(lo), char32_t(hi)}}); };
    auto date = [&] {
      // Day ranges by month; 29 February is left out (which years have it is not worth a
      // grammar: every text produced is still a valid date).
      return seq(
          {d('0', '9'), d('0', '9'), d('0', '9'), d('0', '9'), lit("-"),
           alt({seq({alt({seq({lit("0"), chars({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '8'}})}),
                          seq({lit("1"), chars({{'0', '0'}, {'2', '2'}})})}),
                     lit("-"),
                     alt({seq({lit("0"), d('1', '9')}), seq({d('1', '2'), d('0', '9')}),
                          seq({lit("3"), d('0', '1')})})}),
                seq({alt({seq({lit("0"), chars({{'4', '4'}, {'6', '6'}, {'9', '9'}})}), lit("11")}),
                     lit("-"),
                     alt({seq({lit("0"), d('1', '9')}), seq({d('1', '2'), d('0', '9')}),
                          lit("30")})}),
                seq({lit("02-"), alt({seq({lit("0"), d('1', '9')}), seq({lit("1"), d('0', '9')}),
                                      seq({lit("2"), d('0', '8')})})})})});
    };
    auto time = [&] {
      const Expr hh = alt({seq({d('0', '1'), d('0', '9')}), seq({lit("2"), d('0', '3')})});
      const Expr mm = seq({d('0', '5'), d('0', '9')});
      return seq({hh, lit(":"), mm, lit(":"), mm, opt(seq({lit("."), digits(1, 6)})),
                  alt({lit("Z"), seq({chars({{'+', '+'}, {'-', '-'}}), hh, lit(":"), mm})})});
    };
    if (f == "date") return date();
    if (f == "time") return time();
    if (f == "date-time") return seq({date(), lit("T"), time()});
    if (f == "uuid") {
      const Expr h = chars({{'0', '9'}, {'a', 'f'}});
      return seq({repeat(h, 8, 8), lit("-"), repeat(h, 4, 4), lit("-"), repeat(h, 4, 4), lit("-"),
                  repeat(h, 4, 4), lit("-"), repeat(h, 12, 12)});
    }
    unsupported(ptr, "format",
                fmt::format("format '{}'; supported: date, time, date-time, uuid", f));
  }

  // ---- schemas ----

  const json& resolve(const json& root, const std::string& r, const std::string& ptr) {
    if (r.empty() || r[0] != '#')
      unsupported(ptr, "$ref", fmt::format("'{}': only local references '#…' are", r));
    const json* at = &root;
    size_t i = 1;
    if (i < r.size() && r[i] != '/') unsupported(ptr, "$ref", fmt::format("'{}': anchors", r));
    while (i < r.size()) {
      const size_t j = std::min(r.find('/', i + 1), r.size());
      std::string key;
      for (size_t k = i + 1; k < j; ++k) {
        if (r[k] == '~' && k + 1 < j && (r[k + 1] == '0' || r[k + 1] == '1')) {
          key += r[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          key += r[k];
        }
      }
      if (at->is_object() && at->contains(key)) {
        at = &(*at)[key];
      } else if (at->is_array() && !key.empty() && key.size() < 10 &&
                 key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < at->size()) {
        at = &(*at)[std::stoul(key)];
      } else {
        refuse(ptr, fmt::format("'$ref' '{}' points to nothing", r));
      }
      i = j;
    }
    return *at;
  }

  // The rule of the texts valid against `s` (at `ptr` in the document whose root is `root`).
  Expr compile(const json& s, const json& root, const std::string& base, const std::string& ptr,
               int depth) {
    if (depth > 64) refuse(ptr, "the schema nests deeper than 64 levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse(ptr, "the schema 'false' accepts nothing");
      return any_e(kAnyJsonDepth);
    }
    if (!s.is_object()) refuse(ptr, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items())
      if (kRefused.count(key)) unsupported(ptr, key);
    return ref(b.add(name("schema"), body(s, root, base, ptr, depth)));
  }

  void only_annotations_beside(const json& s, std::string_view kw, const std::string& ptr) {
    for (const auto& [key, value] : s.items())
      if (key != kw && key != "nullable" && !kAnnotations.count(key))
        unsupported(ptr, key, fmt::format("beside '{}'", kw));
  }

  Expr body(const json& s, const json& root, const std::string& base, const std::string& ptr,
            int depth) {
    if (auto it = s.find("nullable"); it != s.end()) {
      if (!it->is_boolean()) refuse(child(ptr, "nullable"), "'nullable' must be a boolean");
      if (it->get<bool>()) {
        json rest = s;
        rest.erase("nullable");
        return alt({body(rest, root, base, ptr, depth), lit("null")});
      }
    }
    if (auto it = s.find("$ref"); it != s.end()) {
      only_annotations_beside(s, "$ref", ptr);
      if (!it->is_string()) refuse(child(ptr, "$ref"), "'$ref' must be a string");
      const std::string r = it->get<std::string>();
      const json& target = resolve(root, r, ptr);
      const std::pair<const json*, std::string> key{&root, r};
      if (auto m = refs.find(key); m != refs.end()) return ref(m->second);
      const int rule = b.declare(name("$ref " + r));
      refs[key] = rule;
      b.define(rule, compile(target, root, base, base + r.substr(1), depth + 1));
      return ref(rule);
    }
    for (const char* kw : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(kw);
      if (it == s.end()) continue;
      only_annotations_beside(s, kw, ptr);
      const std::string p = child(ptr, kw);
      if (!it->is_array() || it->empty())
        refuse(p, fmt::format("'{}' must be a non-empty array", kw));
      if (std::string_view(kw) == "allOf") {
        if (it->size() != 1) unsupported(ptr, "allOf", "with more than one schema");
        return compile((*it)[0], root, base, child(p, "0"), depth + 1);
      }
      std::vector<Expr> alts;
      for (size_t i = 0; i < it->size(); ++i)
        alts.push_back(compile((*it)[i], root, base, child(p, std::to_string(i)), depth + 1));
      return alt(std::move(alts));
    }
    // The types allowed.
    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      const std::string p = child(ptr, "type");
      auto add = [&](const json& t) {
        if (!t.is_string()) refuse(p, "'type' must be a string or an array of strings");
        const std::string name = t.get<std::string>();
        if (std::find(std::begin(kTypes), std::end(kTypes), name) == std::end(kTypes))
          refuse(p, fmt::format("unknown type '{}'", name));
        if (std::find(types.begin(), types.end(), name) == types.end()) types.push_back(name);
      };
      if (it->is_array()) {
        if (it->empty()) refuse(p, "'type' is an empty array: nothing is valid");
        for (const json& t : *it) add(t);
      } else {
        add(*it);
      }
    }
    auto has = [&](const char* k) { return s.contains(k); };
    if (has("const") || has("enum")) {
      std::vector<std::string> texts;
      auto take = [&](const json& v) {
        bool ok = types.empty();
        for (const std::string& t : types) ok = ok || matches_type(v, t);
        if (ok) texts.push_back(v.dump(-1, ' ', false, json::error_handler_t::replace));
      };
      if (has("const")) {
        take(s["const"]);
      } else {
        const json& e = s["enum"];
        if (!e.is_array() || e.empty())
          refuse(child(ptr, "enum"), "'enum' must be a non-empty array");
        for (const json& v : e) take(v);
      }
      if (texts.empty())
        refuse(ptr, fmt::format("no value of '{}' has the schema's type",
                                has("const") ? "const" : "enum"));
      return one_of_literals(std::move(texts));
    }
    if (types.empty()) {
      // No type: the one the keywords describe, else any value.
      if (has("properties") || has("required") || has("additionalProperties") ||
          has("minProperties") || has("maxProperties"))
        types = {"object"};
      else if (has("items") || has("prefixItems") || has("minItems") || has("maxItems"))
        types = {"array"};
      else if (has("minLength") || has("maxLength") || has("format"))
        types = {"string"};
      else if (has("minimum") || has("maximum") || has("exclusiveMinimum") ||
               has("exclusiveMaximum"))
        types = {"number"};
      else
        return any_e(kAnyJsonDepth);
    }
    std::vector<Expr> alts;
    for (const std::string& t : types) alts.push_back(typed(t, s, root, base, ptr, depth));
    return alt(std::move(alts));
  }

  Expr typed(const std::string& t, const json& s, const json& root, const std::string& base,
             const std::string& ptr, int depth) {
    if (t == "null") return lit("null");
    if (t == "boolean") return alt({lit("true"), lit("false")});
    if (t == "string") return string_schema(s, ptr);
    if (t == "integer") return integer_schema(s, ptr);
    if (t == "number") {
      auto lo = number_keyword(s, "minimum", ptr);
      for (const char* k : {"maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (number_keyword(s, k, ptr)) unsupported(ptr, k, "on a number");
      if (lo && *lo != 0) unsupported(ptr, "minimum", "on a number, other than 0");
      return lo ? nonneg_number_e() : number_e();
    }
    if (t == "object") return object_schema(s, root, base, ptr, depth);
    return array_schema(s, root, base, ptr, depth);
  }

  Expr string_schema(const json& s, const std::string& ptr) {
    const int64_t lo = count_keyword(s, "minLength", ptr);
    const int64_t hi = count_keyword(s, "maxLength", ptr);
    if (auto it = s.find("format"); it != s.end()) {
      if (!it->is_string()) refuse(child(ptr, "format"), "'format' must be a string");
      if (lo >= 0 || hi >= 0)
        unsupported(ptr, lo >= 0 ? "minLength" : "maxLength", "with 'format'");
      return seq({lit("\""), format_e(it->get<std::string>(), ptr), lit("\"")});
    }
    if (lo < 0 && hi < 0) return string_e();
    if (lo > kMaxBound) unsupported(ptr, "minLength", fmt::format("above {}", kMaxBound));
    if (hi >= 0 && lo > hi) refuse(ptr, "'minLength' is above 'maxLength': nothing is valid");
    const int max = hi < 0 ? -1 : int(std::min<int64_t>(hi, kMaxBound));
    return seq({lit("\""), string_chars(int(std::max<int64_t>(lo, 0)), max), lit("\"")});
  }

  Expr integer_schema(const json& s, const std::string& ptr) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* key, bool lower, bool exclusive) {
      auto v = number_keyword(s, key, ptr);
      if (!v) return;
      if (std::fabs(*v) > 1e15) unsupported(ptr, key, "beyond ±1e15");
      int64_t x = lower ? int64_t(std::ceil(*v)) : int64_t(std::floor(*v));
      if (exclusive && double(x) == *v) x += lower ? 1 : -1;
      auto& slot = lower ? lo : hi;
      slot = slot ? (lower ? std::max(*slot, x) : std::min(*slot, x)) : x;
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (!lo && !hi) return integer_e();
    auto range = [](int64_t a, int64_t z) {
      std::vector<std::string> v;
      for (int64_t x = a; x <= z; ++x) v.push_back(std::to_string(x));
      return one_of_literals(std::move(v));
    };
    if (lo && hi) {
      if (*lo > *hi) refuse(ptr, "the integer bounds leave no value");
      if (*hi - *lo > 1000)
        unsupported(ptr, "maximum", "with 'minimum' over a range of more than 1000 integers");
      return range(*lo, *hi);
    }
    if (lo && *lo >= 0 && *lo < 10000) {
      // Every integer of more digits than the bound, or of as many and at least the bound.
      const int nd = int(std::to_string(*lo).size());
      int64_t top = 1;
      for (int k = 0; k < nd; ++k) top *= 10;
      return alt({range(*lo, top - 1), seq({chars({{'1', '9'}}), digits(nd, 15)})});
    }
    unsupported(ptr, lo ? "minimum" : "maximum", "alone, unless a lower bound in [0, 10000)");
  }

  Expr object_schema(const json& s, const json& root, const std::string& base,
                     const std::string& ptr, int depth) {
    std::vector<std::string> names;
    std::vector<const json*> schemas;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) refuse(child(ptr, "properties"), "'properties' must be an object");
      for (const auto& [k, v] : it->items()) {
        names.push_back(k);
        schemas.push_back(&v);
      }
    }
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) refuse(child(ptr, "required"), "'required' must be an array of strings");
      static const json kAny = json::object();
      for (const json& r : *it) {
        if (!r.is_string())
          refuse(child(ptr, "required"), "'required' must be an array of strings");
        const std::string n = r.get<std::string>();
        required.insert(n);
        if (std::find(names.begin(), names.end(), n) == names.end()) {
          names.push_back(n);
          schemas.push_back(&kAny);
        }
      }
    }
    const int64_t min_p = count_keyword(s, "minProperties", ptr);
    const int64_t max_p = count_keyword(s, "maxProperties", ptr);
    if (names.empty()) {
      // Free keys; values by additionalProperties.
      Expr value = any_e(kAnyJsonDepth - 1);
      if (auto it = s.find("additionalProperties"); it != s.end()) {
        if (it->is_boolean() && !it->get<bool>()) {
          if (min_p > 0) refuse(ptr, "'minProperties' with no property allowed: nothing is valid");
          return lit("{}");
        }
        value = compile(*it, root, base, child(ptr, "additionalProperties"), depth + 1);
      }
      if (min_p > kMaxBound) unsupported(ptr, "minProperties", fmt::format("above {}", kMaxBound));
      if (max_p >= 0 && min_p > max_p) refuse(ptr, "'minProperties' is above 'maxProperties'");
      const Expr member = seq({string_e(), colon(), value});
      if (max_p == 0) return lit("{}");
      const int lo = int(std::max<int64_t>(min_p, 0));
      const int hi = max_p < 0 ? -1 : int(std::min<int64_t>(max_p, kMaxBound));
      Expr members =
          seq({member, repeat(seq({comma(), member}), std::max(lo - 1, 0), hi < 0 ? -1 : hi - 1)});
      return seq({lit("{"), lo > 0 ? std::move(members) : opt(std::move(members)), lit("}")});
    }
    if (min_p > int64_t(required.size()))
      unsupported(ptr, "minProperties", "above the number of required properties");
    if (max_p >= 0 && max_p < int64_t(names.size()))
      unsupported(ptr, "maxProperties", "below the number of properties");
    // rest[i][f]: the members from the i-th on; f = 1 when none was written yet (no comma).
    const size_t n = names.size();
    std::vector<std::array<int, 2>> rest(n + 1);
    for (size_t i = 0; i <= n; ++i)
      for (int f : {0, 1}) rest[i][f] = b.declare(name("members"));
    for (int f : {0, 1}) b.define(rest[n][f], lit(""));
    for (size_t i = n; i-- > 0;) {
      const std::string key = json(names[i]).dump(-1, ' ', false, json::error_handler_t::replace);
      const Expr value =
          compile(*schemas[i], root, base, child(child(ptr, "properties"), names[i]), depth + 1);
      for (int f : {0, 1}) {
        Expr member = seq({f ? lit("") : comma(), lit(key), colon(), value, ref(rest[i + 1][0])});
        if (required.count(names[i]))
          b.define(rest[i][f], member);
        else
          b.define(rest[i][f], alt({std::move(member), ref(rest[i + 1][f])}));
      }
    }
    return seq({lit("{"), ref(rest[0][1]), lit("}")});
  }

  Expr array_schema(const json& s, const json& root, const std::string& base,
                    const std::string& ptr, int depth) {
    std::vector<Expr> prefix;
    const json* items = nullptr;
    bool more = true;  // items beyond the prefix allowed
    auto prefix_of = [&](const json& a, const char* key) {
      if (!a.is_array()) refuse(child(ptr, key), fmt::format("'{}' must be an array", key));
      for (size_t i = 0; i < a.size(); ++i)
        prefix.push_back(
            compile(a[i], root, base, child(child(ptr, key), std::to_string(i)), depth + 1));
    };
    if (auto it = s.find("prefixItems"); it != s.end()) prefix_of(*it, "prefixItems");
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) {
        if (s.contains("prefixItems"))
          unsupported(ptr, "items", "as an array beside 'prefixItems'");
        prefix_of(*it, "items");  // draft 2019 tuples; additionalItems is refused
      } else if (it->is_boolean() && !it->get<bool>()) {
        more = false;
      } else {
        items = &*it;
      }
    }
    if (auto it = s.find("uniqueItems"); it != s.end() && !(it->is_boolean() && !it->get<bool>()))
      unsupported(ptr, "uniqueItems");
    const int64_t min_i = count_keyword(s, "minItems", ptr);
    int64_t max_i = count_keyword(s, "maxItems", ptr);
    if (min_i > kMaxBound) unsupported(ptr, "minItems", fmt::format("above {}", kMaxBound));
    const int64_t k = int64_t(prefix.size());
    if (!more) max_i = max_i < 0 ? k : std::min(max_i, k);
    if (max_i >= 0 && min_i > max_i) refuse(ptr, "'minItems' is above the most items allowed");
    const int lo = int(std::max<int64_t>(min_i, 0));
    const int hi = max_i < 0 ? -1 : int(std::min<int64_t>(max_i, kMaxBound + k));
    const Expr item = items ? compile(*items, root, base, child(ptr, "items"), depth + 1)
                            : any_e(kAnyJsonDepth - 1);
    // The elements from index i on, built from the end: explicit up to the prefix and minItems,
    // then a repetition of the item.
    const int fixed = int(std::max<int64_t>(k, lo));
    const int top = hi < 0 ? fixed : std::min(fixed, hi);
    Expr tail = lit("");
    if (hi < 0 || hi > top) {
      const int left = hi < 0 ? -1 : hi - top;
      tail = top == 0 ? opt(seq({item, repeat(seq({comma(), item}), 0, left < 0 ? -1 : left - 1)}))
                      : repeat(seq({comma(), item}), 0, left);
    }
    for (int i = top - 1; i >= 0; --i) {
      const Expr& e = i < k ? prefix[size_t(i)] : item;
      Expr elem = seq({i == 0 ? lit("") : comma(), e, std::move(tail)});
      tail = i >= lo ? alt({std::move(elem), lit("")}) : std::move(elem);
      if ((top - i) % 64 == 0) tail = ref(b.add(name("items"), tail));  // keep Exprs shallow
    }
    return seq({lit("["), std::move(tail), lit("]")});
  }
};

JsonSchemaCompiler::JsonSchemaCompiler(GrammarBuilder& b) : s_(std::make_unique<State>(b)) {}
JsonSchemaCompiler::~JsonSchemaCompiler() = default;

Expr JsonSchemaCompiler::values(const nlohmann::ordered_json& root, const std::string& pointer) {
  return s_->compile(root, root, pointer, pointer, 0);
}
Expr JsonSchemaCompiler::values_at(const nlohmann::ordered_json& schema,
                                   const nlohmann::ordered_json& root,
                                   const std::string& root_pointer, const std::string& pointer) {
  return s_->compile(schema, root, root_pointer, pointer, 0);
}
Expr JsonSchemaCompiler::any_value() {
  return s_->any_e(kAnyJsonDepth);
}
Expr JsonSchemaCompiler::any_object() {
  return s_->any_object_e();
}
Expr JsonSchemaCompiler::string_chars(int min, int max) {
  return s_->string_chars(min, max);
}
Expr JsonSchemaCompiler::string_format(const std::string& format, const std::string& pointer) {
  return s_->format_e(format, pointer);
}

Grammar any_json_object() {
  GrammarBuilder b;
  JsonSchemaCompiler c(b);
  return b.build(b.add("root", c.any_object()));
}

Grammar from_json_schema(const nlohmann::ordered_json& schema) {
  try {
    GrammarBuilder b;
    JsonSchemaCompiler c(b);
    return b.build(b.add("root", c.values(schema)));
  } catch (const SchemaError&) {
    throw;
  } catch (const Error& e) {  // the grammar's own limits: left recursion through $ref, size
    throw SchemaError(fmt::format("JSON schema at #: {}", e.what()));
  }
}

}  // namespace zaya::grammar
