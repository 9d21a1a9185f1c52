// The goodput report (goodput.h): every second of the wall time assigned to exactly one part.
#include "resilience/goodput.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/assert.h"

namespace zaya {

using nlohmann::json;

AttemptEvents parse_events(const std::string& text) {
  AttemptEvents ev;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) {
      ++ev.torn_lines;
      continue;
    }
    try {
      const std::string kind = j["event"];
      if (kind == "start") {
        ev.started = true;
        ev.resumed_step = j.value("resumed_step", int64_t(0));
        ev.setup_s = j.value("setup_s", 0.0);
      } else if (kind == "step") {
        AttemptEvents::Item it;
        it.step = j.at("step").get<int64_t>();
        it.step_s = std::max(0.0, j.value("step_s", 0.0));
        it.after_s = std::max(0.0, j.value("after_s", 0.0));
        it.skipped = j.value("skipped", false);
        ev.items.push_back(it);
      } else if (kind == "rollback") {
        AttemptEvents::Item it;
        it.rollback = true;
        it.step = j.at("step").get<int64_t>();
        it.to_step = j.at("to_step").get<int64_t>();
        it.seconds = std::max(0.0, j.value("seconds", 0.0));
        ev.items.push_back(it);
        ev.rollbacks.push_back(j);
      } else if (kind == "anomaly") {
        ev.anomalies.push_back(j);
      } else if (kind == "straggler") {
        ev.stragglers.push_back(j);
      } else if (kind == "done") {
        ev.done = true;
      }
    } catch (const json::exception&) {
      ++ev.torn_lines;
    }
  }
  return ev;
}

std::vector<FiredFault> parse_faults_fired(const std::string& text) {
  std::vector<FiredFault> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) continue;
    try {
      out.push_back({line.substr(0, a), std::stoi(line.substr(a + 1, b - a - 1)),
                     std::stoi(line.substr(b + 1))});
    } catch (const std::exception&) {
    }
  }
  return out;
}

const char* attempt_end_name(AttemptEnd e) {
  switch (e) {
    case AttemptEnd::Completed:
      return "completed";
    case AttemptEnd::Crashed:
      return "crash";
    case AttemptEnd::Hung:
      return "hang";
    case AttemptEnd::Stopped:
      return "stopped";
  }
  return "?";
}

namespace {

// "3-5, 9"
std::string step_ranges(const std::vector<int64_t>& steps) {
  std::string s;
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j + 1 < steps.size() && steps[j + 1] == steps[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? fmt::format("{}", steps[i]) : fmt::format("{}-{}", steps[i], steps[j]);
    i = j + 1;
  }
  return s;
}

struct Failure {
  double detection = 0, restart = 0, recomputed = 0, other = 0;
  std::vector<int64_t> recomputed_steps;
};

// A step of the current lineage: which attempt ran it and what it cost (scaled).
struct Kept {
  size_t attempt;  // index into the attempts
  double step_s, after_s;
  bool skipped;
};

}  // namespace

