// parse_json: a depth pre-scan (one pass over the bytes, no recursion), then nlohmann's parser.
#include "io/json_parse.h"

namespace zaya {

int64_t json_depth_violation(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return int64_t(i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return -1;
}

nlohmann::json parse_json(std::string_view text, int max_depth) {
  if (const int64_t at = json_depth_violation(text, max_depth); at >= 0)
    throw JsonError(fmt::format("JSON nested deeper than {} levels (at byte {})", max_depth, at));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error (syntax), out_of_range (a number like 1e309 that overflows a double), ...
    throw JsonError(e.what());
  }
}

nlohmann::ordered_json parse_json_ordered(std::string_view text, int max_depth) {
  if (const int64_t at = json_depth_violation(text, max_depth); at >= 0)
    throw JsonError(fmt::format("JSON nested deeper than {} levels (at byte {})", max_depth, at));
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw JsonError(e.what());
  }
}

}  // namespace zaya
