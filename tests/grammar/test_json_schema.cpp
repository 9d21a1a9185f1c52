// JSON Schema → grammar: for a dozen schemas, random walks through the vocabulary (the toy
// tokenizer, and the real Gemma 3 one when present) end in texts that parse and validate against
// the schema; hand-written texts are accepted or refused as the schema says; every unsupported
// construct is a SchemaError naming it and its JSON pointer.
#include "grammar/json_schema.h"

#include "grammar_test_util.h"

using namespace zaya;
using namespace zaya::grammar;
using namespace zaya::test;

namespace {

const char* const kSchemas[] = {
    // 0: required scalars with bounds
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
        "age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"]})",
    // 1: optional properties interleaved with required ones
    R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},
        "c":{"type":"integer"},"d":{"type":"string","maxLength":3}},"required":["b","d"],
        "additionalProperties":false})",
    // 2: enum and const of any JSON
    R"({"type":"object","properties":{"color":{"enum":["red","green","blue",3,null]},
        "v":{"const":{"a":[1,2],"é":"ü"}}},"required":["color","v"]})",
    // 3: arrays with bounds
    R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":5})",
    // 4: tuples
    R"({"type":"array","prefixItems":[{"type":"string","maxLength":3},{"type":"boolean"}],
        "items":false,"minItems":1})",
    // 5: anyOf of different types
    R"({"anyOf":[{"type":"string","maxLength":5},{"type":"integer"},
        {"type":"object","properties":{"k":{"type":"null"}},"required":["k"]}]})",
    // 6: recursion through $defs
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
        "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
        "$ref":"#/$defs/node"})",
    // 7: formats
    R"({"type":"object","properties":{"d":{"type":"string","format":"date"},
        "t":{"type":"string","format":"time"},"dt":{"type":"string","format":"date-time"},
        "u":{"type":"string","format":"uuid"}},"required":["d","t","dt","u"]})",
    // 8: type lists, nullable, exclusive integer bounds, a lower bound alone
    R"({"type":"object","properties":{"a":{"type":["string","null"],"maxLength":4},
        "b":{"type":"number","nullable":true},"c":{"type":"integer","exclusiveMinimum":-3,
        "exclusiveMaximum":3},"d":{"type":"integer","minimum":42}},"required":["a","b","c","d"]})",
    // 9: a free-form map with typed values
    R"({"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,
        "maxProperties":3})",
    // 10: any object, annotations ignored
    R"({"type":"object","title":"anything","description":"free","examples":[{}]})",
    // 11: string lengths (escapes count as one character)
    R"({"type":"string","minLength":2,"maxLength":6})",
    // 12: definitions, oneOf of disjoint branches, allOf of one schema
    R"({"definitions":{"p":{"type":"object","properties":{"x":{"allOf":[{"type":"integer",
        "minimum":5,"maximum":9}]}},"required":["x"]}},
        "oneOf":[{"$ref":"#/definitions/p"},{"type":"boolean"}]})",
    // 13: nested arrays of objects with a non-negative number
    R"({"type":"object","properties":{"rows":{"type":"array","maxItems":3,"items":{
        "type":"object","properties":{"id":{"type":"integer","minimum":1},
        "score":{"type":"number","minimum":0}},"required":["id","score"]}}},"required":["rows"]})",
};

void walk_schemas(const VocabIndex& vocab, std::span<const int32_t> eos, int walks,
                  size_t max_tokens) {
  for (size_t i = 0; i < std::size(kSchemas); ++i) {
    const ojson schema = ojson::parse(kSchemas[i]);
    const Grammar g = from_json_schema(schema);
    std::mt19937 rng(1234 + unsigned(i));
    int finished = 0;
    for (int w = 0; w < walks; ++w) {
      const Walk walk = random_walk(vocab, g, eos, rng, max_tokens);
      if (!walk.finished) continue;
      ++finished;
      ojson v;
      try {
        v = ojson::parse(walk.text);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "schema " << i << ": output does not parse: " << walk.text << ": "
                      << e.what();
        continue;
      }
      EXPECT_EQ(why_invalid(v, schema, schema), "") << "schema " << i << ": " << walk.text;
    }
    // The walk ends most texts well within the cap (the grammar lets a model finish).
    EXPECT_GE(finished, walks / 2) << "schema " << i;
  }
}

bool matches(const Grammar& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.accepting();
}

}  // namespace

TEST(JsonSchema, RandomWalksValidateToyTokenizer) {
  const int32_t eos[] = {toy_tokenizer().eos_id()};
  walk_schemas(toy_vocab(), eos, 12, 600);
}