json goodput_report(const GoodputInput& in) {
  const size_t n = in.attempts.size();
  const double wall = std::max(0.0, in.end_s - in.start_s);
  double productive = 0, after = 0, anomaly = 0, before_launch = 0, setup = 0, shutdown = 0;
  int64_t steps_skipped = 0, steps_recomputed = 0, steps_rolled_back = 0;
  std::vector<Failure> fail(n);
  std::vector<double> setups(n, 0), scales(n, 1);
  std::map<int64_t, Kept> lineage;

  before_launch = n ? std::max(0.0, in.attempts[0].launch_s - in.start_s) : wall;
  for (size_t i = 0; i < n; ++i) {
    const AttemptRecord& a = in.attempts[i];
    const AttemptEvents& ev = a.events;
    const bool failed = a.end == AttemptEnd::Crashed || a.end == AttemptEnd::Hung;
    const double length = std::max(0.0, a.end_s - a.launch_s);
    double work = 0;
    for (const auto& it : ev.items) work += it.rollback ? it.seconds : it.step_s + it.after_s;
    double detection = failed ? std::clamp(a.end_s - a.progress_stop_s, 0.0, length) : 0.0;
    double setup_i = ev.started ? ev.setup_s : 0.0;
    if (!ev.started && failed) setup_i = length - detection;  // it failed in setup
    const double measured = setup_i + work + detection;
    const double scale = measured > length && measured > 0 ? length / measured : 1.0;
    scales[i] = scale;
    setup_i *= scale, detection *= scale;
    setups[i] = setup_i;
    fail[i].detection = detection;
    const double rest = std::max(0.0, length - setup_i - work * scale - detection);
    if (failed || a.end == AttemptEnd::Stopped)
      fail[i].other = rest;
    else
      shutdown += rest;

    auto lose = [&](int64_t step, const Kept& k, bool to_anomaly) {
      const double t = k.step_s + k.after_s;
      const AttemptRecord& ran = in.attempts[k.attempt];
      const bool ran_failed = ran.end == AttemptEnd::Crashed || ran.end == AttemptEnd::Hung;
      if (to_anomaly) {
        anomaly += t;
        ++steps_rolled_back;
      } else {
        // Lost because the attempt that ran it failed before a checkpoint kept it (or, for a
        // step kept by an attempt that did not fail, because of the failure just before this one).
        Failure& f = fail[ran_failed || i == 0 ? k.attempt : i - 1];
        f.recomputed += t;
        f.recomputed_steps.push_back(step);
        ++steps_recomputed;
      }
    };
    if (ev.started)
      for (auto it = lineage.upper_bound(ev.resumed_step); it != lineage.end();)
        lose(it->first, it->second, false), it = lineage.erase(it);
    for (const auto& it : ev.items) {
      if (it.rollback) {
        anomaly += it.seconds * scale;
        for (auto k = lineage.upper_bound(it.to_step); k != lineage.end();)
          lose(k->first, k->second, true), k = lineage.erase(k);
        continue;
      }
      if (auto old = lineage.find(it.step); old != lineage.end()) lose(it.step, old->second, true);
      lineage[it.step] = Kept{i, it.step_s * scale, it.after_s * scale, it.skipped};
    }
  }
  int64_t steps_kept = 0;
  for (const auto& [step, k] : lineage) {
    if (k.skipped) {
      anomaly += k.step_s + k.after_s;
      ++steps_skipped;
    } else {
      productive += k.step_s;
      after += k.after_s;
      ++steps_kept;
    }
  }
  // Setup: the first attempt's is overhead, each later one is the restart of the failure before.
  if (n) setup = setups[0];
  for (size_t i = 0; i < n; ++i) {
    const double gap = i + 1 < n ? std::max(0.0, in.attempts[i + 1].launch_s - in.attempts[i].end_s)
                                 : std::max(0.0, in.end_s - in.attempts[i].end_s);
    if (i + 1 < n)
      fail[i].restart = gap + setups[i + 1];
    else
      shutdown += gap;
  }

  json failures = json::array(), attempts = json::array();
  std::vector<std::string> unreachable;
  double failures_total = 0;
  for (size_t i = 0; i < n; ++i) {
    const AttemptRecord& a = in.attempts[i];
    const AttemptEvents& ev = a.events;
    int64_t steps = 0;
    for (const auto& it : ev.items) steps += !it.rollback;
    attempts.push_back({{"attempt", a.attempt},
                        {"launch_s", a.launch_s - in.start_s},
                        {"end_s", a.end_s - in.start_s},
                        {"outcome", attempt_end_name(a.end)},
                        {"exit", a.exit},
                        {"cause", a.cause},
                        {"resumed_step", ev.resumed_step},
                        {"setup_s", ev.setup_s},
                        {"steps", steps},
                        {"clock_scale", scales[i]},
                        {"torn_event_lines", ev.torn_lines},
                        {"hosts", a.hosts},
                        {"unreachable_hosts", a.unreachable_hosts},
                        {"left_running", a.left_running}});
    for (const std::string& h : a.unreachable_hosts)
      if (std::find(unreachable.begin(), unreachable.end(), h) == unreachable.end())
        unreachable.push_back(h);
    if (a.end == AttemptEnd::Completed) continue;
    const Failure& f = fail[i];
    const double total = f.detection + f.restart + f.recomputed + f.other;
    failures_total += total;
    failures.push_back({{"attempt", a.attempt},
                        {"kind", attempt_end_name(a.end)},
                        {"exit", a.exit},
                        {"cause", a.cause},
                        {"detection_s", f.detection},
                        {"restart_s", f.restart},
                        {"recomputed_s", f.recomputed},
                        {"recomputed_steps", f.recomputed_steps},
                        {"other_s", f.other},
                        {"total_s", total},
                        {"unreachable_hosts", a.unreachable_hosts}});
  }
  const double overhead = before_launch + setup + after + shutdown;
  const double sum = productive + overhead + anomaly + failures_total;

  json faults = json::array(), anomalies = json::array(), rollbacks = json::array(),
       stragglers = json::array();
  for (const FiredFault& f : in.faults)
    faults.push_back({{"spec", f.spec}, {"rank", f.rank}, {"attempt", f.attempt}});
  for (const AttemptRecord& a : in.attempts) {
    for (const json& e : a.events.anomalies) anomalies.push_back(e);
    for (const json& e : a.events.rollbacks) rollbacks.push_back(e);
    for (const json& e : a.events.stragglers) stragglers.push_back(e);
  }
  return {{"outcome", std::string(enum_word(in.outcome))},
          {"wall_s", wall},
          {"productive_s", productive},
          {"goodput", wall > 0 ? productive / wall : 0.0},
          {"overhead_s", overhead},
          {"overhead",
           {{"before_launch_s", before_launch},
            {"setup_s", setup},
            {"after_step_s", after},
            {"shutdown_s", shutdown}}},
          {"anomaly_s", anomaly},
          {"failures_s", failures_total},
          {"parts_sum_s", sum},
          {"attempts", attempts},
          {"restarts", n ? int64_t(n) - 1 : 0},
          {"failures", failures},
          {"unreachable_hosts", unreachable},
          {"steps_kept", steps_kept},
          {"steps_skipped", steps_skipped},
          {"steps_recomputed", steps_recomputed},
          {"steps_rolled_back", steps_rolled_back},
          {"faults_fired", faults},
          {"anomalies", anomalies},
          {"rollbacks", rollbacks},
          {"stragglers", stragglers}};
}

