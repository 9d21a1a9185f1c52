// GET /metrics of `zaya serve` end to end, on a tiny random model with the toy tokenizer: the page
// parses as Prometheus's text format 0.0.4 (HELP and TYPE before each family's samples, one family
// in one place, names and labels well formed, numbers readable, histogram buckets cumulative up to
// le="+Inf" = _count) with its Content-Type; between a scrape before and one after requests the
// counters move by what the requests did (finish reasons, prompt and generated tokens from the
// responses' usage, prefix-cache hits and the prompt tokens they restored, TTFT observations) and
// the gauges are back at rest; with --api-key it needs the key like the API, /health does not; a
// wrong method is 405.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "infer/whole_model_dir.h"
#include "serve/serve_process.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kScratch =
    fs::path(::testing::TempDir()) / ("zaya_metrics_" + std::to_string(getpid()));
struct RemoveScratch {
  ~RemoveScratch() { fs::remove_all(kScratch); }
} remove_scratch;

const fs::path& tiny_model() {
  static const fs::path dir = [] {
    const fs::path d = kScratch / "tiny-metrics";
    fs::remove_all(d);
    fs::create_directories(d);
    tiny_toy_model(13).save_dir(d.string());
    add_model_extras(d.string(), /*model_max_length=*/0);
    return d;
  }();
  return dir;
}

// A scrape parsed: every sample by its series (name and labels as written), each family's type.
struct Scrape {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  double at(const std::string& series) const {
    auto it = samples.find(series);
    EXPECT_NE(it, samples.end()) << "no sample " << series;
    return it == samples.end() ? NAN : it->second;
  }
};

// Parses the exposition format strictly (the subset a server writes: no timestamps, no
// comments other than HELP and TYPE); every violation is a test failure naming the line.
Scrape parse_prometheus(const std::string& text) {
  Scrape s;
  const std::string name = "[a-zA-Z_:][a-zA-Z0-9_:]*";
  const std::regex help("# HELP (" + name + ") (.*)"),
      type("# TYPE (" + name + ") (counter|gauge|histogram)");
  const std::string label = R"([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")";
  const std::regex sample("(" + name + ")(\\{" + label + "(?:," + label + ")*\\})? (\\S+)");
  std::set<std::string> helped, done;  // families with HELP; families already left behind
  std::string current;                 // the family whose samples come now
  EXPECT_TRUE(!text.empty() && text.back() == '\n') << "the page must end with a newline";
  std::istringstream in(text);
  std::string line;
  auto family_of = [&](const std::string& n) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (n.size() > sfx.size() && n.compare(n.size() - sfx.size(), sfx.size(), sfx) == 0) {
        const std::string base = n.substr(0, n.size() - sfx.size());
        if (s.types.count(base) && s.types[base] == "histogram") return base;
      }
    }
    return n;
  };
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      EXPECT_FALSE(helped.count(m[1])) << "second HELP: " << line;
      EXPECT_FALSE(done.count(m[1])) << "family split: " << line;
      helped.insert(m[1]);
      if (current != m[1].str()) done.insert(current);
      current = m[1];
    } else if (std::regex_match(line, m, type)) {
      EXPECT_FALSE(s.types.count(m[1])) << "second TYPE: " << line;
      EXPECT_EQ(current, m[1].str()) << "TYPE without its HELP just before: " << line;
      s.types[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample)) {
      const std::string fam = family_of(m[1]);
      EXPECT_EQ(fam, current) << "sample outside its family's block: " << line;
      EXPECT_TRUE(s.types.count(fam)) << "sample before its TYPE: " << line;
      const std::string v = m[3];
      char* end = nullptr;
      const double x = v == "+Inf"   ? INFINITY
                       : v == "-Inf" ? -INFINITY
                                     : std::strtod(v.c_str(), &end);
      if (v != "+Inf" && v != "-Inf") {
        EXPECT_TRUE(end && *end == 0) << "bad number: " << line;
      }
      const std::string series = m[1].str() + m[2].str();
      EXPECT_FALSE(s.samples.count(series)) << "duplicate series: " << line;
      s.samples[series] = x;
    } else {
      ADD_FAILURE() << "not a line of the text format: '" << line << "'";
    }
  }
  // Histograms: cumulative buckets, +Inf equal to _count.
  for (const auto& [fam, t] : s.types) {
    if (t != "histogram") continue;
    double prev = 0;
    bool inf = false;
    for (const auto& [series, v] : s.samples) {
      if (series.rfind(fam + "_bucket{", 0) != 0) continue;
      if (series == fam + "_bucket{le=\"+Inf\"}") {
        inf = true;
        EXPECT_EQ(v, s.at(fam + "_count")) << fam;
      }
    }
    EXPECT_TRUE(inf) << fam << " has no +Inf bucket";
    // Buckets in order of their bounds (the map orders them as strings).
    std::vector<std::pair<double, double>> buckets;
    const std::regex le(fam + "_bucket\\{le=\"([^\"]+)\"\\}");
    for (const auto& [series, v] : s.samples) {
      std::smatch m;
      if (std::regex_match(series, m, le))
        buckets.push_back(
            {m[1] == "+Inf" ? INFINITY : std::strtod(m[1].str().c_str(), nullptr), v});
    }
    std::sort(buckets.begin(), buckets.end());
    for (const auto& [b, v] : buckets) {
      EXPECT_GE(v, prev) << fam << " bucket " << b << " is not cumulative";
      prev = v;
    }
    EXPECT_TRUE(s.samples.count(fam + "_sum")) << fam;
  }
  return s;
}

