// Progress output (progress.h): a redrawn bar on a TTY, plain periodic lines otherwise,
// nothing when quiet.
#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace zaya {

namespace {
constexpr double kTtyInterval = 0.1;  // seconds between redraws of the Tty line
}

std::string human_count(double x) {
  const double a = std::fabs(x);
  if (a < 1e3) return fmt::format("{:.0f}", x);
  if (a < 1e6) return fmt::format("{:.1f}k", x / 1e3);
  if (a < 1e9) return fmt::format("{:.2f}M", x / 1e6);
  if (a < 1e12) return fmt::format("{:.2f}G", x / 1e9);
  return fmt::format("{:.2f}T", x / 1e12);
}

std::string human_bytes(double x) {
  const double a = std::fabs(x);
  if (a < 1024) return fmt::format("{:.0f} B", x);
  if (a < 1024.0 * 1024) return fmt::format("{:.1f} KiB", x / 1024);
  if (a < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", x / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", x / (1024.0 * 1024 * 1024));
}

std::string human_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  if (t < 86400) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  return fmt::format("{}d{:02}h", t / 86400, (t % 86400) / 3600);
}

Progress::Progress(std::string label, int64_t total, std::string unit, Options opt)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), opt_(opt) {
  mode_ = opt_.quiet ? Mode::Quiet : opt_.mode;
  if (mode_ == Mode::Auto) mode_ = ::isatty(::fileno(opt_.out)) ? Mode::Tty : Mode::Lines;
}

Progress::Progress(std::string label, int64_t total, std::string unit, bool quiet)
    : Progress(std::move(label), total, std::move(unit), Options{.quiet = quiet}) {}

// Ends a redrawn line without a final summary (the job may be unwinding from an error).
Progress::~Progress() {
  if (!finished_ && mode_ == Mode::Tty && last_width_ > 0) std::fputc('\n', opt_.out);
}

std::string Progress::line(std::string_view note) const {
  const double t = timer_.seconds();
  const double rate = t > 0 ? double(done_) / t : 0;
  auto amount = [&](double x) {
    return opt_.bytes ? human_bytes(x) : fmt::format("{} {}", human_count(x), unit_);
  };
  std::string s = label_ + ": " + amount(double(done_));
  if (total_ > 0) {
    s += fmt::format(" / {} ({:.1f}%)", amount(double(total_)),
                     100.0 * double(std::min(done_, total_)) / double(total_));
  }
  s += opt_.bytes ? fmt::format(", {}/s", human_bytes(rate))
                  : fmt::format(", {} {}/s", human_count(rate), unit_);
  if (!note.empty()) s += fmt::format(", {}", note);
  if (finished_) {
    s += fmt::format(", done in {}", human_duration(t));
  } else if (total_ > 0 && rate > 0) {
    s += fmt::format(", ETA {}",
                     human_duration(double(std::max<int64_t>(total_ - done_, 0)) / rate));
  } else {
    s += fmt::format(", {} elapsed", human_duration(t));
  }
  return s;
}

void Progress::emit(const std::string& text, bool final) {
  if (mode_ == Mode::Tty) {
    std::string padded = text;
    if (padded.size() < last_width_) padded.append(last_width_ - padded.size(), ' ');
    last_width_ = text.size();
    std::fprintf(opt_.out, "\r%s%s", padded.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(opt_.out, "%s\n", text.c_str());
  }
  std::fflush(opt_.out);
}

void Progress::update(int64_t done, std::string_view note) {
  done_ = done;
  if (!note.empty()) note_ = note;
  if (mode_ == Mode::Quiet || finished_) return;
  const double t = timer_.seconds();
  const double interval = mode_ == Mode::Tty ? kTtyInterval : opt_.line_interval;
  if (t - last_print_ < interval) return;
  last_print_ = t;
  emit(line(note_), false);
}

void Progress::finish(std::string_view note) {
  if (finished_) return;
  finished_ = true;
  if (!note.empty()) note_ = note;
  if (mode_ == Mode::Quiet) return;
  emit(line(note_), true);
}

}  // namespace zaya
