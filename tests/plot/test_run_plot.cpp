// The run's page (src/plot/run_plot.h), pinned by its structure: well-formed XML, the panels with
// their titles and axes, one polyline per series with one point per value drawn, the skipped steps
// and rollbacks marked where they happened, the goodput chart's parts in proportion, and the same
// bytes for the same input.
#include "plot/run_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "plot/svg.h"
#include "plot/xml_check.h"
#include "test_util.h"

using namespace zaya::plot;
namespace xml = zaya::test::xml;

namespace {

// `n` training lines; the steps in `skip` skipped (a spike, or a NaN loss written as null),
// validation every `val_every` steps and at step 0 (0: none).
std::string metrics_text(int n, std::vector<int> skip = {}, int val_every = 0) {
  std::string t;
  if (val_every) t += "{\"step\":0,\"val_loss\":7.0}\n";
  int64_t skipped = 0;
  for (int s = 1; s <= n; ++s) {
    const bool sk = std::count(skip.begin(), skip.end(), s) > 0;
    skipped += sk;
    nlohmann::json j = {{"step", s},
                        {"loss", sk ? (s % 2 ? 500.0 : NAN) : 3 + 4.0 / s},
                        {"grad_norm", sk ? 90.0 : 0.5 + 1.0 / s},
                        {"lr", 1e-3 * std::min(1.0, s / 5.0)},
                        {"tokens", s * 4096},
                        {"tokens_per_s", 4000.0 + s},
                        {"mfu", 0.30 + 0.001 * s},
                        {"skipped", skipped},
                        {"expert_load_entropy", 0.9 + 0.0005 * s},
                        {"time", 1.5 * s}};
    t += j.dump() + "\n";
    if (val_every && s % val_every == 0)
      t += nlohmann::json{{"step", s}, {"val_loss", 3.2 + 4.0 / s}}.dump() + "\n";
  }
  return t;
}

struct Page {
  std::string svg;
  xml::Document doc;
};

Page render(const RunMetrics* m, const Goodput* g, const std::string& title = "zaya plot: run") {
  Page p;
  p.svg = run_svg(m, g, title);
  p.doc = xml::parse(p.svg);
  EXPECT_TRUE(p.doc.ok()) << p.doc.error;
  return p;
}

const xml::Element* series(const xml::Document& d, const std::string& id) {
  const int i = d.by_id("series-" + id);
  return i < 0 ? nullptr : &d.elements[i];
}

size_t points_of(const xml::Document& d, const std::string& id) {
  const xml::Element* e = series(d, id);
  return e ? xml::points(*e).size() : 0;
}

const char* const kPanels[] = {"loss",         "lr",  "grad_norm",
                               "tokens_per_s", "mfu", "expert_load_entropy"};

}  // namespace

