// The template corpus (tests/fixtures/chat_templates/): every template × every message set renders
// byte-identically to Python's jinja2 as transformers configures it. expected.json holds jinja2's
// outputs (and the errors of the cases that raise), written by
// scripts/reference/chat_templates/make_expected.py; the context is built here exactly as there.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "io/json_parse.h"
#include "jinja/jinja.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using zaya::jinja::RaisedError;
using zaya::jinja::RenderOptions;
using zaya::jinja::Template;
using zaya::jinja::TemplateError;

namespace {

const fs::path kCorpus = fs::path(ZAYA_TEST_FIXTURES) / "chat_templates";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// make_expected.py's strftime_now: 2025-03-14 09:26:53 (a Friday, day 73 of the year).
std::string fixed_strftime(const std::string& format) {
  std::tm tm{};
  tm.tm_year = 125;
  tm.tm_mon = 2;
  tm.tm_mday = 14;
  tm.tm_hour = 9;
  tm.tm_min = 26;
  tm.tm_sec = 53;
  tm.tm_wday = 5;
  tm.tm_yday = 72;
  char buf[256];
  const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
  return std::string(buf, n);
}

ordered_json context_of(const ordered_json& c) {
  ordered_json ctx = ordered_json::object();
  ctx["messages"] = c.at("messages");
  ctx["tools"] = c.contains("tools") ? c["tools"] : ordered_json(nullptr);
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = c.value("add_generation_prompt", true);
  ctx["bos_token"] = "<bos>";
  ctx["eos_token"] = "<eos>";
  if (c.contains("kwargs"))
    for (const auto& [k, v] : c["kwargs"].items()) ctx[k] = v;
  return ctx;
}

TEST(JinjaCorpus, EveryCaseMatchesJinja2) {
  const ordered_json expected = zaya::parse_json_ordered(read_file(kCorpus / "expected.json"));
  std::map<std::string, ordered_json> cases;
  for (const auto& e : fs::directory_iterator(kCorpus / "messages"))
    if (e.path().extension() == ".json")
      cases[e.path().stem().string()] = zaya::parse_json_ordered(read_file(e.path()));
  ASSERT_GE(cases.size(), 25u);
  RenderOptions opts;
  opts.strftime_now = fixed_strftime;
  size_t checked = 0, templates = 0;
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    if (e.path().extension() != ".jinja") continue;
    const std::string name = e.path().filename().string();
    ASSERT_TRUE(expected.contains(name))
        << name << " has no expected outputs: run make_expected.py";
    ++templates;
    const Template t = Template::parse(read_file(e.path()), name);
    for (const auto& [case_name, c] : cases) {
      SCOPED_TRACE(name + " × " + case_name);
      ASSERT_TRUE(expected[name].contains(case_name)) << "run make_expected.py";
      const ordered_json& want = expected[name][case_name];
      const ordered_json ctx = context_of(c);
      if (want.contains("output")) {
        std::string got;
        try {
          got = t.render(ctx, opts);
        } catch (const TemplateError& err) {
          ADD_FAILURE() << "threw " << err.what();
          continue;
        }
        EXPECT_EQ(got, want["output"].get<std::string>());
      } else if (want.contains("raised")) {
        try {
          t.render(ctx, opts);
          ADD_FAILURE() << "rendered; jinja2 raised " << want["raised"];
        } catch (const RaisedError& err) {
          EXPECT_EQ(err.message, want["raised"].get<std::string>());
        }
      } else {
        EXPECT_THROW(t.render(ctx, opts), TemplateError) << "jinja2: " << want["error"];
      }
      ++checked;
    }
  }
  EXPECT_GE(templates, 8u);
  EXPECT_GE(checked, 200u);
}

}  // namespace
