// Progress of a long-running job on stderr (docs/cli.md: every long-running command shows
// progress with rate and ETA; --quiet silences it).
//   Tty   : one line redrawn in place ("\r…") at most every 0.1 s, ended with a newline by
//   finish(). Lines : a plain line every `line_interval` seconds (logs, pipes, CI) and one at
//   finish(). Quiet : nothing. Auto  : Tty when the stream is a terminal, else Lines (and Quiet
//   when quiet is set).
// Call from one thread only (the one that owns the job's loop).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/timer.h"

namespace zaya {

class Progress {
 public:
  enum class Mode { Auto, Tty, Lines, Quiet };
  struct Options {
    Mode mode = Mode::Auto;
    bool quiet = false;           // forces Quiet (the --quiet flag)
    bool bytes = false;           // counts are bytes: shown as KiB/MiB/GiB and MiB/s
    double line_interval = 10.0;  // Lines mode: seconds between lines
    std::FILE* out = stderr;
  };

  // `label` prefixes every line ("data prepare"); `unit` names what is counted ("docs"); a
  // total of 0 means unknown (no percentage or ETA).
  Progress(std::string label, int64_t total, std::string unit, Options opt);
  Progress(std::string label, int64_t total, std::string unit, bool quiet = false);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Sets the amount done so far (monotone); `note` is appended to the line ("1.2M tokens").
  void update(int64_t done, std::string_view note = {});
  void add(int64_t n, std::string_view note = {}) { update(done_ + n, note); }
  // Prints the final line (Tty: ends the redrawn line). Idempotent. Without it the destructor
  // only ends a Tty line (no "done" after an error).
  void finish(std::string_view note = {});

  Mode mode() const { return mode_; }
  double seconds() const { return timer_.seconds(); }

 private:
  std::string line(std::string_view note) const;
  void emit(const std::string& text, bool final);

  std::string label_, unit_;
  int64_t total_ = 0, done_ = 0;
  Options opt_;
  Mode mode_;
  Timer timer_;
  double last_print_ = -1e30;
  size_t last_width_ = 0;  // Tty: length of the previous line, to blank leftovers
  std::string note_;
  bool finished_ = false;
};

// "12.3k", "4.56M", "7.89G" (SI); "512 B", "3.0 MiB", "1.2 GiB" (binary) — short human numbers.
std::string human_count(double x);
std::string human_bytes(double x);
// "42s", "3m07s", "2h05m", "3d04h".
std::string human_duration(double seconds);

}  // namespace zaya