TEST(RunPlot, PanelsAxesAndOnePolylinePerSeries) {
  const RunMetrics m = parse_metrics(metrics_text(10, {4}, 5), "metrics.jsonl");
  const Page p = render(&m, nullptr);
  const xml::Document& d = p.doc;
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.elements[0].name, "svg");
  EXPECT_EQ(d.elements[0].attr("width"), "1200");
  EXPECT_EQ(d.elements[d.by_id("page-title")].text, "zaya plot: run");
  EXPECT_NE(d.elements[d.by_id("page-summary")].text.find("10 steps (1–10)"), std::string::npos);
  EXPECT_EQ(d.find("g", "panel").size(), 6u);
  for (const char* name : kPanels) {
    const int panel = d.by_id(std::string("panel-") + name);
    ASSERT_GE(panel, 0) << name;
    EXPECT_EQ(d.find("text", "title", panel).size(), 1u) << name;
    ASSERT_EQ(d.find("g", "axis-x", panel).size(), 1u) << name;
    ASSERT_EQ(d.find("g", "axis-y", panel).size(), 1u) << name;
    EXPECT_GE(d.find("text", "tick", d.index(d.find("g", "axis-y", panel)[0])).size(), 3u) << name;
    EXPECT_GE(d.find("text", "tick", d.index(d.find("g", "axis-x", panel)[0])).size(), 3u) << name;
    EXPECT_EQ(d.find("text", "label", panel).at(0)->text, "step");
    EXPECT_EQ(d.find("g", "legend", panel).size(), 1u) << name;
    const xml::Element* s = series(d, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_TRUE(d.inside(d.index(s), panel)) << name;
  }
  EXPECT_EQ(d.find("text", "title", d.by_id("panel-loss"))[0]->text, "Loss (nats/token)");
  // One point per value drawn: the skipped step 4 is left out of loss and gradient norm.
  EXPECT_EQ(points_of(d, "loss"), 9u);
  EXPECT_EQ(points_of(d, "grad_norm"), 9u);
  EXPECT_EQ(points_of(d, "lr"), 10u);
  EXPECT_EQ(points_of(d, "tokens_per_s"), 10u);
  EXPECT_EQ(points_of(d, "mfu"), 10u);
  EXPECT_EQ(points_of(d, "expert_load_entropy"), 10u);
  EXPECT_EQ(points_of(d, "val_loss"), 3u);  // steps 0, 5, 10
  EXPECT_EQ(d.find("path", "val-point").size(), 3u);
  EXPECT_EQ(series(d, "loss_smoothed"), nullptr);  // too few points to smooth
  EXPECT_EQ(d.find("polyline").size(), 7u);
  // The step axis starts at 0 (the validation at step 0, and runs start at step 1).
  const auto xt = d.find("text", "tick", d.index(d.find("g", "axis-x", d.by_id("panel-lr"))[0]));
  EXPECT_EQ(xt.front()->text, "0");
  EXPECT_EQ(xt.back()->text, "10");
}

TEST(RunPlot, SkippedStepsAreMarkedOnTheLossPanel) {
  const RunMetrics m = parse_metrics(metrics_text(60, {7, 8, 41}), "m");
  const Page p = render(&m, nullptr);
  const int loss = p.doc.by_id("panel-loss");
  const auto skips = p.doc.find("g", "skip");
  ASSERT_EQ(skips.size(), 3u);
  std::vector<std::string> steps;
  for (const auto* e : skips) {
    EXPECT_TRUE(p.doc.inside(p.doc.index(e), loss));
    steps.push_back(e->attr("data-step"));
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"7", "8", "41"}));
  // The tooltip says what the step's values were (step 8's loss was NaN, written null).
  const std::string svg = p.svg;
  EXPECT_NE(svg.find("step 7 skipped: loss 500, grad norm 90"), std::string::npos);
  EXPECT_NE(svg.find("step 8 skipped: loss n/a"), std::string::npos);
  // The marker sits at its step: the x of step 41 on the step axis.
  const auto line = p.doc.find("line", "", p.doc.index(skips[2]));
  ASSERT_EQ(line.size(), 1u);
  // The loss points: steps 1..60 but 7, 8 and 41; step 40 is the 38th, step 42 the 39th.
  const auto pts = xml::points(*series(p.doc, "loss"));
  EXPECT_NEAR(std::stod(line[0]->attr("x1")), (pts[37].x + pts[38].x) / 2, 0.01);
  // 57 points in the loss and its smoothed line; the legend counts the skips.
  EXPECT_EQ(points_of(p.doc, "loss"), 57u);
  EXPECT_EQ(points_of(p.doc, "loss_smoothed"), 57u);
  EXPECT_NE(svg.find(">3 skipped<"), std::string::npos);
  // The spikes do not set the loss axis: its top tick is below 500.
  const auto yt = p.doc.find("text", "tick", p.doc.index(p.doc.find("g", "axis-y", loss)[0]));
  EXPECT_LT(std::stod(yt.back()->text), 10);
}