std::string goodput_summary(const json& r) {
  const double wall = r["wall_s"];
  const auto pct = [&](double v) { return wall > 0 ? 100 * v / wall : 0.0; };
  const json& o = r["overhead"];
  std::string s = fmt::format(
      "supervise: goodput: {}; wall {:.2f} s = productive {:.2f} s ({:.1f}%) + overhead {:.2f} s "
      "(before launch {:.2f}, setup {:.2f}, after steps {:.2f}, shutdown {:.2f}) + anomalies "
      "{:.2f} s + failures {:.2f} s\n",
      r["outcome"].get<std::string>(), wall, r["productive_s"].get<double>(),
      pct(r["productive_s"]), r["overhead_s"].get<double>(), o["before_launch_s"].get<double>(),
      o["setup_s"].get<double>(), o["after_step_s"].get<double>(), o["shutdown_s"].get<double>(),
      r["anomaly_s"].get<double>(), r["failures_s"].get<double>());
  s += fmt::format(
      "supervise: {} attempt(s), {} restart(s); steps kept {}, recomputed {}, skipped {}, rolled "
      "back {}\n",
      r["attempts"].size(), r["restarts"].get<int64_t>(), r["steps_kept"].get<int64_t>(),
      r["steps_recomputed"].get<int64_t>(), r["steps_skipped"].get<int64_t>(),
      r["steps_rolled_back"].get<int64_t>());
  for (const json& f : r["failures"]) {
    const std::vector<int64_t> steps = f["recomputed_steps"];
    s += fmt::format(
        "supervise:   attempt {} {} ({}): detection {:.2f} s, restart {:.2f} s, recomputed "
        "{:.2f} s{}, other {:.2f} s — {}\n",
        f["attempt"].get<int>(), f["kind"].get<std::string>(), f["exit"].get<std::string>(),
        f["detection_s"].get<double>(), f["restart_s"].get<double>(),
        f["recomputed_s"].get<double>(),
        steps.empty() ? std::string() : " (steps " + step_ranges(steps) + ")",
        f["other_s"].get<double>(), f["cause"].get<std::string>());
  }
  for (const json& f : r["faults_fired"])
    s += fmt::format("supervise:   fault fired: {} (rank {}, attempt {})\n",
                     f["spec"].get<std::string>(), f["rank"].get<int>(), f["attempt"].get<int>());
  for (const json& e : r["anomalies"])
    s += fmt::format("supervise:   anomaly: step {} {} (attempt {})\n", e.value("step", 0),
                     e.value("kind", "?"), e.value("attempt", 0));
  for (const json& e : r["rollbacks"])
    s += fmt::format("supervise:   rollback: after step {} to step {} (attempt {})\n",
                     e.value("step", 0), e.value("to_step", 0), e.value("attempt", 0));
  for (const json& e : r["stragglers"])
    s += fmt::format("supervise:   straggler: rank {} on {} at step {}, {:.2f}x the median\n",
                     e.value("rank", 0), e.value("host", "?"), e.value("step", 0),
                     e.value("ratio", 0.0));
  return s;
}

}  // namespace zaya
