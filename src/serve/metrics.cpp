// The /metrics page (see metrics.h). Numbers are written as Go's strconv.ParseFloat reads them
// (what Prometheus's parser uses): integers as integers, others in fmt's shortest round-trip form,
// infinities as +Inf/-Inf.
#include "serve/metrics.h"

#include <fmt/format.h>

#include <cmath>

#include "core/assert.h"

namespace zaya {

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v));
  return fmt::format("{}", v);
}

std::string escape(std::string_view s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quotes)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

bool valid_name(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

void PrometheusText::header(std::string_view name, std::string_view type, std::string_view help) {
  ZAYA_ASSERT(valid_name(name), "metric name '{}'", name);
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape(help, false), name, type);
}

void PrometheusText::sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      ZAYA_ASSERT(valid_name(labels[i].first), "label name '{}'", labels[i].first);
      out_ +=
          fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape(labels[i].second, true));
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += number(value);
  out_ += '\n';
}

void PrometheusText::counter(std::string_view name, std::string_view help, double value) {
  header(name, "counter", help);
  sample(name, {}, value);
}

void PrometheusText::gauge(std::string_view name, std::string_view help, double value) {
  header(name, "gauge", help);
  sample(name, {}, value);
}

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help,
                            const std::vector<std::pair<Labels, double>>& samples) {
  header(name, type, help);
  for (const auto& [labels, v] : samples) sample(name, labels, v);
}

void PrometheusText::histogram(std::string_view name, std::string_view help, const Histogram& h) {
  header(name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket";
  int64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    sample(bucket, {{"le", number(h.bounds[i])}}, double(cumulative));
  }
  sample(bucket, {{"le", "+Inf"}}, double(h.count));
  sample(std::string(name) + "_sum", {}, h.sum);
  sample(std::string(name) + "_count", {}, double(h.count));
}

std::string metrics_text(const EngineStats& st, const ServerGauges& server) {
  PrometheusText p;
  p.counter("zaya_requests_submitted_total", "Generation requests accepted by the engine.",
            double(st.submitted));
  std::vector<std::pair<PrometheusText::Labels, double>> finished;
  for (FinishReason r : {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled})
    finished.push_back(
        {{{"finish_reason", std::string(enum_word(r))}}, double(st.finished[size_t(r)])});
  p.family("zaya_requests_total", "counter",
           "Requests ended, by finish reason (a request of n choices counts once per choice).",
           finished);
  p.gauge("zaya_requests_running", "Requests admitted to the batch and not yet done.",
          double(st.running));
  p.gauge("zaya_requests_queued", "Requests waiting for a batch slot.", double(st.queued));
  p.gauge("zaya_http_requests_in_flight", "HTTP generation requests not yet answered.",
          double(server.in_flight));
  p.gauge("zaya_http_connections", "Open client connections.", double(server.connections));
  p.counter("zaya_prompt_tokens_total",
            "Prompt tokens of admitted requests: run through the model or restored from the "
            "prefix cache.",
            double(st.prompt_tokens + st.prompt_tokens_cached));
  p.counter("zaya_prompt_tokens_computed_total", "Prompt tokens run through the model (prefill).",
            double(st.prompt_tokens));
  p.counter("zaya_prefix_cache_prompt_tokens_total",
            "Prompt tokens restored from the prefix cache instead of prefilled.",
            double(st.prompt_tokens_cached));
  p.counter("zaya_generation_tokens_total", "Tokens generated (drawn, every choice).",
            double(st.generated_tokens));
  p.gauge("zaya_prompt_tokens_per_second",
          "Prompt tokens run per second over the last window (zaya_rate_window_seconds).",
          st.prompt_tokens_per_second);
  p.gauge("zaya_generation_tokens_per_second",
          "Tokens generated per second over the last window (zaya_rate_window_seconds).",
          st.generated_tokens_per_second);
  p.gauge("zaya_rate_window_seconds", "The window of the per-second gauges.", st.window_seconds);
  p.histogram("zaya_time_to_first_token_seconds",
              "Seconds from a request's arrival at the engine to its first token.", st.ttft);
  p.gauge("zaya_batch_size", "Sequences (prompt chunks and decoding choices) in the last step.",
          double(st.batch));
  p.histogram("zaya_step_batch_size", "Sequences per engine step.", st.batch_sizes);
  p.counter("zaya_engine_steps_total", "Engine steps (forward passes).", double(st.steps));
  p.counter("zaya_prefill_seconds_total", "Seconds spent in steps that ran prompt tokens.",
            st.prefill_seconds);
  p.counter("zaya_decode_seconds_total", "Seconds spent in steps that only decoded.",
            st.decode_seconds);
  p.counter("zaya_prefix_cache_hits_total", "Requests that resumed from a cached prefix.",
            double(st.prefix.hits));
  p.counter("zaya_prefix_cache_misses_total", "Requests that found no cached prefix.",
            double(st.prefix.misses));
  p.counter("zaya_prefix_cache_inserts_total", "Block snapshots stored.",
            double(st.prefix.inserts));
  p.counter("zaya_prefix_cache_evictions_total", "Block snapshots evicted (least recently used).",
            double(st.prefix.evictions));
  p.gauge("zaya_prefix_cache_bytes", "Bytes the prefix cache holds.", double(st.prefix.bytes));
  p.gauge("zaya_prefix_cache_max_bytes", "The prefix cache's bound (0: disabled).",
          double(st.prefix.max_bytes));
  p.gauge("zaya_prefix_cache_entries", "Block snapshots the prefix cache holds.",
          double(st.prefix.entries));
  return p.text();
}

}  // namespace zaya
