// The SVG writer (src/plot/svg.h): escaping, number and tick formatting, nice ticks, scales,
// decimation, and a Frame's structure (well-formed, axes, legend placement, clamped polylines).
#include "plot/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "plot/xml_check.h"

using namespace zaya::plot;
namespace xml = zaya::test::xml;

TEST(Svg, EscapesTheFiveCharactersAndBadBytes) {
  EXPECT_EQ(xml_escape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(xml_escape("step 1 → 2 ▼ é"), "step 1 → 2 ▼ é");  // valid UTF-8 kept
  EXPECT_EQ(xml_escape("tab\there\nnl"), "tab\there\nnl");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(xml_escape("a\xff"
                       "b"),
            "a" + fffd + "b");  // not UTF-8
  EXPECT_EQ(xml_escape("a\x01"
                       "b"),
            "a" + fffd + "b");                                // a control character
  EXPECT_EQ(xml_escape("\xC0\xAF"), fffd + fffd);             // overlong '/'
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), fffd + fffd + fffd);  // a surrogate
  EXPECT_EQ(xml_escape("\xEF\xBF\xBE"), fffd + fffd + fffd);  // U+FFFE is not XML
  EXPECT_EQ(xml_escape("\xE2\x86"), fffd + fffd);             // cut short
  EXPECT_EQ(xml_escape(std::string("a\0b", 3)), "a" + fffd + "b");
}

TEST(Svg, NumbersHaveAtMostTwoDecimals) {
  EXPECT_EQ(svg_number(12.5), "12.5");
  EXPECT_EQ(svg_number(3), "3");
  EXPECT_EQ(svg_number(1234.567), "1234.57");
  EXPECT_EQ(svg_number(-0.25), "-0.25");
  EXPECT_EQ(svg_number(-0.001), "0");
  EXPECT_EQ(svg_number(NAN), "0");
  EXPECT_EQ(svg_number(INFINITY), "0");
}

