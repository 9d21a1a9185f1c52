// Shared by the grammar tests: the tokenizers (the toy one always, the real Gemma 3 one when
// scripts/setup.sh fetched it), random walks through a grammar one allowed token at a time, and a
// small JSON Schema validator for the constructs grammar/json_schema.h supports.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "gemma3_tokenizer.h"
#include "grammar/token_mask.h"
#include "test_paths.h"

namespace zaya::test {

using ojson = nlohmann::ordered_json;

inline const Tokenizer& toy_tokenizer() {
  static const Tokenizer tok =
      Tokenizer::load(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  return tok;
}

inline const grammar::VocabIndex& toy_vocab() {
  static const grammar::VocabIndex v(toy_tokenizer());
  return v;
}

inline const grammar::VocabIndex* gemma3_vocab() {
  static const std::optional<grammar::VocabIndex> v =
      gemma3_tokenizer() ? std::optional<grammar::VocabIndex>(std::in_place, *gemma3_tokenizer())
                         : std::nullopt;
  return v ? &*v : nullptr;
}

// The Gemma 3 tokenizer is not an allowed skip reason (tests/test_skips.h): under
// ZAYA_STRICT_SKIPS=1 a missing file fails, naming the script that fetches it.
#define REQUIRE_GEMMA3_VOCAB() \
  if (!::zaya::test::gemma3_vocab()) GTEST_SKIP() << ::zaya::test::gemma3_missing_message()

// The ids mask_logits leaves allowed.
inline std::vector<int32_t> allowed_ids(const grammar::VocabIndex& v, const grammar::Matcher& m,
                                        std::span<const int32_t> eos) {
  std::vector<float> logits(size_t(v.vocab_size()), 0.0f);
  grammar::mask_logits(v, m, eos, logits);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] == 0.0f) ids.push_back(int32_t(i));
  return ids;
}

struct Walk {
  std::string text;
  bool finished = false;  // ended on an eos the mask allowed (else: the token cap)
  size_t tokens = 0;
};

// A random walk: at each step one of the allowed ids. A stand-in for a model that follows the
// grammar: half the time, when it may, it ends (eos) or writes a token holding a closing
// character, so that texts end in a few hundred tokens; otherwise any allowed id. Every chosen
// token must be accepted by the matcher (the mask never allows what the matcher refuses).
inline Walk random_walk(const grammar::VocabIndex& v, const grammar::Grammar& g,
                        std::span<const int32_t> eos, std::mt19937& rng, size_t max_tokens) {
  grammar::Matcher m(g);
  Walk w;
  for (; w.tokens < max_tokens; ++w.tokens) {
    const std::vector<int32_t> ids = allowed_ids(v, m, eos);
    EXPECT_FALSE(ids.empty()) << "dead end after: " << w.text;
    if (ids.empty()) return w;
    std::vector<int32_t> ends, closing, other;
    for (int32_t id : ids) {
      if (std::find(eos.begin(), eos.end(), id) != eos.end()) {
        ends.push_back(id);
        continue;
      }
      const std::string& b = v.bytes(id);
      (b.find_first_of("\"]},>") != std::string::npos ? closing : other).push_back(id);
    }
    if (!ends.empty() && ((other.empty() && closing.empty()) || rng() % 2 == 0)) {
      w.finished = true;
      return w;
    }
    const std::vector<int32_t>& pool =
        !closing.empty() && (other.empty() || rng() % 2 == 0) ? closing : other;
    const int32_t id = pool[rng() % pool.size()];
    EXPECT_TRUE(m.accept(v.bytes(id)))
        << "the mask allowed id " << id << " (" << testing::PrintToString(v.bytes(id))
        << ") which the matcher refuses after: " << w.text;
    w.text += v.bytes(id);
  }
  return w;
}

// ---- a small validator of the supported subset ----

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline const ojson& resolve_ref(const ojson& root, const std::string& ref) {
  return root.at(nlohmann::ordered_json::json_pointer(ref.substr(1)));
}

// Why `v` is not valid against `s` ("" when it is).
inline std::string why_invalid(const ojson& v, const ojson& s, const ojson& root) {
  if (s.is_boolean()) return s.get<bool>() ? "" : "false schema";
  if (s.value("nullable", false) && v.is_null()) return "";
  if (s.contains("$ref")) return why_invalid(v, resolve_ref(root, s["$ref"]), root);
  if (s.contains("allOf"))
    for (const ojson& sub : s["allOf"])
      if (auto w = why_invalid(v, sub, root); !w.empty()) return w;
  if (s.contains("anyOf")) {
    bool any = false;
    for (const ojson& sub : s["anyOf"]) any = any || why_invalid(v, sub, root).empty();
    if (!any) return "no anyOf branch";
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const ojson& sub : s["oneOf"]) n += why_invalid(v, sub, root).empty();
    if (n != 1) return "oneOf matched " + std::to_string(n);
  }
  if (s.contains("const") && v != s["const"]) return "not the const";
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
    return "not in enum";
  if (s.contains("type")) {
    const ojson types = s["type"].is_array() ? s["type"] : ojson::array({s["type"]});
    bool ok = false;
    for (const ojson& t : types) {
      const std::string n = t;
      ok = ok || (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
           (n == "integer" && v.is_number_integer()) || (n == "boolean" && v.is_boolean()) ||
           (n == "null" && v.is_null()) || (n == "object" && v.is_object()) ||
           (n == "array" && v.is_array());
    }
    if (!ok) return "wrong type " + std::string(v.type_name());
  }
  if (v.is_string()) {
    const std::string str = v;
    const size_t n = code_points(str);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return "too short";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return "too long";
    if (s.contains("format")) {
      static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
      static const std::string time =
          R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
      const std::string f = s["format"];
      const std::string re = f == "date"   ? date
                             : f == "time" ? time
                             : f == "date-time"
                                 ? date + "T" + time
                                 : "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
      if (!std::regex_match(str, std::regex(re))) return "not a " + f;
    }
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return "below minimum";
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return "above maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
      return "not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>())
      return "not below exclusiveMaximum";
    if (!std::isfinite(x)) return "not finite";
  }
  if (v.is_object()) {
    const ojson props = s.value("properties", ojson::object());
    for (const ojson& r : s.value("required", ojson::array()))
      if (!v.contains(r.get<std::string>())) return "missing " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto w = why_invalid(x, props[k], root); !w.empty()) return k + ": " + w;
      } else if (s.contains("additionalProperties")) {
        if (auto w = why_invalid(x, s["additionalProperties"], root); !w.empty())
          return "extra " + k + ": " + w;
      }
    }
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>()) return "few";
    if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>()) return "many";
  }
  if (v.is_array()) {
    const ojson prefix = s.value("prefixItems", ojson::array());
    for (size_t i = 0; i < v.size(); ++i) {
      const ojson& sub = i < prefix.size() ? prefix[i] : s.value("items", ojson(true));
      if (auto w = why_invalid(v[i], sub, root); !w.empty())
        return "[" + std::to_string(i) + "] " + w;
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "too many items";
  }
  return "";
}

}  // namespace zaya::test
