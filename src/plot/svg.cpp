// The SVG writer of `zaya plot` (see svg.h).
#include "plot/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace zaya::plot {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at s[i], or 0 (overlong forms, surrogates and code
// points past U+10FFFF are invalid).
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;                   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;                  // surrogates
    if (c == 0xEF && b(1) == 0xBF && b(2) >= 0xBE) return 0;  // U+FFFE, U+FFFF: not XML
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

// The fewest decimals (up to 12) that write `step` exactly enough to tell its multiples apart.
int decimals_for(double step) {
  step = std::fabs(step);
  for (int d = 0; d < 12; ++d) {
    const double scaled = step * std::pow(10.0, d);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return d;
  }
  return 12;
}

std::string trim_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// "1.5e-5": `decimals` digits of mantissa, no '+' and no leading zero in the exponent.
std::string exponent_form(double v, int decimals) {
  int e = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  double m = v / std::pow(10.0, e);
  const double r = std::pow(10.0, decimals);
  m = std::round(m * r) / r;
  if (std::fabs(m) >= 10) m /= 10, ++e;
  return fmt::format("{}e{}", trim_zeros(fmt::format("{:.{}f}", m, decimals)), e);
}

// 1, 2 or 5 × 10^k, close to `raw`.
double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

// A finite range within ±1e300 (so that hi − lo is finite), widened when it is empty or too
// narrow for doubles to tell its ticks apart.
void sane_range(double& lo, double& hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  lo = std::clamp(lo, -1e300, 1e300);
  hi = std::clamp(hi, -1e300, 1e300);
  const double size = std::max(std::fabs(lo), std::fabs(hi));
  if (hi - lo <= size * 1e-9) {
    const double pad = size == 0 ? 1 : size * 0.1;
    lo -= pad, hi += pad;
  }
}

// The multiples k × step for k from k0 to k1 (whole numbers); just the ends when there would be
// more than 100 (a range doubles cannot divide finely).
std::vector<double> multiples(double k0, double k1, double step) {
  std::vector<double> v;
  if (!(k1 - k0 <= 100)) return {k0 * step, k1 * step};
  for (int i = 0; k0 + i <= k1 + 0.5; ++i) v.push_back((k0 + i) * step);
  return v;
}

// The approximate width of `s` in pixels at `size` (a proportional sans-serif font).
double text_width(std::string_view s, double size) {
  double chars = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) chars += 1;
  return chars * size * 0.56;
}

// A legend item: swatch, gap, label, space before the next.
constexpr double kLegendSize = 11, kSwatch = 16, kGap = 5, kSpace = 14;

double legend_width(const std::vector<LegendItem>& items) {
  double w = 0;
  for (const LegendItem& it : items)
    w += kSwatch + kGap + text_width(it.label, kLegendSize) + kSpace;
  return items.empty() ? 0 : w - kSpace;
}

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t n = utf8_length(s, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          out += kReplacement;
        else
          out += c;
    }
    ++i;
  }
  return out;
}

std::string svg_number(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = trim_zeros(fmt::format("{:.2f}", v));
  if (s == "-0") s = "0";
  return s;
}

std::string tick_label(double v, double step) {
  step = std::fabs(step);
  if (!std::isfinite(v)) return "?";
  if (!(step > 0) || !std::isfinite(step)) step = std::fabs(v) > 0 ? std::fabs(v) : 1;
  if (std::fabs(v) < step * 1e-6) return "0";
  if (step < 1e-3) {
    // The mantissa needs the digits from v's exponent down to the step's.
    const int ev = static_cast<int>(std::floor(std::log10(std::fabs(v))));
    const int es = static_cast<int>(std::floor(std::log10(step) + 1e-9));
    const int d = std::clamp(ev - es + decimals_for(step / std::pow(10.0, es)), 0, 6);
    return exponent_form(v, d);
  }
  if (step >= 1e3) {  // a suffix by the value's own size, the digits the step needs
    const double a = std::fabs(v);
    const double unit = a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : 1e3;
    const char* suffix = a >= 1e9 ? "G" : a >= 1e6 ? "M" : "k";
    return trim_zeros(fmt::format("{:.{}f}", v / unit, decimals_for(step / unit))) + suffix;
  }
  std::string s = fmt::format("{:.{}f}", v, decimals_for(step));
  if (s.rfind("-0", 0) == 0 && std::stod(s) == 0) s.erase(0, 1);
  return s;
}