TEST(RunPlot, RollbacksFromTheFileAndTheReport) {
  std::string text = metrics_text(6);
  const std::string again = metrics_text(9);  // then steps 4..9 again
  size_t at = 0;
  for (int i = 0; i < 3; ++i) at = again.find('\n', at) + 1;
  text += again.substr(at);
  const RunMetrics m = parse_metrics(text, "m");
  ASSERT_EQ(m.rollbacks.size(), 1u);
  Goodput g;
  g.wall_s = 10;
  g.productive_s = 8;
  g.setup_s = 2;
  g.rollbacks = {{6, 3}, {8, 5}};  // the first is the file's own: drawn once
  const Page p = render(&m, &g);
  const auto rb = p.doc.find("g", "rollback");
  ASSERT_EQ(rb.size(), 2u);
  EXPECT_EQ(rb[0]->attr("data-from"), "6");
  EXPECT_EQ(rb[0]->attr("data-to"), "3");
  EXPECT_EQ(rb[1]->attr("data-to"), "5");
  EXPECT_NE(p.svg.find("rollback 6→3"), std::string::npos);
  EXPECT_EQ(points_of(p.doc, "loss"), 9u);
}

TEST(RunPlot, PointsAreWhereTheValuesAre) {
  const RunMetrics m = parse_metrics(metrics_text(10), "m");
  const Page p = render(&m, nullptr);
  const auto pts = xml::points(*series(p.doc, "loss"));
  ASSERT_EQ(pts.size(), 10u);
  for (size_t i = 1; i < pts.size(); ++i) {
    EXPECT_GT(pts[i].x, pts[i - 1].x);  // steps left to right
    EXPECT_GT(pts[i].y, pts[i - 1].y);  // a falling loss goes down the page
  }
  // Evenly spaced steps: evenly spaced x.
  EXPECT_NEAR(pts[2].x - pts[1].x, pts[9].x - pts[8].x, 0.02);
  // MFU is drawn in percent: 0.301 … 0.31 → the top tick is 31 or a little above.
  const int mfu = p.doc.by_id("panel-mfu");
  const auto yt = p.doc.find("text", "tick", p.doc.index(p.doc.find("g", "axis-y", mfu)[0]));
  EXPECT_GE(std::stod(yt.back()->text), 31);
  EXPECT_LE(std::stod(yt.back()->text), 40);
  EXPECT_EQ(yt.front()->text, "0");  // rates from 0
}

TEST(RunPlot, GradientNormOnALogScaleWhenItSpansDecades) {
  std::string text;
  for (int s = 1; s <= 20; ++s)
    text +=
        nlohmann::json{{"step", s}, {"loss", 3.0}, {"grad_norm", 1000.0 / (s * s)}}.dump() + "\n";
  const RunMetrics m = parse_metrics(text, "m");
  const Page p = render(&m, nullptr);
  const int g = p.doc.by_id("panel-grad_norm");
  EXPECT_EQ(p.doc.find("text", "title", g)[0]->text, "Gradient norm (log scale)");
  // The panels of the columns the file lacks say so, and draw no line.
  const int lr = p.doc.by_id("panel-lr");
  ASSERT_EQ(p.doc.find("text", "note", lr).size(), 1u);
  EXPECT_EQ(p.doc.find("text", "note", lr)[0]->text, "no \"lr\" values in the metrics file");
  EXPECT_EQ(series(p.doc, "lr"), nullptr);
}

TEST(RunPlot, LongRunsAreThinnedNotTruncated) {
  std::string text;
  for (int s = 1; s <= 20000; ++s)
    text +=
        nlohmann::json{{"step", s}, {"loss", s == 12345 ? 9.0 : 3.0}, {"lr", 1e-3}}.dump() + "\n";
  const RunMetrics m = parse_metrics(text, "m");
  const Page p = render(&m, nullptr);
  const auto pts = xml::points(*series(p.doc, "loss"));
  EXPECT_LE(pts.size(), 2400u);
  EXPECT_GE(pts.size(), 600u);
  const auto top = std::min_element(pts.begin(), pts.end(),
                                    [](const xml::XY& a, const xml::XY& b) { return a.y < b.y; });
  // Steps 1 and 20000 are kept (the ends), and the spike at its step.
  EXPECT_NEAR(top->x, pts.front().x + (pts.back().x - pts.front().x) * (12344.0 / 19999), 0.01);
  EXPECT_LT(p.svg.size(), 400000u);
}

