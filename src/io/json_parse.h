// Parsing JSON that came from outside (files, HTTP bodies) with a nesting limit: nlohmann's parser
// is iterative, but destroying, copying or dumping a value nested a million deep recurses once
// per level and overflows the stack. Every reader of untrusted JSON goes through parse_json.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/assert.h"

namespace zaya {

// Arrays and objects nested deeper than this are rejected (real inputs nest at most ~6 deep).
inline constexpr int kMaxJsonDepth = 64;

// Every failure of parse_json: invalid JSON, a number that overflows a double, or nesting deeper
// than the limit. The message says which, and where (a byte offset).
struct JsonError : Error {
  using Error::Error;
};

// The byte offset at which `text` first opens an array or object deeper than max_depth, or -1.
// Exact for valid JSON; on invalid JSON it agrees with the parser up to the parser's first error,
// so a document it passes never nests deeper than max_depth once parsed.
int64_t json_depth_violation(std::string_view text, int max_depth = kMaxJsonDepth);

// Parses `text` as one JSON document; throws JsonError.
nlohmann::json parse_json(std::string_view text, int max_depth = kMaxJsonDepth);

// The same, keeping every object's key order (chat messages, tools, schemas: a template's tojson
// prints the keys in the order the client sent them).
nlohmann::ordered_json parse_json_ordered(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace zaya