std::string short_number(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 1e4) {
    const double unit = a >= 1e12 ? 1e12 : a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : 1e3;
    const char* suffix = a >= 1e12 ? "T" : a >= 1e9 ? "G" : a >= 1e6 ? "M" : "k";
    return fmt::format("{:.3g}{}", v / unit, suffix);
  }
  if (a < 1e-3) return exponent_form(v, 2);
  return fmt::format("{:.4g}", v);
}

std::string duration_label(double s) {
  if (!std::isfinite(s) || s < 0) return "n/a";
  if (s < 60) return fmt::format("{:.1f} s", s);
  if (s >= 1e12) return fmt::format("{:.3g} s", s);
  const int64_t t = std::llround(s);
  if (t < 3600) return fmt::format("{} min {:02} s", t / 60, t % 60);
  return fmt::format("{} h {:02} min", t / 3600, (t % 3600) / 60);
}

Ticks nice_ticks(double lo, double hi, int target) {
  sane_range(lo, hi);
  Ticks t;
  t.step = nice_step((hi - lo) / std::max(1, target));
  const double k0 = std::floor(lo / t.step + 1e-9), k1 = std::ceil(hi / t.step - 1e-9);
  t.lo = k0 * t.step;
  t.hi = k1 * t.step;
  t.values = multiples(k0, k1, t.step);
  return t;
}

Ticks inner_ticks(double lo, double hi, int target) {
  sane_range(lo, hi);
  Ticks t;
  t.lo = lo;
  t.hi = hi;
  t.step = nice_step((hi - lo) / std::max(1, target));
  const double k0 = std::ceil(lo / t.step - 1e-9), k1 = std::floor(hi / t.step + 1e-9);
  t.values = multiples(k0, k1, t.step);
  return t;
}

Ticks log_ticks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1e-12;
  if (!(hi > 0) || !std::isfinite(hi)) hi = lo * 10;
  if (hi < lo) std::swap(lo, hi);
  int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (e1 <= e0) e1 = e0 + 1;
  Ticks t;
  t.lo = std::pow(10.0, e0);
  t.hi = std::pow(10.0, e1);
  t.step = 0;
  const int decades = e1 - e0, every = (decades + 7) / 8;  // at most about 8 decade ticks
  for (int e = e0; e <= e1; ++e) {
    if ((e - e0) % every) continue;
    const double d = std::pow(10.0, e);
    t.values.push_back(d);
    if (decades < 3 && e < e1) {
      t.values.push_back(2 * d);
      t.values.push_back(5 * d);
    }
  }
  return t;
}

double Scale::operator()(double v) const {
  double t;
  if (log) {
    const double a = std::log10(d0), b = std::log10(d1);
    t = v > 0 && b != a ? (std::log10(v) - a) / (b - a) : 0;
  } else {
    t = d1 != d0 ? (v - d0) / (d1 - d0) : 0.5;
  }
  return p0 + t * (p1 - p0);
}

Svg::Svg(double width, double height, std::string_view title) {
  const std::string w = svg_number(width), h = svg_number(height);
  out_ = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"{2}\" font-size=\"12\" fill=\"{3}\">\n",
      w, h, xml_escape("Helvetica, Arial, 'DejaVu Sans', sans-serif"), color::kText);
  open_.push_back("svg");
  tooltip(title);
  element("rect", {{"width", w}, {"height", h}, {"fill", "#ffffff"}});
}

void Svg::open(std::string_view tag, const Attrs& attrs) {
  out_ += '<';
  out_ += tag;
  for (const auto& [k, v] : attrs) out_ += fmt::format(" {}=\"{}\"", k, xml_escape(v));
  out_ += ">\n";
  open_.emplace_back(tag);
}

void Svg::close() {
  if (open_.empty()) return;
  out_ += "</" + open_.back() + ">\n";
  open_.pop_back();
}

