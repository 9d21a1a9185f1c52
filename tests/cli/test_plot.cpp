// `zaya plot` end to end (src/cli/plot.cpp): a run directory, a metrics file or a goodput report
// in, an SVG out where the docs say, its path the one line on stdout; the page opens (it is
// well-formed XML with the run's panels, and rsvg-convert renders it); and every bad input is one
// "zaya: error:" line naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "plot/xml_check.h"
#include "resilience/goodput.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// `n` metrics lines as the trainer writes them; step 5 skipped.
std::string metrics(int n) {
  std::string t;
  for (int s = 1; s <= n; ++s)
    t += nlohmann::json{{"step", s},
                        {"loss", s == 5 ? 80.0 : 3 + 4.0 / s},
                        {"grad_norm", 0.5 + 1.0 / s},
                        {"lr", 1e-3},
                        {"tokens", s * 4096},
                        {"tokens_per_s", 4000.0},
                        {"mfu", 0.35},
                        {"skipped", s >= 5 ? 1 : 0},
                        {"expert_load_entropy", 0.95},
                        {"time", 1.5 * s}}
             .dump() +
         "\n";
  return t;
}

// A goodput report as `zaya supervise` writes it (one completed attempt).
std::string goodput() {
  GoodputInput in;
  in.end_s = 30;
  AttemptRecord a;
  a.launch_s = 1;
  a.end_s = 29;
  a.events = parse_events(
      "{\"event\":\"start\",\"setup_s\":2}\n{\"event\":\"step\",\"step\":1,\"step_s\":20,"
      "\"after_s\":1}\n{\"event\":\"done\"}\n");
  in.attempts = {a};
  return goodput_report(in).dump(2);
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

struct Fixture {
  ScratchDir dir;
  fs::path run = fs::path(dir.path) / "runs" / "tiny";
  CliResult zaya(const std::string& args) { return run_zaya_in(dir.path, args); }
};

xml::Document read_svg(const fs::path& p) {
  const xml::Document d = xml::parse(slurp(p.string()));
  EXPECT_TRUE(d.ok()) << p << ": " << d.error;
  return d;
}

size_t points(const xml::Document& d, const std::string& id) {
  const int i = d.by_id("series-" + id);
  return i < 0 ? 0 : xml::points(d.elements[i]).size();
}

}  // namespace

TEST(CliPlot, ARunDirectory) {
  Fixture f;
  write(f.run / "metrics.jsonl", metrics(12));
  const CliResult r = f.zaya("plot " + shell_quote(f.run.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, (f.run / "plot.svg").string() + "\n");  // the result: the path, on stdout
  EXPECT_NE(r.err.find("plot: 12 steps (1–12)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 skipped"), std::string::npos) << r.err;
  const xml::Document d = read_svg(f.run / "plot.svg");
  for (const char* panel :
       {"loss", "lr", "grad_norm", "tokens_per_s", "mfu", "expert_load_entropy"})
    EXPECT_GE(d.by_id(std::string("panel-") + panel), 0) << panel;
  EXPECT_EQ(points(d, "loss"), 11u);  // step 5 skipped: marked, not drawn
  EXPECT_EQ(points(d, "lr"), 12u);
  const auto skips = d.find("g", "skip");
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_EQ(skips[0]->attr("data-step"), "5");
}

TEST(CliPlot, AMetricsFileOutAndQuiet) {
  Fixture f;
  write(f.run / "metrics.jsonl", metrics(3));
  const std::string file = shell_quote((f.run / "metrics.jsonl").string());
  CliResult r = f.zaya("plot " + file);  // beside the file
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, (f.run / "plot.svg").string() + "\n");

  const std::string out = (fs::path(f.dir.path) / "elsewhere.svg").string();
  r = f.zaya("plot " + file + " --out " + shell_quote(out) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, out + "\n");
  EXPECT_EQ(r.err, "");  // --quiet: the result line only
  EXPECT_EQ(points(read_svg(out), "loss"), 3u);

  r = f.zaya("plot " + file + " --out -");  // the page itself on stdout
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<?xml", 0), 0u);
  EXPECT_TRUE(xml::parse(r.out).ok());

  // The checkpoint directory of the run finds the metrics file one level up.
  fs::create_directories(f.run / "checkpoints" / "step_00000003");
  r = f.zaya("plot " + shell_quote((f.run / "checkpoints").string()) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, (f.run / "checkpoints" / "plot.svg").string() + "\n");
}

