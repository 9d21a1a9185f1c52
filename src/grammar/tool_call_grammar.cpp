// ZAYA1 tool calls as a grammar (tool_call_grammar.h).
#include "grammar/tool_call_grammar.h"

#include <map>
#include <type_traits>

namespace zaya::grammar {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kClose = "</parameter>";

[[noreturn]] void bad(const std::string& ptr, const std::string& what) {
  throw SchemaError(fmt::format("tools at #{}: {}", ptr, what));
}

// Raw text that never contains "</parameter>": a Knuth–Morris–Pratt automaton over code points,
// one rule per (matched length of "</parameter>", characters still allowed). "</parameter>" has
// '<' only first, so a mismatch falls back to state 1 on '<' and to state 0 otherwise.
class RawText {
 public:
  explicit RawText(GrammarBuilder& b) : b_(b) {}

  // min..max code points (max -1: unbounded).
  Expr text(int min, int max) {
    if (max < 0 && min == 0) {
      if (unbounded_.empty()) {
        for (size_t k = 0; k < kClose.size(); ++k) unbounded_.push_back(b_.declare("raw"));
        for (size_t k = 0; k < kClose.size(); ++k)
          b_.define(unbounded_[k],
                    alt({lit(""), next(k, [&](size_t j) { return unbounded_[j]; })}));
      }
      return ref(unbounded_[0]);
    }
    if (max < 0) {  // min then unbounded: min counted characters ending in any state
      return counted(min, min, [&](size_t j) { return text_from(j); });
    }
    auto [it, added] = counted_.emplace(std::pair{min, max}, Expr{});
    if (added) it->second = counted(min, max, nullptr);
    return it->second;
  }

 private:
  template <class Tail>
  Expr next(size_t k, Tail&& to) {
    std::vector<Expr> alts;
    const char c = kClose[k];
    if (k + 1 < kClose.size()) alts.push_back(seq({lit(std::string(1, c)), ref(to(k + 1))}));
    if (k > 0) alts.push_back(seq({lit("<"), ref(to(1))}));
    std::vector<std::pair<char32_t, char32_t>> not_these = {{'<', '<'}, {char32_t(c), char32_t(c)}};
    alts.push_back(seq({chars(not_these, true), ref(to(0))}));
    return alt(std::move(alts));
  }

  // An unbounded tail starting in state j.
  int text_from(size_t j) {
    text(0, -1);
    return unbounded_[j];
  }

  // Exactly `min`.. `max` characters; when `tail` is set, after `min` the text goes on unbounded
  // from the state reached (max == min).
  template <class Tail>
  Expr counted(int min, int max, Tail tail) {
    // rules[r][k]: r characters still allowed, k of "</parameter>" matched.
    std::vector<std::vector<int>> rules(size_t(max) + 1, std::vector<int>(kClose.size()));
    for (auto& row : rules)
      for (int& r : row) r = b_.declare("raw_counted");
    for (int r = 0; r <= max; ++r) {
      const bool may_end = max - r >= min;
      for (size_t k = 0; k < kClose.size(); ++k) {
        if (r == 0) {
          if constexpr (std::is_same_v<Tail, std::nullptr_t>) {
            b_.define(rules[0][k], lit(""));
          } else {
            b_.define(rules[0][k], ref(tail(k)));
          }
          continue;
        }
        std::vector<Expr> alts;
        if (may_end) alts.push_back(lit(""));
        alts.push_back(next(k, [&](size_t j) { return rules[size_t(r - 1)][j]; }));
        b_.define(rules[size_t(r)][k], alt(std::move(alts)));
      }
    }
    return ref(rules[size_t(max)][0]);
  }

  GrammarBuilder& b_;
  std::vector<int> unbounded_;
  std::map<std::pair<int, int>, Expr> counted_;  // the same bounds share their rules
};

}  // namespace