void Svg::element(std::string_view tag, const Attrs& attrs) {
  out_ += '<';
  out_ += tag;
  for (const auto& [k, v] : attrs) out_ += fmt::format(" {}=\"{}\"", k, xml_escape(v));
  out_ += "/>\n";
}

void Svg::text(double x, double y, std::string_view s, const Attrs& attrs) {
  out_ += fmt::format("<text x=\"{}\" y=\"{}\"", svg_number(x), svg_number(y));
  for (const auto& [k, v] : attrs) out_ += fmt::format(" {}=\"{}\"", k, xml_escape(v));
  out_ += '>' + xml_escape(s) + "</text>\n";
}

void Svg::tooltip(std::string_view s) {
  out_ += "<title>" + xml_escape(s) + "</title>\n";
}

std::string Svg::finish() {
  while (!open_.empty()) close();
  return std::move(out_);
}

std::vector<Point> decimate(const std::vector<Point>& points, int buckets) {
  if (buckets < 1 || points.size() < 4 * size_t(buckets)) return points;
  const double x0 = points.front().x, x1 = points.back().x;
  if (!(x1 > x0)) return points;
  std::vector<size_t> keep;
  size_t first = 0;
  while (first < points.size()) {
    const int b = std::min(buckets - 1, int((points[first].x - x0) / (x1 - x0) * buckets));
    size_t last = first, lo = first, hi = first;
    while (last + 1 < points.size() &&
           std::min(buckets - 1, int((points[last + 1].x - x0) / (x1 - x0) * buckets)) == b) {
      ++last;
      if (points[last].y < points[lo].y) lo = last;
      if (points[last].y > points[hi].y) hi = last;
    }
    size_t picks[] = {first, lo, hi, last};
    std::sort(std::begin(picks), std::end(picks));
    for (size_t p : picks)
      if (keep.empty() || keep.back() != p) keep.push_back(p);
    first = last + 1;
  }
  std::vector<Point> out;
  out.reserve(keep.size());
  for (size_t i : keep) out.push_back(points[i]);
  return out;
}

