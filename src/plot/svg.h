// A small SVG writer for the charts of `zaya plot` (plot/run_plot.h): the document (escaped text
// and attributes), nice tick values and their labels, and a Frame — one chart panel with its
// title, light grid, axes, polylines, markers, vertical rules and a legend. Everything is drawn
// with presentation attributes (no CSS, no script), so that browsers and rsvg-convert render it
// alike. Output is deterministic: the same calls give the same bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zaya::plot {

// Text for XML content and attribute values: & < > " ' escaped; bytes that are not valid UTF-8,
// and the control characters XML 1.0 forbids, become U+FFFD (a path or a name from a file may hold
// either, and one such byte makes the whole document unreadable).
std::string xml_escape(std::string_view s);

// A coordinate or length: at most two decimals, no trailing zeros ("12.5", "3", "-0.25"); a
// non-finite value is written as 0 (never "nan" in an attribute).
std::string svg_number(double v);

// The label of tick value `v` on a grid of `step`: as many decimals as the step needs ("0.25",
// "1500"); on a grid of 1,000 or more, a k/M/G suffix by the value's size ("500k", "1M",
// "1.5M"); steps under 0.001 in exponent form ("2e-4", "1.5e-5"); 0 is "0".
std::string tick_label(double v, double step);

// A value in a legend or a summary: four significant digits ("3.912", "45.2k", "3.12e-4").
std::string short_number(double v);

// Seconds as "42.1 s", "3 min 05 s", "2 h 07 min".
std::string duration_label(double seconds);

struct Ticks {
  double lo = 0, hi = 1, step = 1;  // the axis range and the tick spacing
  std::vector<double> values;       // lo ≤ v ≤ hi, ascending
};
// A "nice" spacing (1, 2 or 5 × 10^k) giving about `target` intervals over [lo, hi], the range
// widened to multiples of it. An empty range (lo == hi) is widened around the value first.
Ticks nice_ticks(double lo, double hi, int target = 5);
// The same spacing, but the range kept as given: the ticks are the multiples inside it.
Ticks inner_ticks(double lo, double hi, int target = 5);
// A log axis over [lo, hi] (both > 0), widened to whole decades: a tick at every decade, and at
// 2 and 5 times it when the range spans fewer than three decades.
Ticks log_ticks(double lo, double hi);

// Data [d0, d1] onto pixels [p0, p1], linear or logarithmic (then d0, d1 > 0).
struct Scale {
  double d0 = 0, d1 = 1, p0 = 0, p1 = 1;
  bool log = false;
  double operator()(double v) const;
};

using Attrs = std::vector<std::pair<std::string, std::string>>;

// The document: elements are appended in order; finish() closes what is open.
class Svg {
 public:
  Svg(double width, double height, std::string_view title);
  void open(std::string_view tag, const Attrs& attrs = {});
  void close();
  void element(std::string_view tag, const Attrs& attrs);  // an empty element
  // <text> holding `s`; attrs may set text-anchor, font-size, fill, font-weight.
  void text(double x, double y, std::string_view s, const Attrs& attrs = {});
  // A <title> child: the tooltip of the element just opened.
  void tooltip(std::string_view s);
  std::string finish();

 private:
  std::string out_;
  std::vector<std::string> open_;
};

struct Point {
  double x, y;
};

// At most about 2 × `buckets` points, keeping the shape: the points (ascending x) are cut into
// `buckets` equal x ranges, and each range keeps its first, lowest, highest and last point in x
// order. Fewer points than 4 × buckets are returned unchanged.
std::vector<Point> decimate(const std::vector<Point>& points, int buckets);

enum class MarkerShape { TriangleDown, Circle, Diamond };

struct LegendItem {
  std::string label;
  std::string color;
  enum Kind { Line, Dashed, Triangle, Dot } kind = Line;
};

// One chart panel at (x, y) of size w × h (title row, plot area, axes' labels inside it).
class Frame {
 public:
  struct Spec {
    std::string id;     // the panel's element id ("panel-loss")
    std::string title;  // bold, top left, with its unit: "Loss (nats/token)"
    std::string x_label = "step";
    double x = 0, y = 0, w = 560, h = 280;
    double x_lo = 0, x_hi = 1;  // data ranges (widened when empty)
    double y_lo = 0, y_hi = 1;
    bool log_y = false;
    bool x_integer = true;  // x is a step number: integer ticks only
    bool y_axis = true;     // false: no y ticks or horizontal grid (a chart of bars)
    // Right of the title when it fits there, else in a row of its own below it.
    std::vector<LegendItem> legend;
  };
  // Opens the panel's group and draws its title, grid and axes.
  Frame(Svg& svg, const Spec& spec);
  ~Frame();
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  // One <polyline> (id "series-<id>") of the points, in order; points outside the axes' ranges
  // are clamped to its edges. Fewer than 1 point draws nothing.
  void polyline(std::string_view id, const std::vector<Point>& points, std::string_view color,
                double width = 1.6, bool dashed = false);
  // A marker at (x, y) (y clamped to the plot area), with a tooltip and a class for finding it.
  void marker(double x, double y, MarkerShape shape, std::string_view color, std::string_view cls,
              std::string_view tip, const Attrs& extra = {});
  // A marker at the top edge of the plot area above x, with a faint rule down the plot.
  void top_marker(double x, std::string_view color, std::string_view cls, std::string_view tip,
                  const Attrs& extra = {});
  // A dashed vertical rule across the plot at x, labelled at its top.
  void vrule(double x, std::string_view color, std::string_view cls, std::string_view label,
             std::string_view tip, const Attrs& extra = {});
  // A grey note centred in the plot area ("no data").
  void note(std::string_view text);

  const Scale& xs() const { return xs_; }
  const Scale& ys() const { return ys_; }
  // The plot area (inside the axes).
  double left() const { return left_; }
  double top() const { return top_; }
  double right() const { return right_; }
  double bottom() const { return bottom_; }

 private:
  void legend(double y);
  // Opens the <g> (class, tooltip, `extra`) of a vertical rule at x and draws the rule across the
  // plot area with `line`'s attributes added; returns its pixel x. The caller adds and closes.
  double open_rule(double x, std::string_view color, std::string_view cls, std::string_view tip,
                   const Attrs& extra, const Attrs& line);

  Svg& svg_;
  Spec spec_;
  Scale xs_, ys_;
  double left_, top_, right_, bottom_;
};

// Colours shared by the charts (a colour-blind-safe palette).
namespace color {
inline constexpr const char* kBlue = "#1f77b4";
inline constexpr const char* kOrange = "#ff7f0e";
inline constexpr const char* kGreen = "#2ca02c";
inline constexpr const char* kRed = "#d62728";
inline constexpr const char* kPurple = "#9467bd";
inline constexpr const char* kBrown = "#8c564b";
inline constexpr const char* kPink = "#e377c2";
inline constexpr const char* kGrey = "#7f7f7f";
inline constexpr const char* kTeal = "#17becf";
inline constexpr const char* kText = "#222222";
inline constexpr const char* kMuted = "#666666";
inline constexpr const char* kGrid = "#e8e8e8";
inline constexpr const char* kAxis = "#999999";
}  // namespace color

}  // namespace zaya::plot