Grammar zaya_tool_calls(const nlohmann::ordered_json& tools, std::string_view only_name) {
  try {
    if (!tools.is_array() || tools.empty()) bad("", "'tools' must be a non-empty array");
    GrammarBuilder b;
    JsonSchemaCompiler js(b);
    RawText raw(b);
    std::vector<Expr> functions;
    std::vector<std::string> seen;
    for (size_t t = 0; t < tools.size(); ++t) {
      const std::string tp = "/" + std::to_string(t);
      const json& tool = tools[t];
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object())
        bad(tp, "a tool must be an object with a 'function' object");
      if (tool.contains("type") && tool["type"] != "function")
        bad(tp + "/type", "only tools of type 'function' are supported");
      const json& fn = tool["function"];
      const std::string fp = tp + "/function";
      if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
        bad(fp + "/name", "a function needs a non-empty string 'name'");
      const std::string name = fn["name"].get<std::string>();
      if (name.find_first_of(">\n") != std::string::npos)
        bad(fp + "/name", fmt::format("the function name '{}' holds '>' or a newline", name));
      if (!only_name.empty() && name != only_name) continue;
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      // The parameters: the object chain of json_schema.cpp without commas.
      std::vector<std::string> names;
      std::vector<Expr> values;
      std::vector<bool> required;
      if (fn.contains("parameters") && !fn["parameters"].is_null()) {
        const json& ps = fn["parameters"];
        const std::string pp = fp + "/parameters";
        if (!ps.is_object()) bad(pp, "'parameters' must be a JSON schema object");
        if (ps.contains("type") && ps["type"] != "object")
          bad(pp + "/type", "the parameters' schema must be of type 'object'");
        std::vector<std::string> req;
        if (ps.contains("required")) {
          if (!ps["required"].is_array()) bad(pp + "/required", "'required' must be an array");
          for (const json& r : ps["required"]) {
            if (!r.is_string()) bad(pp + "/required", "'required' must hold strings");
            req.push_back(r.get<std::string>());
          }
        }
        if (ps.contains("properties")) {
          if (!ps["properties"].is_object())
            bad(pp + "/properties", "'properties' must be an object");
          for (const auto& [arg, schema] : ps["properties"].items()) {
            if (arg.empty() || arg.find_first_of(">\n") != std::string::npos)
              bad(pp + "/properties",
                  fmt::format("the parameter name '{}' is empty or holds '>' or a newline", arg));
            const std::string sp = pp + "/properties/" + arg;
            names.push_back(arg);
            required.push_back(std::find(req.begin(), req.end(), arg) != req.end());
            if (schema.is_object() && schema.contains("type") && schema["type"] == "string") {
              // Raw text: the keywords json_schema.cpp reads for strings.
              for (const char* k : {"pattern", "not", "allOf", "anyOf", "oneOf", "$ref"})
                if (schema.contains(k))
                  throw SchemaError(
                      fmt::format("JSON schema at #{}: '{}' is not supported", sp, k));
              if (schema.contains("enum") || schema.contains("const")) {
                std::vector<std::string> options;
                const json list =
                    schema.contains("const") ? json::array({schema["const"]}) : schema["enum"];
                if (!list.is_array()) bad(sp + "/enum", "'enum' must be an array");
                for (const json& v : list)
                  if (v.is_string()) options.push_back(v.get<std::string>());
                if (options.empty()) bad(sp, "no string in 'enum'");
                values.push_back(one_of_literals(options));
              } else if (schema.contains("format")) {
                if (!schema["format"].is_string()) bad(sp + "/format", "'format' must be a string");
                values.push_back(js.string_format(schema["format"].get<std::string>(), sp));
              } else {
                // An init-capture: clang before 16 cannot capture a structured binding.
                auto count = [&, &schema = schema](const char* k) -> int64_t {
                  if (!schema.contains(k)) return -1;
                  const json& v = schema[k];
                  if (!v.is_number_integer() || v.get<int64_t>() < 0)
                    bad(sp + "/" + k, fmt::format("'{}' must be a non-negative integer", k));
                  return v.get<int64_t>();
                };
                const int64_t lo = count("minLength"), hi = count("maxLength");
                if (lo > kMaxBound)
                  throw SchemaError(
                      fmt::format("JSON schema at #{}: 'minLength' is not supported (above {})", sp,
                                  kMaxBound));
                if (hi >= 0 && lo > hi) bad(sp, "'minLength' is above 'maxLength'");
                values.push_back(raw.text(int(std::max<int64_t>(lo, 0)),
                                          hi < 0 ? -1 : int(std::min<int64_t>(hi, kMaxBound))));
              }
            } else {
              values.push_back(js.values_at(schema, ps, pp, sp));
            }
          }
        }
        for (const std::string& r : req)
          if (std::find(names.begin(), names.end(), r) == names.end()) {
            names.push_back(r);
            required.push_back(true);
            values.push_back(js.any_value());
          }
      }
      // rest[i]: the arguments from the i-th on.
      const size_t n = names.size();
      std::vector<int> rest(n + 1);
      for (int& r : rest) r = b.declare("args_" + name);
      b.define(rest[n], lit(""));
      for (size_t i = n; i-- > 0;) {
        Expr arg = seq({lit("<parameter=" + names[i] + ">\n"), values[i], lit("\n</parameter>\n"),
                        ref(rest[i + 1])});
        if (required[i])
          b.define(rest[i], arg);
        else
          b.define(rest[i], alt({std::move(arg), ref(rest[i + 1])}));
      }
      functions.push_back(seq({lit(name + ">\n"), ref(rest[0])}));
    }
    if (functions.empty())
      bad("", fmt::format("tool_choice names the function '{}', which is not among the tools",
                          only_name));
    const int call =
        b.add("call", seq({lit("<zyphra_tool_call>\n<function="), alt(std::move(functions)),
                           lit("</function>\n</zyphra_tool_call>")}));
    return b.build(b.add("root", seq({ref(call), repeat(seq({lit("\n"), ref(call)}), 0)})));
  } catch (const SchemaError&) {
    throw;
  } catch (const Error& e) {
    throw SchemaError(fmt::format("tools: {}", e.what()));
  }
}

}  // namespace zaya::grammar