Frame::Frame(Svg& svg, const Spec& spec) : svg_(svg), spec_(spec) {
  left_ = spec.x + 62;
  right_ = spec.x + spec.w - 16;
  top_ = spec.y + 40;
  bottom_ = spec.y + spec.h - 40;
  const double legend_w = legend_width(spec.legend);
  const bool legend_row =
      spec.x + 14 + text_width(spec.title, 15) * 1.05 + 20 + legend_w > spec.x + spec.w - 12;
  if (legend_row) top_ += 18;
  svg_.open("g", {{"id", spec.id}, {"class", "panel"}});
  svg_.element("rect", {{"x", svg_number(spec.x)},
                        {"y", svg_number(spec.y)},
                        {"width", svg_number(spec.w)},
                        {"height", svg_number(spec.h)},
                        {"rx", "6"},
                        {"fill", "#ffffff"},
                        {"stroke", "#d0d0d0"}});
  svg_.text(spec.x + 14, spec.y + 24, spec.title,
            {{"class", "title"}, {"font-size", "15"}, {"font-weight", "bold"}});
  if (!spec.legend.empty()) legend(legend_row ? spec.y + 44 : spec.y + 22);

  double x_lo = spec.x_lo, x_hi = spec.x_hi;
  if (spec.x_integer && x_hi - x_lo < 2) {  // one step or two: a step either side
    const double mid = (x_lo + x_hi) / 2;
    x_lo = mid - 1, x_hi = mid + 1;
  }
  Ticks xt = inner_ticks(x_lo, x_hi, 6);
  x_lo = xt.lo, x_hi = xt.hi;           // as inner_ticks made it finite and non-empty
  if (spec.x_integer && xt.step < 1) {  // whole steps only
    xt.step = 1;
    xt.values = multiples(std::ceil(x_lo), std::floor(x_hi), 1);
  }
  const Ticks yt = spec.log_y ? log_ticks(spec.y_lo, spec.y_hi) : nice_ticks(spec.y_lo, spec.y_hi);
  xs_ = Scale{x_lo, x_hi, left_, right_, false};
  ys_ = Scale{yt.lo, yt.hi, bottom_, top_, spec.log_y};

  svg_.open("g", {{"class", "grid"}, {"stroke", color::kGrid}, {"stroke-width", "1"}});
  for (double v : spec.y_axis ? yt.values : std::vector<double>{})
    svg_.element("line", {{"x1", svg_number(left_)},
                          {"x2", svg_number(right_)},
                          {"y1", svg_number(ys_(v))},
                          {"y2", svg_number(ys_(v))}});
  for (double v : xt.values)
    svg_.element("line", {{"x1", svg_number(xs_(v))},
                          {"x2", svg_number(xs_(v))},
                          {"y1", svg_number(top_)},
                          {"y2", svg_number(bottom_)}});
  svg_.close();

  if (spec.y_axis) {
    svg_.open("g", {{"class", "axis-y"}, {"font-size", "11"}, {"fill", color::kMuted}});
    svg_.element("line", {{"x1", svg_number(left_)},
                          {"x2", svg_number(left_)},
                          {"y1", svg_number(top_)},
                          {"y2", svg_number(bottom_)},
                          {"stroke", color::kAxis}});
    for (double v : yt.values)
      svg_.text(left_ - 6, ys_(v) + 4, spec.log_y ? tick_label(v, v) : tick_label(v, yt.step),
                {{"class", "tick"}, {"text-anchor", "end"}});
    svg_.close();
  }

  svg_.open("g", {{"class", "axis-x"}, {"font-size", "11"}, {"fill", color::kMuted}});
  svg_.element("line", {{"x1", svg_number(left_)},
                        {"x2", svg_number(right_)},
                        {"y1", svg_number(bottom_)},
                        {"y2", svg_number(bottom_)},
                        {"stroke", color::kAxis}});
  for (double v : xt.values)
    svg_.text(xs_(v), bottom_ + 16, tick_label(v, xt.step),
              {{"class", "tick"}, {"text-anchor", "middle"}});
  svg_.text((left_ + right_) / 2, bottom_ + 32, spec.x_label,
            {{"class", "label"}, {"text-anchor", "middle"}});
  svg_.close();
}

Frame::~Frame() {
  svg_.close();
}

void Frame::polyline(std::string_view id, const std::vector<Point>& points, std::string_view color,
                     double width, bool dashed) {
  if (points.empty()) return;
  std::string pts;
  for (const Point& p : points) {
    if (!pts.empty()) pts += ' ';
    pts += svg_number(std::clamp(xs_(p.x), left_, right_)) + ',' +
           svg_number(std::clamp(ys_(p.y), top_, bottom_));
  }
  Attrs a = {{"id", "series-" + std::string(id)},
             {"class", "series"},
             {"fill", "none"},
             {"stroke", std::string(color)},
             {"stroke-width", svg_number(width)},
             {"stroke-linejoin", "round"},
             {"stroke-linecap", "round"},
             {"points", pts}};
  if (dashed) a.push_back({"stroke-dasharray", "6 4"});
  svg_.element("polyline", a);
  if (points.size() == 1)  // a line of one point draws nothing: a dot shows it
    svg_.element("circle", {{"cx", svg_number(std::clamp(xs_(points[0].x), left_, right_))},
                            {"cy", svg_number(std::clamp(ys_(points[0].y), top_, bottom_))},
                            {"r", "2.5"},
                            {"fill", std::string(color)}});
}

namespace {

std::string shape_path(MarkerShape s, double x, double y) {
  const auto n = [](double v) { return svg_number(v); };
  switch (s) {
    case MarkerShape::TriangleDown:
      return fmt::format("M{} {}L{} {}L{} {}Z", n(x - 5), n(y - 5), n(x + 5), n(y - 5), n(x),
                         n(y + 4));
    case MarkerShape::Diamond:
      return fmt::format("M{} {}L{} {}L{} {}L{} {}Z", n(x), n(y - 5), n(x + 5), n(y), n(x),
                         n(y + 5), n(x - 5), n(y));
    case MarkerShape::Circle:
      break;
  }
  return fmt::format("M{} {}a3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0 -7 0Z", n(x - 3.5), n(y));
}

}  // namespace

