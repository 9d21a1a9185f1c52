// The chat-template engine: the part of Jinja2 that Hugging Face chat templates use, rendering
// byte-identical to Python's jinja2 3.1 configured as transformers' apply_chat_template configures
// it (docs/chat-templates.md): an immutable sandboxed environment with trim_blocks and
// lstrip_blocks, the loop-controls extension (break, continue), tojson as
// json.dumps(x, ensure_ascii=False, indent=…, separators=…, sort_keys=False), the globals
// raise_exception and strftime_now, and the {% generation %} block (renders its body).
//
// Contract:
//   - Template::parse reads the whole template once; a syntax error is a TemplateError naming the
//     template, the line and the column of the offending token. The parsed template is immutable;
//     copies share it; render is thread-safe (each call has its own state).
//   - render(context): the context's keys are the template's variables (JSON values; objects keep
//     their key order). Errors at render time (unknown filter or test, calling what is not
//     callable, wrong types, a limit reached, the sandbox refusing an attribute) are
//     TemplateErrors naming the line and column of the expression; raise_exception(msg) is a
//     RaisedError whose `message` is msg exactly.
//   - Limits (RenderOptions): output size, nesting depth (macro calls; expression and block
//     nesting is bounded at parse time), steps (loop iterations and evaluated expressions). A
//     hostile template gets a TemplateError, never a crash or an unbounded allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/assert.h"

namespace zaya::jinja {

// what(): "NAME:LINE:COL: message" (line and column 1-based; 0 when unknown).
struct TemplateError : Error {
  TemplateError(std::string name, int line, int column, std::string message);
  std::string template_name;
  int line = 0, column = 0;
  std::string message;
};

// raise_exception(msg) in a template: message == msg exactly.
struct RaisedError : TemplateError {
  using TemplateError::TemplateError;
};

struct RenderOptions {
  size_t max_output_bytes = size_t(8) << 20;  // also the largest string or list a template builds
  int max_depth = 256;                        // nested macro / caller calls
  uint64_t max_steps = 50'000'000;            // loop iterations + evaluated expressions
  // strftime_now(format) in the template; empty: the local time now (C strftime).
  std::function<std::string(const std::string& format)> strftime_now;
};

struct Program;  // the parsed template (ast.h)

class Template {
 public:
  static Template parse(std::string_view source, std::string name = "chat_template");
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& = {}) const;
  const std::string& name() const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace zaya::jinja