TEST(JsonSchema, RandomWalksValidateGemma3) {
  REQUIRE_GEMMA3_VOCAB();
  const int32_t eos[] = {1, 106};
  walk_schemas(*gemma3_vocab(), eos, 3, 300);
}

TEST(JsonSchema, AnyJsonObject) {
  const Grammar g = any_json_object();
  for (const char* s : {"{}", R"({"a":1})", R"({"a": [1, {"b": null}], "c":"x\n\u00e9"})",
                        R"({"k":-0.5e+12,"t":true,"f":false,"e":[]})"})
    EXPECT_TRUE(matches(g, s)) << s;
  for (const char* s : {"[]", "1", R"({"a":1,})", R"({"a" :1})", R"({ "a":1})", R"({"a":01})",
                        R"({"a":"\ud800"})", "{\"a\":\"\x01\"}", R"({"a":1e999})"})
    EXPECT_FALSE(matches(g, s)) << s;
  // Nesting is bounded.
  std::string deep = R"({"a":)";
  for (int i = 0; i < kAnyJsonDepth; ++i) deep += "[";
  EXPECT_FALSE(Matcher(g).accept(deep + "["));
  const int32_t eos[] = {toy_tokenizer().eos_id()};
  std::mt19937 rng(5);
  for (int w = 0; w < 10; ++w) {
    const Walk walk = random_walk(toy_vocab(), g, eos, rng, 600);
    if (walk.finished) {
      EXPECT_TRUE(ojson::parse(walk.text).is_object()) << walk.text;
    }
  }
}

TEST(JsonSchema, HandWrittenTexts) {
  const Grammar person = from_json_schema(ojson::parse(kSchemas[0]));
  EXPECT_TRUE(matches(person, R"({"name":"Ann","age":41})"));
  EXPECT_TRUE(matches(person, R"({"name": "Ann", "age": 150})"));
  EXPECT_FALSE(matches(person, R"({"age":41,"name":"Ann"})"));   // schema order
  EXPECT_FALSE(matches(person, R"({"name":"Ann"})"));            // required
  EXPECT_FALSE(matches(person, R"({"name":"Ann","age":151})"));  // maximum
  EXPECT_FALSE(matches(person, R"({"name":"Ann","age":-1})"));   // minimum
  EXPECT_FALSE(matches(person, R"({"name":"Ann","age":41,"x":1})"));
  EXPECT_FALSE(matches(person, R"({"name":"0123456789abc","age":1})"));  // maxLength
  EXPECT_FALSE(matches(person, R"({"name":"Ann",  "age":1})"));          // one space at most
  const Grammar opt = from_json_schema(ojson::parse(kSchemas[1]));
  EXPECT_TRUE(matches(opt, R"({"b":null,"d":""})"));
  EXPECT_TRUE(matches(opt, R"({"a":true,"b":null,"c":-7,"d":"xyz"})"));
  EXPECT_TRUE(matches(opt, R"({"b":null,"c":0,"d":"x"})"));
  EXPECT_FALSE(matches(opt, R"({"a":true,"d":"x"})"));
  EXPECT_FALSE(matches(opt, R"({,"b":null,"d":"x"})"));
  const Grammar len = from_json_schema(ojson::parse(kSchemas[11]));
  EXPECT_TRUE(matches(len, R"("\n\u00e9")"));  // two characters
  EXPECT_FALSE(matches(len, R"("\n")"));
  EXPECT_TRUE(matches(len, "\"世界😀ab\""));
  EXPECT_FALSE(matches(len, R"("abcdefg")"));
  const Grammar fmt = from_json_schema(ojson::parse(kSchemas[7]));
  EXPECT_TRUE(matches(
      fmt,
      R"({"d":"2024-12-31","t":"23:59:59Z","dt":"1999-01-01T00:00:00.5+05:30","u":"0f8fad5b-d9cb-469f-a165-70867728950e"})"));
  EXPECT_FALSE(matches(
      fmt,
      R"({"d":"2024-02-30","t":"23:59:59Z","dt":"1999-01-01T00:00:00Z","u":"0f8fad5b-d9cb-469f-a165-70867728950e"})"));
  EXPECT_FALSE(matches(
      fmt,
      R"({"d":"2024-12-31","t":"24:00:00Z","dt":"1999-01-01T00:00:00Z","u":"0f8fad5b-d9cb-469f-a165-70867728950e"})"));
  const Grammar tuple = from_json_schema(ojson::parse(kSchemas[4]));
  EXPECT_TRUE(matches(tuple, R"(["ab"])"));
  EXPECT_TRUE(matches(tuple, R"(["ab", true])"));
  EXPECT_FALSE(matches(tuple, R"([])"));
  EXPECT_FALSE(matches(tuple, R"(["ab",true,false])"));
  const Grammar arr = from_json_schema(ojson::parse(kSchemas[3]));
  EXPECT_TRUE(matches(arr, "[1,2.5,-3e-7,4,5]"));
  EXPECT_FALSE(matches(arr, "[1,2,3,4,5,6]"));
  EXPECT_FALSE(matches(arr, "[]"));
  const Grammar low = from_json_schema(ojson::parse(R"({"type":"integer","minimum":42})"));
  for (const char* s : {"42", "99", "100", "123456"}) EXPECT_TRUE(matches(low, s)) << s;
  for (const char* s : {"41", "0", "-50", "9", "042"}) EXPECT_FALSE(matches(low, s)) << s;
  const Grammar tree = from_json_schema(ojson::parse(kSchemas[6]));
  EXPECT_TRUE(matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3},{"v":4}]})"));
}

