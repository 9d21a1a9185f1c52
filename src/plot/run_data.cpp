// The readers of `zaya plot` (see run_data.h).
#include "plot/run_data.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya::plot {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* type_of(const json& v) {
  return v.is_null()      ? "null"
         : v.is_string()  ? "a string"
         : v.is_boolean() ? "a boolean"
         : v.is_array()   ? "an array"
         : v.is_object()  ? "an object"
                          : "a number";
}

// The number at `key` of a metrics line: NaN when absent or null.
double metric(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return NAN;
  if (!it->is_number()) fail("{}: \"{}\" is {}, not a number", where, key, type_of(*it));
  return it->get<double>();
}

// An integer ≥ 0 at `key`; `required`: absent is an error, else −1.
int64_t count(const json& j, const char* key, const std::string& where, bool required) {
  const auto it = j.find(key);
  if (it == j.end() || (!required && it->is_null())) {
    if (required) fail("{}: no \"{}\" (every line of a metrics file has one)", where, key);
    return -1;
  }
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail("{}: \"{}\" {} is too large", where, key, it->dump());
    return int64_t(it->get<uint64_t>());
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    fail("{}: \"{}\" is {}, not a whole number >= 0", where, key,
         it->is_number() ? it->dump() : type_of(*it));
  return it->get<int64_t>();
}

}  // namespace

RunMetrics parse_metrics(std::string_view text, const std::string& name) {
  RunMetrics m;
  m.path = name;
  int64_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const bool complete = nl != std::string_view::npos;
    const std::string_view line = text.substr(pos, complete ? nl - pos : std::string_view::npos);
    pos = complete ? nl + 1 : text.size();
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{} line {}", name, line_no);
    json j;
    try {
      j = parse_json(line);
    } catch (const JsonError& e) {
      if (!complete) {  // the trainer is writing it now
        m.torn_last_line = true;
        break;
      }
      fail("{}: not JSON ({}): is this a train.metrics file?", where, e.what());
    }
    if (!j.is_object()) fail("{}: not a JSON object: is this a train.metrics file?", where);
    const bool train = j.contains("loss"), val = j.contains("val_loss");
    if (!train && !val)
      fail("{}: neither \"loss\" nor \"val_loss\": not a line of a train.metrics file", where);
    const int64_t step = count(j, "step", where, true);
    if (train) {
      MetricsRow r;
      r.step = step;
      r.loss = metric(j, "loss", where);
      r.grad_norm = metric(j, "grad_norm", where);
      r.lr = metric(j, "lr", where);
      r.tokens = metric(j, "tokens", where);
      r.tokens_per_s = metric(j, "tokens_per_s", where);
      r.mfu = metric(j, "mfu", where);
      r.expert_load_entropy = metric(j, "expert_load_entropy", where);
      r.time = metric(j, "time", where);
      r.skipped = count(j, "skipped", where, false);
      if (!m.rows.empty() && step <= m.rows.back().step) {  // the run went back
        m.rollbacks.push_back({m.rows.back().step, step - 1});
        std::erase_if(m.rows, [&](const MetricsRow& x) { return x.step >= step; });
        std::erase_if(m.val, [&](const ValPoint& x) { return x.step >= step; });
      }
      m.rows.push_back(r);
    }
    if (val) {
      const double v = metric(j, "val_loss", where);
      if (!m.val.empty() && step <= m.val.back().step)
        std::erase_if(m.val, [&](const ValPoint& x) { return x.step >= step; });
      m.val.push_back({step, v});
    }
  }
  if (m.rows.empty() && m.val.empty())
    fail("{}: {}: the trainer appends one line per step once the first step is done", name,
         m.torn_last_line ? "no complete line yet" : "empty");
  int64_t before = 0;
  for (const MetricsRow& r : m.rows) {
    if (r.skipped < 0) continue;
    if (r.skipped > before) m.skipped_steps.push_back(r.step);
    before = r.skipped;
  }
  return m;
}

RunMetrics read_metrics(const std::string& path) {
  return parse_metrics(read_text_file(path, "metrics file"), path);
}

namespace {

double number(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) fail("{}: no \"{}\": is this a goodput report of zaya supervise?", where, key);
  if (!it->is_number() || !std::isfinite(it->get<double>()))
    fail("{}: \"{}\" is {}, not a number", where, key, it->is_number() ? it->dump() : type_of(*it));
  return std::max(0.0, it->get<double>());
}

int64_t integer(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return 0;
  if (!it->is_number_integer())
    fail("{}: \"{}\" is {}, not a whole number", where, key,
         it->is_number() ? it->dump() : type_of(*it));
  return it->get<int64_t>();
}

std::string text_at(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return "";
  if (!it->is_string()) fail("{}: \"{}\" is {}, not a string", where, key, type_of(*it));
  return it->get<std::string>();
}

const json& array_at(const json& j, const char* key, const std::string& where) {
  static const json empty = json::array();
  const auto it = j.find(key);
  if (it == j.end()) return empty;
  if (!it->is_array()) fail("{}: \"{}\" is {}, not an array", where, key, type_of(*it));
  return *it;
}

const json& object_in(const json& a, size_t i, const std::string& where, const char* key) {
  if (!a[i].is_object()) fail("{}: \"{}\"[{}] is not an object", where, key, i);
  return a[i];
}

}  // namespace