TEST(Svg, TickLabelsFollowTheStep) {
  EXPECT_EQ(tick_label(0, 0.1), "0");
  EXPECT_EQ(tick_label(1e-17, 0.1), "0");  // float noise at zero
  EXPECT_EQ(tick_label(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(tick_label(-0.2, 0.1), "-0.2");
  EXPECT_EQ(tick_label(0.5, 0.5), "0.5");
  EXPECT_EQ(tick_label(2.5, 0.25), "2.50");
  EXPECT_EQ(tick_label(150, 50), "150");
  EXPECT_EQ(tick_label(1500, 500), "1500");
  EXPECT_EQ(tick_label(25000, 5000), "25k");
  EXPECT_EQ(tick_label(4000, 1000), "4k");
  EXPECT_EQ(tick_label(1.5e6, 5e5), "1.5M");
  EXPECT_EQ(tick_label(3e9, 1e9), "3G");
  EXPECT_EQ(tick_label(5e5, 5e5), "500k");  // each value its own suffix
  EXPECT_EQ(tick_label(1e6, 5e5), "1M");
  EXPECT_EQ(tick_label(2.5e6, 2.5e5), "2.5M");
  EXPECT_EQ(tick_label(0.002, 0.002), "0.002");
  EXPECT_EQ(tick_label(2e-4, 1e-4), "2e-4");
  EXPECT_EQ(tick_label(1e-3, 2e-4), "1e-3");
  EXPECT_EQ(tick_label(1.5e-5, 5e-6), "1.5e-5");
  EXPECT_EQ(tick_label(8e-4, 2e-4), "8e-4");
}

TEST(Svg, ShortNumbersAndDurations) {
  EXPECT_EQ(short_number(3.91234), "3.912");
  EXPECT_EQ(short_number(45210), "45.2k");
  EXPECT_EQ(short_number(1351680), "1.35M");
  EXPECT_EQ(short_number(3.12e-4), "3.12e-4");
  EXPECT_EQ(short_number(0.001), "0.001");
  EXPECT_EQ(short_number(0), "0");
  EXPECT_EQ(short_number(NAN), "n/a");
  EXPECT_EQ(duration_label(42.14), "42.1 s");
  EXPECT_EQ(duration_label(185), "3 min 05 s");
  EXPECT_EQ(duration_label(7620), "2 h 07 min");
  EXPECT_EQ(duration_label(-1), "n/a");
}

TEST(Svg, NiceTicksCoverTheRange) {
  Ticks t = nice_ticks(0.13, 0.97);
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_DOUBLE_EQ(t.hi, 1);
  ASSERT_EQ(t.values.size(), 6u);
  EXPECT_NEAR(t.values[3], 0.6, 1e-12);

  t = nice_ticks(2.8, 6.98);
  EXPECT_DOUBLE_EQ(t.step, 1);
  EXPECT_EQ(t.values, (std::vector<double>{2, 3, 4, 5, 6, 7}));

  t = nice_ticks(5, 5);  // an empty range is widened around the value
  EXPECT_LT(t.lo, 5);
  EXPECT_GT(t.hi, 5);
  t = nice_ticks(NAN, 1);
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_DOUBLE_EQ(t.hi, 1);

  // Any range: the ticks cover it, 1, 2 or 5 × 10^k apart, 3 to 11 of them.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mag(-8, 8), unit(0, 1);
  for (int i = 0; i < 2000; ++i) {
    const double scale = std::pow(10.0, mag(rng));
    const double a = (unit(rng) - 0.5) * scale, b = a + unit(rng) * scale + 1e-300;
    const Ticks r = nice_ticks(a, b);
    ASSERT_LE(r.lo, a);
    ASSERT_GE(r.hi, b);
    ASSERT_GE(r.values.size(), 3u) << a << " " << b;
    ASSERT_LE(r.values.size(), 11u) << a << " " << b;
    const double m = r.step / std::pow(10.0, std::floor(std::log10(r.step) + 1e-9));
    ASSERT_TRUE(std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 5) < 1e-9)
        << r.step;
    ASSERT_NEAR(r.values.front(), r.lo, r.step * 1e-9);
    ASSERT_NEAR(r.values.back(), r.hi, r.step * 1e-9);
  }
}

TEST(Svg, InnerTicksStayInside) {
  const Ticks t = inner_ticks(1, 330, 6);
  EXPECT_DOUBLE_EQ(t.step, 50);
  EXPECT_EQ(t.values, (std::vector<double>{50, 100, 150, 200, 250, 300}));
  EXPECT_DOUBLE_EQ(t.lo, 1);
  EXPECT_DOUBLE_EQ(t.hi, 330);
}

TEST(Svg, LogTicksAtDecades) {
  Ticks t = log_ticks(0.3, 40);  // three decades: decade ticks only
  EXPECT_EQ(t.values, (std::vector<double>{0.1, 1, 10, 100}));
  EXPECT_DOUBLE_EQ(t.lo, 0.1);
  EXPECT_DOUBLE_EQ(t.hi, 100);
  t = log_ticks(0.5, 3);  // fewer: 1, 2, 5 in each
  ASSERT_EQ(t.values.size(), 7u);
  EXPECT_DOUBLE_EQ(t.values[1], 0.2);
  EXPECT_DOUBLE_EQ(t.values[2], 0.5);
  t = log_ticks(1e-20, 1e20);  // forty decades: about eight ticks
  EXPECT_LE(t.values.size(), 9u);
  EXPECT_GE(t.values.size(), 5u);
}

TEST(Svg, ScalesMapDataToPixels) {
  const Scale lin{0, 10, 100, 200, false};
  EXPECT_DOUBLE_EQ(lin(0), 100);
  EXPECT_DOUBLE_EQ(lin(2.5), 125);
  const Scale down{0, 1, 300, 100, false};  // y grows upwards
  EXPECT_DOUBLE_EQ(down(1), 100);
  const Scale log{1, 100, 0, 100, true};
  EXPECT_DOUBLE_EQ(log(10), 50);
  EXPECT_DOUBLE_EQ(log(100), 100);
}

TEST(Svg, DecimationKeepsTheShapeAndTheSpikes) {
  std::vector<Point> p;
  for (int i = 0; i < 100000; ++i) p.push_back({double(i), std::sin(i * 0.001)});
  p[51234].y = 40;   // a spike
  p[77777].y = -40;  // a dip
  const std::vector<Point> d = decimate(p, 500);
  EXPECT_LE(d.size(), 2000u);
  EXPECT_GE(d.size(), 500u);
  EXPECT_DOUBLE_EQ(d.front().x, 0);
  EXPECT_DOUBLE_EQ(d.back().x, 99999);
  bool spike = false, dip = false;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) {
      ASSERT_LT(d[i - 1].x, d[i].x);
    }
    spike |= d[i].y == 40;
    dip |= d[i].y == -40;
  }
  EXPECT_TRUE(spike);
  EXPECT_TRUE(dip);
  const std::vector<Point> few(p.begin(), p.begin() + 1999);
  EXPECT_EQ(decimate(few, 500).size(), 1999u);  // under 4 per bucket: as it is
}

TEST(Svg, DocumentIsWellFormed) {
  Svg svg(300, 200, "a <title> & more");
  svg.open("g", {{"id", "x\"y"}});
  svg.text(10, 20, "1 < 2 & 3 > 2 \xff");
  svg.open("g", {});
  const std::string doc = svg.finish();  // closes both groups and the root
  const xml::Document d = xml::parse(doc);
  ASSERT_TRUE(d.ok()) << d.error << "\n" << doc;
  EXPECT_EQ(d.elements[0].name, "svg");
  EXPECT_EQ(d.elements[0].attr("width"), "300");
  EXPECT_EQ(d.elements[0].attr("viewBox"), "0 0 300 200");
  EXPECT_EQ(d.find("title")[0]->text, "a <title> & more");
  EXPECT_EQ(d.by_id("x\"y") >= 0, true);
  EXPECT_EQ(d.find("text")[0]->text, "1 < 2 & 3 > 2 \xEF\xBF\xBD");
  // The checker is strict: a broken document is caught.
  EXPECT_FALSE(xml::parse("<svg><g></svg>").ok());
  EXPECT_FALSE(xml::parse("<svg a=\"1\" a=\"2\"/>").ok());
  EXPECT_FALSE(xml::parse("<svg>1 & 2</svg>").ok());
  EXPECT_FALSE(xml::parse("<svg/><svg/>").ok());
}

