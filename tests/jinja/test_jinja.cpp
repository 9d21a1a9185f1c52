// The template engine's features one by one (outputs as Python's jinja2 3.1 gives them, with
// trim_blocks and lstrip_blocks on), and every class of error: the message names the template,
// the line and the column, and nothing a template does crashes or runs away.
#include <gtest/gtest.h>

#include <string>

#include "jinja/jinja.h"

using nlohmann::ordered_json;
using zaya::jinja::RaisedError;
using zaya::jinja::RenderOptions;
using zaya::jinja::Template;
using zaya::jinja::TemplateError;

namespace {

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object(),
                   const RenderOptions& opts = {}) {
  return Template::parse(src, "t").render(ctx, opts);
}

// The error a template gives (parse or render), as what() prints it.
std::string error_of(const std::string& src, const ordered_json& ctx = ordered_json::object(),
                     const RenderOptions& opts = {}) {
  try {
    render(src, ctx, opts);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, PythonValuesPrintAsPythonDoes) {
  EXPECT_EQ(render("{{ 1 }}|{{ 1.0 }}|{{ true }}|{{ none }}|{{ x }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}"),
            "1|1.0|True|None||1e+20|0.30000000000000004");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }}|{{ {'k': 'v', 'n': [1.5]} }}|{{ (1,) }}"),
            "[1, 'a', None, True]|{'k': 'v', 'n': [1.5]}|(1,)");
  EXPECT_EQ(render("{{ [\"it's\", 'a\"b', 'x\\ny'] }}"), "[\"it's\", 'a\"b', 'x\\ny']");
  EXPECT_EQ(render("{{ 4 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ -2 ** 2 }}"),
            "2.0 -4 2 1024 4");
}

TEST(Jinja, WhitespaceControlTrimAndLstripBlocks) {
  EXPECT_EQ(render("  {% if true %}\n    yes\n  {% endif %}\nend"), "    yes\nend");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}\n"), "ab");
  EXPECT_EQ(render("x\n  {%+ if true %}y{% endif %}"), "x\n  y");
  EXPECT_EQ(render("a\n{# note #}\nb\n"), "a\nb");
  EXPECT_EQ(render("{{ 'v' }}\n{{- ' w' }}  {{- ' z' -}}  \n."), "v w z.");
  EXPECT_EQ(render("{% raw %}{{ not }}{% endraw %}"), "{{ not }}");
}

TEST(Jinja, LoopsScopesAndNamespaces) {
  EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ loop.index }}{{ x }}{{ loop.last }},"
                   "{% else %}none{% endfor %}",
                   {{"xs", {1, 2, 3, 0}}}),
            "12False,23True,");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   ordered_json::parse(R"({"d": {"b": 1, "a": 2}})")),
            "b=1;a=2;");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                   "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0134");
  // A set inside a loop is gone at the next iteration and after the loop; a namespace is not.
  EXPECT_EQ(render("{% set x = 5 %}{% for i in [1, 2] %}{% set x = x + i %}[{{ x }}]{% endfor %}"
                   "{{ x }}{% set ns = namespace(n=0) %}{% for i in [1, 2] %}"
                   "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "[6][7]53");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{{ loop.previtem }}"
                   "{{ loop.revindex0 }}{% endfor %}"),
            "a2b11a20");
}

TEST(Jinja, MacrosAndCallBlocks) {
  EXPECT_EQ(
      render("{% macro m(a, b='x') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}"),
      "[1x][12]");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}"),
            "<1><2>");
}

TEST(Jinja, StringMethodsAndFilters) {
  EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|"
                   "{{ 'a b c'.split(' ', 1) }}|{{ 'abcdef'[1:3] }}|{{ 'abc'[::-1] }}|"
                   "{{ 'héllo'[1] }}|{{ '日本語' | length }}"),
            "a b|hi|['a', 'b', '', 'c']|['a', 'b c']|bc|cba|é|3");
  EXPECT_EQ(
      render("{{ d | tojson }}|{{ d | tojson(indent=2) }}",
             ordered_json::parse(R"({"d": {"z": 1, "a": [1.0, "é\n"]}})")),
      "{\"z\": 1, \"a\": [1.0, \"é\\n\"]}|{\n  \"z\": 1,\n  \"a\": [\n    1.0,\n    \"é\\n\"\n"
      "  ]\n}");
  EXPECT_EQ(render("{{ users | selectattr('admin') | map(attribute='name') | join(', ') }}|"
                   "{{ users | rejectattr('name', 'equalto', 'al') | list | length }}|"
                   "{{ x | default('d') }}|{{ '' | default('d', true) }}|{{ '3.7' | int }}",
                   ordered_json::parse(R"({"users": [{"name": "bob", "admin": true},
                                                     {"name": "al", "admin": false}]})")),
            "bob|1|d|d|3");
}

