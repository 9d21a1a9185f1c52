// The run's charts (see run_plot.h).
#include "plot/run_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "core/assert.h"
#include "plot/svg.h"

namespace zaya::plot {

namespace {

constexpr double kWidth = 1200, kMargin = 20, kGap = 16, kHeader = 76;
constexpr double kPanelW = (kWidth - 2 * kMargin - kGap) / 2, kPanelH = 290;
constexpr double kGoodputH = 260;
constexpr int kBuckets = 600;  // points kept per series: about two per pixel column
constexpr const char* kLightBlue = "#a6c8e4";
constexpr size_t kSmoothFrom = 50;  // fewer loss points are drawn as they are, unsmoothed

struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// The finite values of one column of the rows, against the step; `keep` filters rows.
std::vector<Point> column(const RunMetrics& m, double MetricsRow::*field, double scale = 1,
                          const std::function<bool(const MetricsRow&)>& keep = {}) {
  std::vector<Point> p;
  for (const MetricsRow& r : m.rows) {
    const double v = r.*field;
    if (std::isfinite(v) && (!keep || keep(r))) p.push_back({double(r.step), v * scale});
  }
  return p;
}

Range y_range(const std::vector<Point>& a, const std::vector<Point>& b = {}) {
  Range r;
  for (const Point& p : a) r.add(p.y);
  for (const Point& p : b) r.add(p.y);
  return r;
}

// The loss smoothed by a centred moving average over about a 40th of the run, the window
// shrinking symmetrically at the ends (so the curve neither lags, as a trailing average does, nor
// bends at the ends): empty below kSmoothFrom points.
std::vector<Point> smoothed(const std::vector<Point>& p) {
  if (p.size() < kSmoothFrom) return {};
  const int64_t n = int64_t(p.size()), h = std::clamp<int64_t>(n / 80, 2, 250);
  std::vector<double> prefix(p.size() + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + p[i].y;
  std::vector<Point> out(p.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = std::min({h, i, n - 1 - i});
    out[i] = {p[i].x, (prefix[i + k + 1] - prefix[i - k]) / double(2 * k + 1)};
  }
  return out;
}

std::string plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// Every rollback once: the metrics file's and the goodput report's.
std::vector<Rollback> all_rollbacks(const RunMetrics* m, const Goodput* g) {
  std::set<std::pair<int64_t, int64_t>> seen;
  std::vector<Rollback> out;
  for (const auto* list : {m ? &m->rollbacks : nullptr, g ? &g->rollbacks : nullptr})
    if (list)
      for (const Rollback& r : *list)
        if (seen.insert({r.from, r.to}).second) out.push_back(r);
  return out;
}

class Page {
 public:
  Page(const RunMetrics* m, const Goodput* g, const std::string& title)
      : m_(m), g_(g), svg_(kWidth, height(m, g), title) {
    svg_.text(kMargin, 34, title,
              {{"id", "page-title"}, {"font-size", "20"}, {"font-weight", "bold"}});
    svg_.text(kMargin, 58, run_summary(m, g),
              {{"id", "page-summary"}, {"font-size", "13"}, {"fill", color::kMuted}});
  }

  std::string draw() {
    if (m_) {
      loss_panel(place(0));
      single(place(1), "lr", "Learning rate", column(*m_, &MetricsRow::lr), color::kGreen, true,
             false);
      grad_panel(place(2));
      single(place(3), "tokens_per_s", "Throughput (tokens/s)",
             column(*m_, &MetricsRow::tokens_per_s), color::kTeal, true, false);
      single(place(4), "mfu", "MFU (%)", column(*m_, &MetricsRow::mfu, 100), color::kBrown, true,
             false);
      single(place(5), "expert_load_entropy", "Expert-load entropy (1 = even)",
             column(*m_, &MetricsRow::expert_load_entropy), color::kPink, false, false);
    }
    if (g_) goodput_panel();
    return svg_.finish();
  }

 private:
  static double height(const RunMetrics* m, const Goodput* g) {
    double h = kHeader;
    if (m) h += 3 * (kPanelH + kGap);
    if (g) h += kGoodputH + kGap;
    return h + kMargin - kGap;
  }

  // The spec of metrics panel i (two columns, three rows), its x range the run's steps.
  Frame::Spec place(int i) const {
    Frame::Spec s;
    s.x = kMargin + (i % 2) * (kPanelW + kGap);
    s.y = kHeader + (i / 2) * (kPanelH + kGap);
    s.w = kPanelW;
    s.h = kPanelH;
    Range x;
    for (const MetricsRow& r : m_->rows) x.add(double(r.step));
    for (const ValPoint& v : m_->val) x.add(double(v.step));
    s.x_lo = x.lo <= 1 ? 0 : x.lo;  // a run's steps start at 1: the axis at 0
    s.x_hi = x.hi;
    return s;
  }

  bool skipped(const MetricsRow& r) const {
    return std::binary_search(m_->skipped_steps.begin(), m_->skipped_steps.end(), r.step);
  }

  void loss_panel(Frame::Spec s) {
    const auto not_skipped = [&](const MetricsRow& r) { return !skipped(r); };
    const std::vector<Point> train = column(*m_, &MetricsRow::loss, 1, not_skipped);
    std::vector<Point> val;
    for (const ValPoint& v : m_->val)
      if (std::isfinite(v.loss)) val.push_back({double(v.step), v.loss});
    const Range y = y_range(train, val);
    const std::vector<Point> smooth = smoothed(train);
    const std::vector<Rollback> rollbacks = all_rollbacks(m_, g_);
    s.id = "panel-loss";
    s.title = "Loss (nats/token)";
    s.y_lo = y.lo;
    s.y_hi = y.hi;
    if (!train.empty())
      s.legend.push_back({"train " + short_number(train.back().y),
                          smooth.empty() ? color::kBlue : kLightBlue, LegendItem::Line});
    if (!smooth.empty()) s.legend.push_back({"smoothed", color::kBlue, LegendItem::Line});
    if (!val.empty())
      s.legend.push_back(
          {"validation " + short_number(val.back().y), color::kOrange, LegendItem::Line});
    if (!m_->skipped_steps.empty())
      s.legend.push_back(
          {fmt::format("{} skipped", m_->skipped_steps.size()), color::kRed, LegendItem::Triangle});
    if (!rollbacks.empty())
      s.legend.push_back({plural(int64_t(rollbacks.size()), "rollback", "rollbacks"),
                          color::kPurple, LegendItem::Dashed});
    Frame f(svg_, s);
    if (y.empty()) f.note("no loss values in the metrics file");
    for (const Rollback& r : rollbacks)
      f.vrule(double(r.to), color::kPurple, "rollback", fmt::format("rollback {}→{}", r.from, r.to),
              fmt::format("rollback: after step {} back to step {}", r.from, r.to),
              {{"data-from", std::to_string(r.from)}, {"data-to", std::to_string(r.to)}});
    for (const MetricsRow& r : m_->rows)
      if (skipped(r))
        f.top_marker(double(r.step), color::kRed, "skip",
                     fmt::format("step {} skipped: loss {}, grad norm {}", r.step,
                                 short_number(r.loss), short_number(r.grad_norm)),
                     {{"data-step", std::to_string(r.step)}});
    if (smooth.empty()) {
      f.polyline("loss", decimate(train, kBuckets), color::kBlue);
    } else {
      f.polyline("loss", decimate(train, kBuckets), kLightBlue, 1.2);
      f.polyline("loss_smoothed", decimate(smooth, kBuckets), color::kBlue, 2);
    }
    if (!val.empty()) {
      f.polyline("val_loss", val, color::kOrange, 2);
      if (val.size() <= 200)
        for (const ValPoint& v : m_->val)
          if (std::isfinite(v.loss))
            f.marker(double(v.step), v.loss, MarkerShape::Circle, color::kOrange, "val-point",
                     fmt::format("step {}: validation loss {}", v.step, short_number(v.loss)));
    }
  }

  void grad_panel(Frame::Spec s) {
    const auto not_skipped = [&](const MetricsRow& r) { return !skipped(r); };
    const std::vector<Point> p = column(*m_, &MetricsRow::grad_norm, 1, not_skipped);
    const Range y = y_range(p);
    const bool log = !y.empty() && y.lo > 0 && y.hi / y.lo >= 100;
    single(s, "grad_norm", log ? "Gradient norm (log scale)" : "Gradient norm", p, color::kPurple,
           !log, log);
  }

  // A panel of one series; `from_zero`: the y range includes 0.
  void single(Frame::Spec s, const std::string& id, const std::string& title,
              const std::vector<Point>& p, const char* colour, bool from_zero, bool log) {
    Range y = y_range(p);
    if (from_zero && !y.empty()) y.add(0);
    s.id = "panel-" + id;
    s.title = title;
    s.y_lo = y.lo;
    s.y_hi = y.hi;
    s.log_y = log;
    if (!p.empty())
      s.legend.push_back({"last " + short_number(p.back().y), colour, LegendItem::Line});
    Frame f(svg_, s);
    if (p.empty()) {
      f.note(fmt::format("no \"{}\" values in the metrics file", id));
      return;
    }
    f.polyline(id, decimate(p, kBuckets), colour);
  }

  void goodput_panel() {
    const Goodput& g = *g_;
    const bool minutes = g.wall_s >= 600;
    const double unit = minutes ? 60 : 1;
    Frame::Spec s;
    s.id = "panel-goodput";
    s.title = fmt::format(
        "Goodput {:.1f}%: {}, {}, wall {}", g.wall_s > 0 ? 100 * g.productive_s / g.wall_s : 0.0,
        g.outcome.empty() ? "outcome unknown" : g.outcome,
        plural(int64_t(g.attempts.size()), "attempt", "attempts"), duration_label(g.wall_s));
    s.x_label =
        minutes ? "minutes since the supervisor started" : "seconds since the supervisor started";
    s.x = kMargin;
    s.y = kHeader + (m_ ? 3 * (kPanelH + kGap) : 0);
    s.w = kWidth - 2 * kMargin;
    s.h = kGoodputH;
    s.x_lo = 0;
    s.x_hi = std::max(g.wall_s, 1e-9) / unit;
    s.x_integer = false;
    s.y_axis = false;
    Frame f(svg_, s);
    const auto X = [&](double seconds) { return f.xs()(seconds / unit); };

    struct Part {
      const char* id;
      const char* label;
      double seconds;
      const char* colour;
    };
    const Part parts[] = {
        {"productive", "productive", g.productive_s, color::kGreen},
        {"before_launch", "before launch", g.before_launch_s, "#c7c7c7"},
        {"setup", "setup", g.setup_s, "#aec7e8"},
        {"after_step", "after steps", g.after_step_s, "#6baed6"},
        {"shutdown", "shutdown", g.shutdown_s, "#969696"},
        {"anomalies", "anomalies", g.anomaly_s, color::kOrange},
        {"detection", "failure detection", g.detection_s, color::kRed},
        {"restart", "restart", g.restart_s, "#ff9896"},
        {"recomputed", "recomputed", g.recomputed_s, color::kBrown},
        {"other", "other failure time", g.other_s, "#c49c94"},
    };
    // Top: the parts as shares of the wall time, their key below; bottom: the attempts on the
    // time axis.
    const double band_h = 30, band1 = f.top() + 22, band2 = f.bottom() - 8 - band_h;
    const Attrs caption = {{"font-size", "12"}, {"fill", color::kMuted}};
    svg_.text(f.left(), band1 - 7, "Where the wall time went (shares of it, not in time order)",
              caption);
    svg_.text(f.left(), band2 - 7, "Attempts over time", caption);
    double at = 0;
    for (const Part& p : parts) {
      if (p.seconds <= 0 && std::string_view(p.id) != "productive") continue;
      const double x0 = X(at), x1 = X(std::min(at + p.seconds, g.wall_s));
      at += p.seconds;
      const double pct = g.wall_s > 0 ? 100 * p.seconds / g.wall_s : 0;
      svg_.open("rect", {{"class", "goodput-part"},
                         {"data-part", p.id},
                         {"x", svg_number(x0)},
                         {"y", svg_number(band1)},
                         {"width", svg_number(std::max(0.0, x1 - x0))},
                         {"height", svg_number(band_h)},
                         {"fill", p.colour}});
      svg_.tooltip(fmt::format("{}: {} ({:.1f}%)", p.label, duration_label(p.seconds), pct));
      svg_.close();
      if (x1 - x0 > 44)
        svg_.text((x0 + x1) / 2, band1 + band_h / 2 + 4, fmt::format("{:.0f}%", pct),
                  {{"text-anchor", "middle"},
                   {"font-size", "11"},
                   {"fill", "#ffffff"},
                   {"font-weight", "bold"}});
    }
    for (const Goodput::Attempt& a : g.attempts) {
      const double x0 = X(a.launch_s), x1 = X(std::max(a.launch_s, a.end_s));
      const char* colour = a.outcome == "completed" ? color::kGreen
                           : a.outcome == "crash"   ? color::kRed
                           : a.outcome == "hang"    ? color::kPurple
                                                    : color::kGrey;
      svg_.open("rect", {{"class", "attempt"},
                         {"data-attempt", std::to_string(a.attempt)},
                         {"x", svg_number(x0)},
                         {"y", svg_number(band2)},
                         {"width", svg_number(std::max(1.0, x1 - x0))},
                         {"height", svg_number(band_h)},
                         {"rx", "3"},
                         {"fill", colour},
                         {"fill-opacity", "0.85"}});
      svg_.tooltip(fmt::format("attempt {}: {}, {} – {}{}{}", a.attempt, a.outcome,
                               duration_label(a.launch_s), duration_label(a.end_s),
                               a.cause.empty() ? "" : ": ", a.cause));
      svg_.close();
      const std::string label = fmt::format("#{} {}", a.attempt, a.outcome);
      if (x1 - x0 > 8 + 6.2 * double(label.size()))
        svg_.text(x0 + 6, band2 + band_h / 2 + 4, label,
                  {{"font-size", "11"}, {"fill", "#ffffff"}, {"font-weight", "bold"}});
    }

    // The parts' key: a swatch and "label 1.2 s (3.4%)" each, in rows.
    svg_.open("g", {{"class", "goodput-key"}, {"font-size", "11"}});
    double kx = f.left(), ky = band1 + band_h + 20;
    for (const Part& p : parts) {
      if (p.seconds <= 0 && std::string_view(p.id) != "productive") continue;
      const std::string label = fmt::format("{} {} ({:.1f}%)", p.label, duration_label(p.seconds),
                                            g.wall_s > 0 ? 100 * p.seconds / g.wall_s : 0.0);
      const double w = 18 + 6.2 * double(label.size()) + 18;
      if (kx + w > f.right()) kx = f.left(), ky += 18;
      svg_.element("rect", {{"x", svg_number(kx)},
                            {"y", svg_number(ky - 9)},
                            {"width", "12"},
                            {"height", "10"},
                            {"fill", p.colour}});
      svg_.text(kx + 18, ky, label);
      kx += w;
    }
    svg_.close();
  }

  const RunMetrics* m_;
  const Goodput* g_;
  Svg svg_;
};

}  // namespace

std::string run_svg(const RunMetrics* metrics, const Goodput* goodput, const std::string& title) {
  ZAYA_ASSERT(metrics || goodput, "run_svg: nothing to draw");
  return Page(metrics, goodput, title).draw();
}

std::string run_summary(const RunMetrics* m, const Goodput* g) {
  std::vector<std::string> parts;
  if (m) {
    if (!m->rows.empty()) {
      const MetricsRow &a = m->rows.front(), &b = m->rows.back();
      parts.push_back(fmt::format("{} ({}–{})", plural(int64_t(m->rows.size()), "step", "steps"),
                                  a.step, b.step));
      if (std::isfinite(b.tokens)) parts.push_back(short_number(b.tokens) + " tokens");
      if (std::isfinite(b.time)) parts.push_back(duration_label(b.time));
      parts.push_back(fmt::format("loss {} → {}", short_number(a.loss), short_number(b.loss)));
    }
    if (!m->val.empty()) parts.push_back("validation loss " + short_number(m->val.back().loss));
    parts.push_back(fmt::format("{} skipped", m->skipped_steps.size()));
    parts.push_back(plural(int64_t(all_rollbacks(m, g).size()), "rollback", "rollbacks"));
  }
  if (g)
    parts.push_back(fmt::format("goodput {:.1f}% over {}",
                                g->wall_s > 0 ? 100 * g->productive_s / g->wall_s : 0.0,
                                plural(int64_t(g->attempts.size()), "attempt", "attempts")));
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

}  // namespace zaya::plot
