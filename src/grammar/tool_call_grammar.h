// The grammar of ZAYA1's tool calls (the Qwen3-Coder XML body inside ZAYA's wrapper tokens), for
// tool_choice "required" or a named function:
//   <zyphra_tool_call>\n<function=NAME>\n
//   <parameter=ARG>\nVALUE\n</parameter>\n      (one per argument)
//   </function>\n</zyphra_tool_call>
// one or more calls, separated by "\n". NAME is one of the declared tools (or only_name); the
// arguments follow the order of the tool's parameters.properties, every required one present,
// the others present or absent; no argument the schema does not name. VALUE is, for a parameter
// whose schema's type is "string", the raw text (never containing "</parameter>"; minLength,
// maxLength, enum and format as json_schema.h reads them, without quotes or escapes), and for
// any other parameter its JSON text by its schema (json_schema.h, same subset and whitespace).
// A string parameter without maxLength is unbounded, as a real model's file contents may be.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#include "grammar/json_schema.h"

namespace zaya::grammar {

// tools: the OpenAI tools array ([{type: "function", function: {name, description,
// parameters}}]); only_name: "" for any declared tool. Throws SchemaError (a 400 for the server)
// naming the JSON pointer of what is wrong or unsupported ("#/tools/0/function/parameters/…").
Grammar zaya_tool_calls(const nlohmann::ordered_json& tools, std::string_view only_name);

}  // namespace zaya::grammar
