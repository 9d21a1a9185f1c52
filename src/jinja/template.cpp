// The public entry points (jinja.h): TemplateError's text, Template::parse and render.
#include "jinja/eval.h"

namespace zaya::jinja {

// ---- the public API ----------------------------------------------------------------------------

namespace {
std::string position_text(const std::string& name, int line, int column,
                          const std::string& message) {
  return name + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}
}  // namespace

TemplateError::TemplateError(std::string name, int l, int c, std::string msg)
    : Error(position_text(name, l, c, msg)),
      template_name(std::move(name)),
      line(l),
      column(c),
      message(std::move(msg)) {}

Template Template::parse(std::string_view source, std::string name) {
  Template t;
  t.program_ = parse_program(source, name);
  return t;
}

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderOptions& opts) const {
  Evaluator ev(*program_, opts);
  return ev.run(context);
}

const std::string& Template::name() const {
  return program_->name;
}

}  // namespace zaya::jinja
