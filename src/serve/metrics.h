// /metrics: the engine's and the server's counters in Prometheus's text exposition format 0.0.4
// (docs/serving.md, "Metrics"): per family a `# HELP name text` and a `# TYPE name
// counter|gauge|histogram` line, then its samples `name{label="value"} number`; histograms as
// cumulative `name_bucket{le="…"}` samples ending at le="+Inf", then `name_sum` and `name_count`.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "infer/engine.h"

namespace zaya {

// The Content-Type of the exposition.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// Writes metric families one after the other. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*; label
// values are escaped (\\, \", \n), HELP text too (\\, \n).
class PrometheusText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  void counter(std::string_view name, std::string_view help, double value);
  void gauge(std::string_view name, std::string_view help, double value);
  // One family of several labelled samples.
  void family(std::string_view name, std::string_view type, std::string_view help,
              const std::vector<std::pair<Labels, double>>& samples);
  void histogram(std::string_view name, std::string_view help, const Histogram& h);
  const std::string& text() const { return out_; }

 private:
  void header(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const Labels& labels, double value);
  std::string out_;
};

// What the server adds to the engine's counters.
struct ServerGauges {
  int64_t in_flight = 0;    // HTTP generation requests not yet answered
  int64_t connections = 0;  // open client connections
};

// The whole /metrics page.
std::string metrics_text(const EngineStats& st, const ServerGauges& server);

}  // namespace zaya
