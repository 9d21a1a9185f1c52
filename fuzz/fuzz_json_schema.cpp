// Fuzz target: a JSON Schema (or, for an array, an OpenAI tools array) compiled to a grammar
// (src/grammar/json_schema.h, tool_call_grammar.h), then a Matcher fed the input's first bytes.
// SchemaError, JsonError and the grammar's own zaya::Error (too ambiguous) are fine; anything
// else is a finding.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "grammar/json_schema.h"
#include "grammar/tool_call_grammar.h"
#include "io/json_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  zaya::fuzz::expect_clean([&] {
    (void)zaya::parse_json(text);  // the depth limit and the number checks, as the server reads
    const auto schema = nlohmann::ordered_json::parse(text);
    const zaya::grammar::Grammar g = schema.is_array() ? zaya::grammar::zaya_tool_calls(schema, "")
                                                       : zaya::grammar::from_json_schema(schema);
    zaya::grammar::Matcher m(g);
    for (size_t i = 0; i < std::min<size_t>(size, 64); ++i)
      if (!m.accept(text.substr(i, 1))) break;
    (void)m.accepting();
  });
  return 0;
}