namespace {

Frame::Spec spec(std::vector<LegendItem> legend = {}) {
  Frame::Spec s;
  s.id = "panel-test";
  s.title = "Loss (nats/token)";
  s.x = 10, s.y = 20, s.w = 560, s.h = 280;
  s.x_lo = 0, s.x_hi = 100, s.y_lo = 2.3, s.y_hi = 6.9;
  s.legend = std::move(legend);
  return s;
}

}  // namespace

TEST(Svg, FrameDrawsAxesSeriesAndMarkers) {
  Svg svg(600, 320, "t");
  double top = 0, left = 0, right = 0, bottom = 0;
  {
    Frame f(svg, spec({{"train 2.9", color::kBlue, LegendItem::Line}}));
    top = f.top(), left = f.left(), right = f.right(), bottom = f.bottom();
    f.polyline("loss", {{0, 6.9}, {50, 4}, {100, 2.3}, {100, 100}}, color::kBlue);
    f.top_marker(40, color::kRed, "skip", "step 40 skipped", {{"data-step", "40"}});
    f.vrule(30, color::kPurple, "rollback", "rollback 33→30", "tip", {{"data-to", "30"}});
    f.marker(50, 4, MarkerShape::Circle, color::kOrange, "val-point", "v");
  }
  const xml::Document d = xml::parse(svg.finish());
  ASSERT_TRUE(d.ok()) << d.error;
  const int panel = d.by_id("panel-test");
  ASSERT_GE(panel, 0);
  EXPECT_EQ(d.find("text", "title", panel)[0]->text, "Loss (nats/token)");
  // y: 2 … 7 by 1 (nice, widened); x: 0 … 100 by 20 (inside), and the axis label.
  const auto ticks = [&](const char* axis) {
    std::vector<std::string> out;
    const int a = d.index(d.find("g", axis, panel).at(0));
    for (const auto* e : d.find("text", "tick", a)) out.push_back(e->text);
    return out;
  };
  const std::vector<std::string> ys = ticks("axis-y"), xs = ticks("axis-x");
  EXPECT_EQ(ys, (std::vector<std::string>{"2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(xs, (std::vector<std::string>{"0", "20", "40", "60", "80", "100"}));
  EXPECT_EQ(d.find("text", "label")[0]->text, "step");
  // The legend fits beside the title: the plot starts right under the title row.
  EXPECT_DOUBLE_EQ(top, 20 + 40);
  EXPECT_EQ(d.find("g", "legend").size(), 1u);

  const auto lines = d.find("polyline", "series");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]->attr("id"), "series-loss");
  const std::vector<xml::XY> pts = xml::points(*lines[0]);
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_NEAR(pts[0].x, left, 0.01);
  EXPECT_NEAR(pts[2].x, right, 0.01);
  EXPECT_NEAR(pts[0].y, top + (bottom - top) * (7 - 6.9) / 5, 0.01);
  EXPECT_NEAR(pts[3].y, top, 0.01);  // 100 is clamped to the top edge

  const auto skips = d.find("g", "skip");
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_EQ(skips[0]->attr("data-step"), "40");
  EXPECT_EQ(d.find("g", "rollback")[0]->attr("data-to"), "30");
  EXPECT_EQ(d.find("path", "val-point").size(), 1u);
}

TEST(Svg, LongLegendGetsARowOfItsOwn) {
  std::vector<LegendItem> items;
  for (int i = 0; i < 6; ++i)
    items.push_back({"validation 3.141", color::kOrange, LegendItem::Line});
  Svg svg(600, 320, "t");
  double top = 0;
  {
    Frame f(svg, spec(items));
    top = f.top();
  }
  ASSERT_TRUE(xml::parse(svg.finish()).ok());
  EXPECT_DOUBLE_EQ(top, 20 + 40 + 18);
}

TEST(Svg, LogAxisAndEmptyRanges) {
  Svg svg(600, 320, "t");
  {
    Frame::Spec s = spec();
    s.log_y = true;
    s.y_lo = 0.3, s.y_hi = 40;
    s.x_lo = 5, s.x_hi = 5;  // one step: widened
    Frame f(svg, s);
    EXPECT_TRUE(f.ys().log);
    EXPECT_LT(f.xs().d0, 5);
    EXPECT_GT(f.xs().d1, 5);
    f.polyline("one", {{5, 1}}, color::kBlue);  // one point: a dot as well
  }
  const xml::Document d = xml::parse(svg.finish());
  ASSERT_TRUE(d.ok()) << d.error;
  std::vector<std::string> ticks;
  for (const auto* e : d.find("text", "tick", d.index(d.find("g", "axis-y").at(0))))
    ticks.push_back(e->text);
  EXPECT_EQ(ticks, (std::vector<std::string>{"0.1", "1", "10", "100"}));
  EXPECT_EQ(d.find("circle").size(), 1u);
}