TEST(RunPlot, GoodputChart) {
  Goodput g;
  g.outcome = "completed";
  g.wall_s = 100;
  g.productive_s = 60;
  g.before_launch_s = 2;
  g.setup_s = 8;
  g.after_step_s = 10;
  g.anomaly_s = 5;
  g.detection_s = 4;
  g.restart_s = 6;
  g.recomputed_s = 5;  // shutdown and other: 0, not drawn
  g.attempts = {{1, 2, 40, "crash", "rank 1: <boom> & more"}, {2, 45, 99, "completed", ""}};
  const Page p = render(nullptr, &g, "zaya plot: goodput.json");
  const xml::Document& d = p.doc;
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.find("g", "panel").size(), 1u);
  const int panel = d.by_id("panel-goodput");
  ASSERT_GE(panel, 0);
  EXPECT_EQ(d.find("text", "title", panel)[0]->text,
            "Goodput 60.0%: completed, 2 attempts, wall 1 min 40 s");
  const auto parts = d.find("rect", "goodput-part", panel);
  std::vector<std::string> names;
  double total = 0, productive = 0;
  for (const auto* r : parts) {
    names.push_back(r->attr("data-part"));
    total += std::stod(r->attr("width"));
    if (r->attr("data-part") == "productive") productive = std::stod(r->attr("width"));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"productive", "before_launch", "setup", "after_step",
                                             "anomalies", "detection", "restart", "recomputed"}));
  EXPECT_NEAR(productive / total, 0.6, 0.001);  // in proportion to the seconds
  const auto attempts = d.find("rect", "attempt", panel);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0]->attr("data-attempt"), "1");
  EXPECT_NEAR(std::stod(attempts[1]->attr("x")) - std::stod(attempts[0]->attr("x")),
              total * 43 / 100, 0.05);  // on the time axis: launched 43 s apart
  EXPECT_NE(p.svg.find("attempt 1: crash, 2.0 s – 40.0 s: rank 1: &lt;boom&gt; &amp; more"),
            std::string::npos);
  EXPECT_NE(p.svg.find("productive 1 min 00 s (60.0%)"), std::string::npos);
}

TEST(RunPlot, MetricsAndGoodputOnOnePage) {
  const RunMetrics m = parse_metrics(metrics_text(5), "m");
  Goodput g;
  g.wall_s = 1000;
  g.productive_s = 900;
  g.setup_s = 100;
  const Page p = render(&m, &g);
  EXPECT_EQ(p.doc.find("g", "panel").size(), 7u);
  EXPECT_EQ(p.doc.find("text", "label", p.doc.by_id("panel-goodput"))[0]->text,
            "minutes since the supervisor started");  // 1000 s: in minutes
  EXPECT_NE(run_summary(&m, &g).find("goodput 90.0% over 0 attempts"), std::string::npos);
}

TEST(RunPlot, TextIsEscapedAndOutputDeterministic) {
  const RunMetrics m = parse_metrics(metrics_text(3), "m");
  const std::string title = "zaya plot: runs/<a&b>\xff";
  const Page a = render(&m, nullptr, title), b = render(&m, nullptr, title);
  EXPECT_EQ(a.svg, b.svg);
  EXPECT_EQ(a.doc.elements[a.doc.by_id("page-title")].text, "zaya plot: runs/<a&b>\xEF\xBF\xBD");
}

TEST(RunPlot, OnlyValidationOrOneStep) {
  RunMetrics m = parse_metrics("{\"step\":0,\"val_loss\":6.9}\n", "m");
  Page p = render(&m, nullptr);
  EXPECT_EQ(points_of(p.doc, "val_loss"), 1u);
  EXPECT_EQ(series(p.doc, "loss"), nullptr);
  m = parse_metrics(metrics_text(1), "m");
  p = render(&m, nullptr);
  EXPECT_EQ(points_of(p.doc, "loss"), 1u);
  EXPECT_NE(run_summary(&m, nullptr).find("1 step (1–1)"), std::string::npos);
}