void Frame::marker(double x, double y, MarkerShape shape, std::string_view color,
                   std::string_view cls, std::string_view tip, const Attrs& extra) {
  const double px = std::clamp(xs_(x), left_, right_), py = std::clamp(ys_(y), top_, bottom_);
  Attrs a = {{"class", std::string(cls)},
             {"d", shape_path(shape, px, py)},
             {"fill", std::string(color)},
             {"stroke", "#ffffff"},
             {"stroke-width", "0.8"}};
  a.insert(a.end(), extra.begin(), extra.end());
  svg_.open("path", a);
  svg_.tooltip(tip);
  svg_.close();
}

double Frame::open_rule(double x, std::string_view color, std::string_view cls,
                        std::string_view tip, const Attrs& extra, const Attrs& line) {
  const double px = std::clamp(xs_(x), left_, right_);
  Attrs a = {{"class", std::string(cls)}};
  a.insert(a.end(), extra.begin(), extra.end());
  svg_.open("g", a);
  svg_.tooltip(tip);
  Attrs l = {{"x1", svg_number(px)},
             {"x2", svg_number(px)},
             {"y1", svg_number(top_)},
             {"y2", svg_number(bottom_)},
             {"stroke", std::string(color)}};
  l.insert(l.end(), line.begin(), line.end());
  svg_.element("line", l);
  return px;
}

void Frame::top_marker(double x, std::string_view color, std::string_view cls, std::string_view tip,
                       const Attrs& extra) {
  const double px = open_rule(x, color, cls, tip, extra, {{"stroke-opacity", "0.3"}});
  svg_.element("path", {{"d", shape_path(MarkerShape::TriangleDown, px, top_ + 5)},
                        {"fill", std::string(color)}});
  svg_.close();
}

void Frame::vrule(double x, std::string_view color, std::string_view cls, std::string_view label,
                  std::string_view tip, const Attrs& extra) {
  const double px =
      open_rule(x, color, cls, tip, extra, {{"stroke-width", "1.5"}, {"stroke-dasharray", "4 3"}});
  const bool room_right = px + 4 + text_width(label, 10) < right_;
  svg_.text(room_right ? px + 4 : px - 4, top_ + 24, label,
            {{"font-size", "10"},
             {"fill", std::string(color)},
             {"text-anchor", room_right ? "start" : "end"}});
  svg_.close();
}

void Frame::legend(double y) {
  double x = spec_.x + spec_.w - 12 - legend_width(spec_.legend);
  svg_.open("g", {{"class", "legend"}, {"font-size", svg_number(kLegendSize)}});
  for (const LegendItem& it : spec_.legend) {
    const double my = y - 4;
    switch (it.kind) {
      case LegendItem::Line:
      case LegendItem::Dashed: {
        Attrs a = {{"x1", svg_number(x)},  {"x2", svg_number(x + kSwatch)},
                   {"y1", svg_number(my)}, {"y2", svg_number(my)},
                   {"stroke", it.color},   {"stroke-width", "2.5"}};
        if (it.kind == LegendItem::Dashed) a.push_back({"stroke-dasharray", "4 3"});
        svg_.element("line", a);
        break;
      }
      case LegendItem::Triangle:
        svg_.element("path", {{"d", shape_path(MarkerShape::TriangleDown, x + kSwatch / 2, my)},
                              {"fill", it.color}});
        break;
      case LegendItem::Dot:
        svg_.element("path", {{"d", shape_path(MarkerShape::Circle, x + kSwatch / 2, my)},
                              {"fill", it.color}});
        break;
    }
    x += kSwatch + kGap;
    svg_.text(x, y, it.label, {{"fill", color::kText}});
    x += text_width(it.label, kLegendSize) + kSpace;
  }
  svg_.close();
}

void Frame::note(std::string_view text) {
  svg_.text((left_ + right_) / 2, (top_ + bottom_) / 2, text,
            {{"class", "note"},
             {"text-anchor", "middle"},
             {"fill", color::kMuted},
             {"font-style", "italic"}});
}

}  // namespace zaya::plot
