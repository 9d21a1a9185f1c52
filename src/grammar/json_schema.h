// JSON Schema → Grammar: the grammar of the JSON texts that validate against a schema, for
// constrained decoding (response_format json_schema / json_object). docs/structured-output.md
// lists the supported subset; in short:
//  - type (one or a list), enum, const, anyOf, oneOf (as anyOf), allOf of one schema, $ref to
//    any local JSON pointer ("#", "#/$defs/…", "#/definitions/…"; recursion allowed), nullable;
//  - objects: properties in the schema's order, every required one present, the others present
//    or absent (in that order); no property the schema does not name is ever produced (with
//    properties given, whatever additionalProperties says, so the text validates under any
//    reading of it); without properties, keys are free and values follow additionalProperties
//    (absent/true: any JSON value; false: only {}), minProperties/maxProperties bounding them;
//  - arrays: items, prefixItems, minItems/maxItems; strings: minLength/maxLength (code points),
//    format date, time, date-time, uuid; integers: minimum/maximum (and the exclusive forms)
//    when the range can be written out (≤ 1000 values, or a lower bound below 10000 alone);
//    numbers: minimum 0;
//  - annotations (title, description, examples, default, $comment, …) and unknown keywords are
//    ignored, as JSON Schema says;
//  - anything else that changes validity (pattern, patternProperties, not, if/then/else,
//    multipleOf, uniqueItems, contains, other formats, …) throws SchemaError naming the
//    construct and its JSON pointer: "JSON schema at #/properties/a: 'pattern' is not supported".
// Whitespace: none, except one optional space after ':' and ',', so a model cannot spin in
// whitespace. Numbers: at most 16 integer digits, 16 fraction digits and a 2-digit exponent
// (every one parses to a finite double, every integer to an exact int64). Strings escape with
// \" \\ \/ \b \f \n \r \t and \uXXXX outside the surrogates (characters above U+FFFF are written
// as themselves).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/assert.h"
#include "grammar/grammar.h"

namespace zaya::grammar {

struct SchemaError : Error {
  using Error::Error;
};

// Nesting of any_json_object() and of values a schema leaves free ({} or true).
inline constexpr int kAnyJsonDepth = 8;
// minLength, minItems: larger values are refused; maxLength, maxItems: larger values are
// enforced as this (a shorter text is still valid).
inline constexpr int kMaxBound = 4096;

Grammar any_json_object();                                       // response_format json_object
Grammar from_json_schema(const nlohmann::ordered_json& schema);  // throws SchemaError

// The compiler behind from_json_schema, for grammars that embed JSON values (tool_call_grammar):
// the rules go into `b`; values(schema) is a reference to the rule of the JSON texts valid
// against `schema`, whose $refs resolve within `root`.
class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(GrammarBuilder& b);
  ~JsonSchemaCompiler();
  // `root` must outlive the compiler; pointer is where `root` sits in the caller's document
  // (error messages use it).
  Expr values(const nlohmann::ordered_json& root, const std::string& pointer = "");
  // `schema` sits at `pointer` inside `root`, which sits at `root_pointer`.
  Expr values_at(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& root,
                 const std::string& root_pointer, const std::string& pointer);
  Expr any_value();  // any JSON value, nested at most kAnyJsonDepth deep
  Expr any_object();
  Expr string_chars(int min, int max);  // min..max JSON string characters, without the quotes
  Expr string_format(const std::string& format, const std::string& pointer);  // unquoted; throws

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace zaya::grammar