Goodput parse_goodput(std::string_view text, const std::string& name) {
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: not JSON ({}): is this a goodput report of zaya supervise?", name, e.what());
  }
  if (!j.is_object())
    fail("{}: not a JSON object: is this a goodput report of zaya supervise?", name);
  Goodput g;
  g.path = name;
  g.outcome = text_at(j, "outcome", name);
  g.wall_s = number(j, "wall_s", name);
  g.productive_s = number(j, "productive_s", name);
  g.anomaly_s = number(j, "anomaly_s", name);
  const auto o = j.find("overhead");
  if (o == j.end() || !o->is_object())
    fail(
        "{}: \"overhead\" is missing or not an object: is this a goodput report of zaya "
        "supervise?",
        name);
  const std::string ow = name + " \"overhead\"";
  g.before_launch_s = number(*o, "before_launch_s", ow);
  g.setup_s = number(*o, "setup_s", ow);
  g.after_step_s = number(*o, "after_step_s", ow);
  g.shutdown_s = number(*o, "shutdown_s", ow);
  const json& failures = array_at(j, "failures", name);
  for (size_t i = 0; i < failures.size(); ++i) {
    const json& f = object_in(failures, i, name, "failures");
    const std::string w = fmt::format("{} \"failures\"[{}]", name, i);
    g.detection_s += number(f, "detection_s", w);
    g.restart_s += number(f, "restart_s", w);
    g.recomputed_s += number(f, "recomputed_s", w);
    g.other_s += number(f, "other_s", w);
  }
  const json& attempts = array_at(j, "attempts", name);
  for (size_t i = 0; i < attempts.size(); ++i) {
    const json& a = object_in(attempts, i, name, "attempts");
    const std::string w = fmt::format("{} \"attempts\"[{}]", name, i);
    g.attempts.push_back({integer(a, "attempt", w), number(a, "launch_s", w), number(a, "end_s", w),
                          text_at(a, "outcome", w), text_at(a, "cause", w)});
  }
  const json& rollbacks = array_at(j, "rollbacks", name);
  for (size_t i = 0; i < rollbacks.size(); ++i) {
    const json& r = object_in(rollbacks, i, name, "rollbacks");
    const std::string w = fmt::format("{} \"rollbacks\"[{}]", name, i);
    g.rollbacks.push_back({integer(r, "step", w), integer(r, "to_step", w)});
  }
  g.steps_kept = integer(j, "steps_kept", name);
  g.steps_skipped = integer(j, "steps_skipped", name);
  g.steps_recomputed = integer(j, "steps_recomputed", name);
  g.steps_rolled_back = integer(j, "steps_rolled_back", name);
  return g;
}

Goodput read_goodput(const std::string& path) {
  return parse_goodput(read_text_file(path, "goodput report"), path);
}

namespace {

// A whole-file JSON object with the goodput report's headline keys.
bool looks_like_goodput(const std::string& path) {
  std::error_code ec;
  if (fs::file_size(path, ec) > (64u << 20) || ec) return false;
  try {
    const json j = parse_json(read_text_file(path, "file"));
    return j.is_object() && j.contains("wall_s") && j.contains("productive_s");
  } catch (const Error&) {
    return false;
  }
}

bool is_checkpoint_root(const fs::path& dir) {
  if (dir.filename() == "checkpoints") return true;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec) && e.path().filename().string().rfind("step_", 0) == 0) return true;
  return false;
}

}  // namespace

RunFiles find_run_files(const std::string& run) {
  std::error_code ec;
  const fs::path p(run);
  RunFiles f;
  if (fs::is_regular_file(p, ec)) {
    (looks_like_goodput(run) ? f.goodput : f.metrics) = run;
    f.folder = p.has_parent_path() ? p.parent_path().string() : ".";
    return f;
  }
  if (!fs::exists(p, ec)) fail("{}: no such file or directory (zaya plot RUN)", run);
  if (!fs::is_directory(p, ec)) fail("{}: not a file or a directory (zaya plot RUN)", run);
  f.folder = run;

  std::vector<fs::path> jsonl;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".jsonl" &&
        e.path().filename() != "events.jsonl")
      jsonl.push_back(e.path());
  std::sort(jsonl.begin(), jsonl.end());
  if (fs::is_regular_file(p / "metrics.jsonl", ec)) {
    f.metrics = (p / "metrics.jsonl").string();
  } else if (jsonl.size() == 1) {
    f.metrics = jsonl[0].string();
  } else if (jsonl.size() > 1) {
    std::string names;
    for (const fs::path& j : jsonl) names += (names.empty() ? "" : ", ") + j.filename().string();
    fail(
        "{}: no metrics.jsonl, and {} other .jsonl files ({}): name the metrics file "
        "(zaya plot FILE)",
        run, jsonl.size(), names);
  } else if (is_checkpoint_root(p)) {
    const fs::path up = (p / ".." / "metrics.jsonl").lexically_normal();
    if (fs::is_regular_file(up, ec)) f.metrics = up.string();
  }

  if (fs::is_regular_file(p / "goodput.json", ec)) {
    f.goodput = (p / "goodput.json").string();
  } else {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_directory(ec) && fs::is_regular_file(e.path() / "goodput.json", ec))
        found.push_back(e.path() / "goodput.json");
    std::sort(found.begin(), found.end());
    if (!found.empty()) f.goodput = found[0].string();
  }
  if (f.metrics.empty() && f.goodput.empty())
    fail(
        "{}: no metrics file here (metrics.jsonl): the trainer writes one where the config's "
        "train.metrics says (configs/kjv.toml: train.metrics = \"runs/kjv/metrics.jsonl\"); "
        "name that file or its folder, or set train.metrics and train again",
        run);
  return f;
}

}  // namespace zaya::plot