TEST(JsonSchema, UnsupportedConstructsAreNamed) {
  const std::pair<const char*, std::vector<const char*>> cases[] = {
      {R"({"type":"string","pattern":"^a+$"})", {"'pattern'", "#:"}},
      {R"({"type":"object","patternProperties":{"^x":{}}})", {"'patternProperties'", "#:"}},
      {R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})",
       {"'not'", "#/properties/a"}},
      {R"({"if":{"type":"string"},"then":{"maxLength":2}})", {"'if'"}},
      {R"({"type":"integer","multipleOf":3})", {"'multipleOf'"}},
      {R"({"type":"array","items":{"type":"number","maximum":3}})", {"'maximum'", "#/items"}},
      {R"({"type":"array","uniqueItems":true})", {"'uniqueItems'"}},
      {R"({"type":"array","contains":{"type":"integer"}})", {"'contains'"}},
      {R"({"allOf":[{"type":"object"},{"required":["a"]}]})", {"'allOf'"}},
      {R"({"type":"string","format":"email"})", {"'format'", "email"}},
      {R"({"$ref":"https://example.com/s.json"})", {"'$ref'"}},
      {R"({"$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/b"}}})",
       {"'$ref' '#/$defs/b' points to nothing", "#/properties/x"}},
      {R"({"type":"integer","minimum":0,"maximum":100000})", {"'maximum'"}},
      {R"({"type":"string","minLength":100000})", {"'minLength'"}},
      {R"({"type":"object","properties":{"a":{}},"minProperties":2})", {"'minProperties'"}},
      {R"({"type":"object","propertyNames":{"maxLength":3}})", {"'propertyNames'"}},
      {R"({"type":"object","dependentRequired":{"a":["b"]}})", {"'dependentRequired'"}},
      {R"({"type":"array","unevaluatedItems":false})", {"'unevaluatedItems'"}},
      {R"({"type":"string","anyOf":[{"maxLength":2}]})", {"'type'", "beside 'anyOf'"}},
      {R"({"type":"strnig"})", {"unknown type 'strnig'", "#/type"}},
      {R"({"type":"object","properties":[]})", {"'properties' must be an object"}},
      {R"({"enum":[]})", {"'enum' must be a non-empty array"}},
      {R"({"type":"string","maxLength":-1})", {"'maxLength' must be a non-negative integer"}},
      {R"(false)", {"accepts nothing"}},
      {R"(7)", {"must be an object or a boolean"}},
      {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", {"left-recursive"}},
      {R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})", {"left-recursive"}},
  };
  for (const auto& [text, needles] : cases) {
    try {
      from_json_schema(ojson::parse(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const SchemaError& e) {
      for (const char* n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << text << " → " << e.what() << " (wanted " << n << ")";
    }
  }
}

TEST(JsonSchema, IgnoredKeywordsChangeNothing) {
  const Grammar plain = from_json_schema(ojson::parse(R"({"type":"integer"})"));
  const Grammar annotated = from_json_schema(ojson::parse(
      R"({"type":"integer","title":"n","description":"d","default":3,"examples":[1],
          "$comment":"c","deprecated":false,"x-vendor":{"anything":1}})"));
  for (const char* s : {"0", "-12", "7", "1.5", "\"3\"", ""})
    EXPECT_EQ(matches(plain, s), matches(annotated, s)) << s;
}