TEST(CliPlot, TheGoodputReport) {
  Fixture f;
  write(f.run / "metrics.jsonl", metrics(3));
  write(f.run / "supervise" / "goodput.json", goodput());
  // Found in the run directory's supervise folder, drawn below the metrics.
  CliResult r = f.zaya("plot " + shell_quote(f.run.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  xml::Document d = read_svg(f.run / "plot.svg");
  EXPECT_GE(d.by_id("panel-loss"), 0);
  EXPECT_GE(d.by_id("panel-goodput"), 0);
  EXPECT_EQ(d.find("rect", "attempt").size(), 1u);
  EXPECT_NE(r.err.find("goodput"), std::string::npos) << r.err;

  // The supervisor's folder alone: the goodput chart, and a note on stderr.
  r = f.zaya("plot " + shell_quote((f.run / "supervise").string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("no metrics file (train.metrics writes one)"), std::string::npos) << r.err;
  d = read_svg(f.run / "supervise" / "plot.svg");
  EXPECT_EQ(d.find("g", "panel").size(), 1u);

  // --goodput alone: the plot beside the report.
  fs::remove(f.run / "supervise" / "plot.svg");
  r = f.zaya("plot --goodput " + shell_quote((f.run / "supervise" / "goodput.json").string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, (f.run / "supervise" / "plot.svg").string() + "\n");
}

TEST(CliPlot, ALiveRunsIncompleteLastLine) {
  Fixture f;
  const std::string text = metrics(4);
  write(f.run / "metrics.jsonl", text.substr(0, text.size() - 30));  // line 4 half written
  const CliResult r = f.zaya("plot " + shell_quote(f.run.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("the last line is incomplete"), std::string::npos) << r.err;
  EXPECT_EQ(points(read_svg(f.run / "plot.svg"), "lr"), 3u);
}

TEST(CliPlot, Errors) {
  Fixture f;
  const std::string run = f.run.string();
  expect_user_error(f.zaya("plot"), "name a run");
  expect_user_error(f.zaya("plot " + shell_quote(run)), "no such file or directory");
  fs::create_directories(f.run);
  expect_user_error(f.zaya("plot " + shell_quote(run)), "train.metrics");
  write(f.run / "metrics.jsonl", "");
  expect_user_error(f.zaya("plot " + shell_quote(run)), run + "/metrics.jsonl: empty");
  write(f.run / "metrics.jsonl", metrics(1) + "{\"step\": 2, \"loss\": \"x\"}\n");
  expect_user_error(f.zaya("plot " + shell_quote(run)),
                    run + "/metrics.jsonl line 2: \"loss\" is a string");
  write(f.run / "metrics.jsonl", metrics(2));
  expect_user_error(f.zaya("plot " + shell_quote(run) + " --out /nonexistent/dir/x.svg"),
                    "--out /nonexistent/dir/x.svg: directory /nonexistent/dir does not exist");
  expect_user_error(
      f.zaya("plot " + shell_quote(run) + " --goodput " + shell_quote(run + "/no.json")),
      "--goodput " + run + "/no.json: no such file");
  write(f.run / "goodput.json", "{\"outcome\": \"completed\"}");
  expect_user_error(f.zaya("plot " + shell_quote(run)), run + "/goodput.json: no \"wall_s\"");
  expect_user_error(f.zaya("plot " + shell_quote(run) + " --frobnicate"), "--frobnicate");
  EXPECT_FALSE(fs::exists(f.run / "plot.svg"));  // nothing written on an error
}

// The page renders: rsvg-convert (Debian's librsvg2-bin, installed by scripts/setup.sh) reads the
// SVG and writes a PNG of the page's size.
TEST(CliPlot, RsvgConvertRendersThePage) {
  Fixture f;
  write(f.run / "metrics.jsonl", metrics(60));
  write(f.run / "supervise" / "goodput.json", goodput());
  ASSERT_EQ(f.zaya("plot " + shell_quote(f.run.string())).code, 0);
  ASSERT_EQ(std::system("command -v rsvg-convert >/dev/null 2>&1"), 0)
      << "rsvg-convert not found: scripts/setup.sh installs it (Debian package librsvg2-bin)";
  const fs::path png = fs::path(f.dir.path) / "plot.png";
  const std::string cmd = "rsvg-convert -o " + shell_quote(png.string()) + " " +
                          shell_quote((f.run / "plot.svg").string()) + " 2>" +
                          shell_quote(f.dir / "rsvg.err");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(f.dir / "rsvg.err");
  const std::string bytes = slurp(png.string());
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  const auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
           (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1200u);  // the IHDR width: the page's
  EXPECT_GT(be32(20), 1000u);  // six panels and the goodput chart
  EXPECT_EQ(slurp(f.dir / "rsvg.err"), "");
}