Scrape scrape(const ServeProcess& s, const std::string& curl_args = "") {
  const HttpReply r = s.request("GET", "/metrics", "", curl_args);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.headers.find("Content-Type: text/plain; version=0.0.4"), std::string::npos)
      << r.headers;
  return parse_prometheus(r.body);
}

json ids_json(const std::vector<int>& ids) {
  json a = json::array();
  for (int i : ids) a.push_back(i);
  return a;
}

std::vector<int> ids_from(int seed, int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(3 + (seed * 131 + i * 37) % 1000);
  return v;
}

TEST(ServeMetrics, CountersMoveWithRequestsAndThePageParses) {
  ServeProcess s(kScratch / "counters", {"--model", tiny_model().string(), "--threads", "1",
                                         "--prefix-cache-block", "8", "--quiet"});
  ASSERT_TRUE(s.started()) << s.why_not();
  const Scrape a = scrape(s);
  for (const char* fam : {"zaya_requests_total", "zaya_requests_running", "zaya_requests_queued",
                          "zaya_prompt_tokens_total", "zaya_generation_tokens_total",
                          "zaya_prefix_cache_prompt_tokens_total", "zaya_prefix_cache_hits_total",
                          "zaya_prefix_cache_misses_total", "zaya_prefix_cache_bytes",
                          "zaya_prefix_cache_entries", "zaya_batch_size", "zaya_step_batch_size",
                          "zaya_generation_tokens_per_second", "zaya_time_to_first_token_seconds"})
    EXPECT_TRUE(a.types.count(fam)) << fam;
  EXPECT_EQ(a.types.at("zaya_time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(a.types.at("zaya_prompt_tokens_total"), "counter");
  EXPECT_EQ(a.types.at("zaya_requests_queued"), "gauge");
  EXPECT_EQ(a.at("zaya_prefix_cache_max_bytes"), double(int64_t(1024) << 20));

  // Two turns sharing a 30-token prefix (the second resumes at 24, the last boundary of the
  // first); usage says what each cost.
  const std::vector<int> first = ids_from(1, 30);
  std::vector<int> second = first;
  for (int id : ids_from(2, 7)) second.push_back(id);
  int64_t prompt = 0, completion = 0;
  for (const auto& p : {first, second}) {
    const HttpReply r =
        s.request("POST", "/v1/completions",
                  json{{"prompt", ids_json(p)}, {"max_tokens", 5}, {"temperature", 0}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    prompt += r.j["usage"]["prompt_tokens"].get<int64_t>();
    completion += r.j["usage"]["completion_tokens"].get<int64_t>();
    EXPECT_EQ(r.j["choices"][0]["finish_reason"], "length") << r.body;
  }
  EXPECT_EQ(prompt, 30 + 37);
  const Scrape b = scrape(s);
  auto moved = [&](const std::string& series) { return b.at(series) - a.at(series); };
  EXPECT_EQ(moved("zaya_requests_total{finish_reason=\"length\"}"), 2);
  EXPECT_EQ(moved("zaya_requests_total{finish_reason=\"stop\"}"), 0);
  EXPECT_EQ(moved("zaya_requests_submitted_total"), 2);
  EXPECT_EQ(moved("zaya_prompt_tokens_total"), double(prompt));
  EXPECT_EQ(moved("zaya_generation_tokens_total"), double(completion));
  EXPECT_EQ(moved("zaya_prefix_cache_hits_total"), 1);
  EXPECT_EQ(moved("zaya_prefix_cache_misses_total"), 1);
  EXPECT_EQ(moved("zaya_prefix_cache_prompt_tokens_total"), 24);
  EXPECT_EQ(moved("zaya_prompt_tokens_computed_total"), double(prompt - 24));
  EXPECT_EQ(b.at("zaya_prefix_cache_entries"), 4);  // boundaries 8, 16, 24 of the first; 32
  EXPECT_GT(b.at("zaya_prefix_cache_bytes"), 0);
  EXPECT_EQ(moved("zaya_time_to_first_token_seconds_count"), 2);
  EXPECT_GT(moved("zaya_time_to_first_token_seconds_sum"), 0);
  EXPECT_GT(moved("zaya_step_batch_size_count"), 0);
  EXPECT_GT(b.at("zaya_generation_tokens_per_second"), 0);
  EXPECT_EQ(b.at("zaya_requests_running"), 0);
  EXPECT_EQ(b.at("zaya_requests_queued"), 0);
  EXPECT_EQ(b.at("zaya_http_requests_in_flight"), 0);

  const HttpReply post = s.request("POST", "/metrics", "{}");
  EXPECT_EQ(post.status, 405) << post.body;
}

TEST(ServeMetrics, TheApiKeyGuardsMetricsAndTheCacheCanBeOff) {
  ServeProcess s(kScratch / "key", {"--model", tiny_model().string(), "--threads", "1", "--api-key",
                                    "sk-metrics", "--prefix-cache-mb", "0", "--quiet"});
  ASSERT_TRUE(s.started()) << s.why_not();
  const HttpReply no_key = s.request("GET", "/metrics");
  EXPECT_EQ(no_key.status, 401) << no_key.body;
  EXPECT_EQ(s.request("GET", "/health").status, 200);
  const std::string key = "-H " + shell_quote("Authorization: Bearer sk-metrics");
  const HttpReply r = s.request(
      "POST", "/v1/completions",
      json{{"prompt", ids_json(ids_from(3, 20))}, {"max_tokens", 2}, {"temperature", 0}}.dump(),
      key);
  ASSERT_EQ(r.status, 200) << r.body;
  const Scrape m = scrape(s, key);
  EXPECT_EQ(m.at("zaya_prefix_cache_max_bytes"), 0);
  EXPECT_EQ(m.at("zaya_prefix_cache_hits_total") + m.at("zaya_prefix_cache_misses_total"), 0);
  EXPECT_EQ(m.at("zaya_prompt_tokens_total"), 20);
  EXPECT_EQ(m.at("zaya_requests_total{finish_reason=\"length\"}"), 1);
}

}  // namespace