TEST(Jinja, RaiseExceptionKeepsItsMessageAndPosition) {
  try {
    render("line one\n  {{ raise_exception('Roles must alternate') }}");
    FAIL() << "no error";
  } catch (const RaisedError& e) {
    EXPECT_EQ(e.message, "Roles must alternate");
    EXPECT_EQ(e.line, 2);
    EXPECT_EQ(std::string(e.what()), "t:2:" + std::to_string(e.column) + ": Roles must alternate");
  }
}

TEST(Jinja, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("ok\n{{ x | nosuch }}"), "t:2:8: No filter named 'nosuch'.");
  EXPECT_EQ(error_of("{{ x is nosuch }}"), "t:1:9: No test named 'nosuch'.");
  EXPECT_EQ(error_of("a\n  {% for x in y %}\nbody"),
            "t:2:6: unexpected end of template: the 'for' block opened here is not closed "
            "(expected 'endfor' or 'else')");
  EXPECT_EQ(error_of("{% frobnicate %}"), "t:1:4: unknown tag 'frobnicate'");
  EXPECT_EQ(error_of("{% endif %}"),
            "t:1:4: unexpected 'endif': no block that it closes is open here");
  EXPECT_EQ(error_of("{{ 1 +  }}"), "t:1:9: unexpected '}}', expected an expression");
  EXPECT_EQ(error_of("x {{ 'abc"), "t:1:6: unexpected end of template: unterminated string");
  EXPECT_EQ(error_of("{# never closed"), "t:1:1: Missing end of comment tag");
  EXPECT_EQ(error_of("{% break %}"), "t:1:4: 'break' outside of a for loop");
  EXPECT_EQ(error_of("{% include 'x' %}"),
            "t:1:4: the 'include' tag is not supported (docs/chat-templates.md)");
}

TEST(Jinja, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "t:1:8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(error_of("\n{{ x.y }}"), "t:2:5: 'x' is undefined");
  EXPECT_EQ(error_of("{{ 'abc'() }}"), "t:1:9: 'str' object is not callable");
  EXPECT_EQ(error_of("{% for x in 5 %}{% endfor %}"), "t:1:4: 'int' object is not iterable");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "t:1:6: integer division by zero");
  EXPECT_EQ(error_of("{{ x | tojson }}"),
            "t:1:8: Object of type Undefined is not JSON serializable");
}

TEST(Jinja, SandboxRefusesUnsafeAttributes) {
  EXPECT_EQ(render("{{ [].append }}|{{ ''.__class__ }}"), "|");  // undefined, as in jinja2
  EXPECT_EQ(error_of("{{ [].append(1) }}"),
            "t:1:13: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{{ ''.__class__.__mro__ }}"),
            "t:1:16: access to attribute '__class__' of 'str' object is unsafe.");
  EXPECT_EQ(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}"),
            "t:1:28: access to attribute 'update' of 'dict' object is unsafe.");
}

TEST(Jinja, RunawayRecursionIsAnError) {
  const std::string e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(e.find("macro calls nested deeper than 256"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("t:1:", 0), 0u) << e;
}

TEST(Jinja, HugeOutputIsAnError) {
  // 10 MB of output against the default 8 MiB limit.
  const std::string e = error_of("{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}");
  EXPECT_NE(e.find("exceeds the limit of 8388608 bytes"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("t:1:", 0), 0u) << e;
  // The same through a string that doubles in a namespace (no output at all).
  const std::string d = error_of(
      "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  EXPECT_NE(d.find("exceeds the limit"), std::string::npos) << d;
}

TEST(Jinja, StepLimitStopsRunawayLoops) {
  RenderOptions o;
  o.max_steps = 10000;
  const std::string e = error_of(
      "{% for i in range(100000) %}{% for j in range(100000) %}"
      "{% endfor %}{% endfor %}",
      ordered_json::object(), o);
  EXPECT_NE(e.find("steps"), std::string::npos) << e;
}

TEST(Jinja, DeepNestingIsAnErrorNotACrash) {
  const std::string parens(100000, '(');
  EXPECT_NE(error_of("{{ " + parens + " }}").find("nests too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_NE(error_of(ifs).find("nests too deeply"), std::string::npos);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_NE(error_of(nots + "x }}").find("nests too deeply"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                     "{% set ns.l = [ns.l] %}{% endfor %}")
                .find("nested deeper than"),
            std::string::npos);
}

TEST(Jinja, StrftimeNowAndGenerationBlock) {
  RenderOptions o;
  o.strftime_now = [](const std::string& f) { return "<" + f + ">"; };
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}", ordered_json::object(), o), "<%d %b %Y>");
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(Jinja, TemplatesAreReusableAndShared) {
  const Template t = Template::parse("{{ a }}", "t");
  const Template copy = t;
  EXPECT_EQ(t.render({{"a", 1}}), "1");
  EXPECT_EQ(copy.render({{"a", "x"}}), "x");
}

}  // namespace
