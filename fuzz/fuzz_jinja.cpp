// Fuzz target: a chat template, parsed and rendered with a small fixed context and low limits.
// A TemplateError (a zaya::Error) is the accepted outcome of a bad template; anything else — a
// crash, a sanitizer report, another exception, a hang past libFuzzer's timeout — is a finding.
#include <string_view>

#include "fuzz_util.h"
#include "jinja/jinja.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Héllo 🌍 {{ x }}"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHi", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, null, true], "c": "s"}}}]},
      {"role": "tool", "content": "42"},
      {"role": "user", "content": ""}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<bos>",
    "eos_token": "<eos>", "enable_thinking": false})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  zaya::fuzz::expect_clean([&] {
    const zaya::jinja::Template t = zaya::jinja::Template::parse(source, "fuzz");
    zaya::jinja::RenderOptions opts;
    opts.max_output_bytes = 1 << 16;
    opts.max_depth = 32;
    opts.max_steps = 200'000;
    opts.strftime_now = [](const std::string& f) { return f; };
    (void)t.render(context(), opts);
  });
  return 0;
}
