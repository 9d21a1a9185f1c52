// Hang detection and localisation (hang_detector.h).
#include "resilience/hang_detector.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "core/assert.h"
#include "io/json_parse.h"

namespace zaya {

using heartbeat::Section;

namespace {

// An integer field within [lo, hi]; anything else (a float, a number out of range) is not a record
// (nlohmann's get<int>() of a float or of a huge value is a cast with undefined behaviour).
int64_t int_in(const nlohmann::json& v, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(hi)) throw std::out_of_range("heartbeat field");
    return int64_t(v.get<uint64_t>());
  }
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    throw std::out_of_range("heartbeat field");
  return v.get<int64_t>();
}

}  // namespace

std::optional<HeartbeatRecord> parse_heartbeat(const std::string& text) {
  nlohmann::json j;
  try {
    j = parse_json(text);  // the nesting limit: a record is one flat object
  } catch (const JsonError&) {
    return std::nullopt;
  }
  if (!j.is_object()) return std::nullopt;
  HeartbeatRecord r;
  try {
    r.attempt = int(int_in(j.at("attempt"), INT_MIN, INT_MAX));
    r.rank = int(int_in(j.at("rank"), INT_MIN, INT_MAX));
    r.world = int(int_in(j.at("world"), INT_MIN, INT_MAX));
    r.host = j.at("host").get<std::string>();
    r.pid = int_in(j.at("pid"), INT64_MIN, INT64_MAX);
    r.seq = int_in(j.at("seq"), INT64_MIN, INT64_MAX);
    r.step = int_in(j.at("step"), INT64_MIN, INT64_MAX);
    r.last_step = int_in(j.at("last_step"), INT64_MIN, INT64_MAX);
    r.collectives = int_in(j.at("collectives"), INT64_MIN, INT64_MAX);
    if (!heartbeat::parse_section(j.at("section").get<std::string>(), r.section))
      return std::nullopt;
    r.detail = j.at("detail").get<std::string>();
    r.max_step_s = j.at("max_step_s").get<double>();
    r.max_eval_s = j.value("max_eval_s", 0.0);
    r.max_checkpoint_s = j.value("max_checkpoint_s", 0.0);
    r.time = j.value("time", 0.0);
    r.beat = j.contains("beat") ? int_in(j.at("beat"), INT64_MIN, INT64_MAX) : 0;
    if (j.contains("addrs"))
      for (const auto& a : j.at("addrs")) r.addrs.push_back(a.get<std::string>());
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
  if (r.rank < 0 || r.world < 1) return std::nullopt;
  return r;
}

namespace {

bool in_step(Section s) {
  return s == Section::Data || s == Section::ForwardBackward || s == Section::Collective ||
         s == Section::Optimizer;
}

std::string section_list() {
  std::string names;
  for (int i = 0; i < int(Section::Done); ++i)
    names += std::string(heartbeat::section_name(Section(i))) + ", ";
  return names + "step (the four in-step sections)";
}

// "forward-backward of step 5", "collective all_reduce of step 5", "setup".
std::string where(const RankReport& r) {
  std::string s = heartbeat::section_name(r.section);
  if (!r.detail.empty()) s += " " + r.detail;
  if (r.step > 0) s += fmt::format(" of step {}", r.step);
  return s;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

void set_timeout(HangTimeouts& t, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  ZAYA_CHECK_INPUT(eq != std::string::npos && eq > 0,
                   "--timeout '{}': expected SECTION=SECONDS (sections: {})", assignment,
                   section_list());
  const std::string name = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  std::vector<Section> targets;
  Section s{};
  if (name == "step") {
    targets = {Section::Data, Section::ForwardBackward, Section::Collective, Section::Optimizer};
  } else if (heartbeat::parse_section(name, s) && s != Section::Done) {
    targets = {s};
  } else {
    fail("--timeout '{}': unknown section '{}' (sections: {})", assignment, name, section_list());
  }
  double seconds = -1;
  if (value == "auto") {
    for (Section target : targets)
      ZAYA_CHECK_INPUT(in_step(target),
                       "--timeout '{}': 'auto' is for the in-step sections (data, "
                       "forward-backward, collective, optimizer, step); give {} seconds",
                       assignment, name);
  } else {
    size_t used = 0;
    try {
      seconds = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZAYA_CHECK_INPUT(used == value.size() && used > 0 && seconds > 0 && std::isfinite(seconds),
                     "--timeout '{}': '{}' is not a number of seconds > 0 (or auto)", assignment,
                     value);
  }
  for (Section target : targets) t.seconds[int(target)] = seconds;
}

double section_timeout(const HangTimeouts& t, Section s, double max_step_s) {
  const double fixed = t.seconds[int(s)];
  if (fixed >= 0) return fixed;
  if (max_step_s <= 0) return t.before_first_step;
  return std::max(t.floor, t.factor * max_step_s);
}

HangVerdict detect_hang(const std::vector<RankState>& ranks, double now, const HangTimeouts& t) {
  double max_step_s = 0;
  for (const RankState& r : ranks)
    if (r.seen) max_step_s = std::max(max_step_s, r.record.max_step_s);

  // The ranks still running, as reports, with the point each has reached.
  std::vector<RankReport> running;
  std::vector<std::tuple<int64_t, int64_t, int>> point;  // collectives, step, section
  for (const RankState& r : ranks) {
    RankReport rep;
    rep.rank = r.rank;
    rep.seen = r.seen;
    if (r.seen) {
      rep.host = r.record.host;
      rep.section = r.record.section;
      rep.detail = r.record.detail;
      rep.step = r.record.step;
    }
    if (rep.section == Section::Done) continue;
    rep.silence_s = std::max(0.0, now - r.changed_at);
    rep.timeout_s = section_timeout(t, rep.section, max_step_s);
    running.push_back(rep);
    point.emplace_back(r.seen ? r.record.collectives : 0, rep.step, int(rep.section));
  }
  HangVerdict v;
  if (running.empty()) return v;

  const auto least = *std::min_element(point.begin(), point.end());
  bool fault_silent = false, all_silent = true;
  for (size_t i = 0; i < running.size(); ++i) {
    const bool silent = running[i].silence_s > running[i].timeout_s;
    all_silent &= silent;
    if (point[i] == least) {
      v.at_fault.push_back(running[i]);
      fault_silent |= silent;
    } else {
      v.waiting.push_back(running[i]);
    }
  }
  v.hung = fault_silent || all_silent;
  v.same_point = v.waiting.empty();
  if (!v.hung) return v;

  std::string msg;
  for (const RankReport& r : v.at_fault) {
    if (!msg.empty()) msg += "; ";
    msg += fmt::format("rank {} {} silent {:.1f} s in {} (timeout {:.1f} s)", r.rank,
                       r.seen ? "on host " + r.host : std::string("(no heartbeat yet)"),
                       r.silence_s, where(r), r.timeout_s);
  }
  // The waiting ranks, grouped by where they wait.
  std::map<std::string, std::vector<int>> by_place;
  for (const RankReport& r : v.waiting) {
    RankReport place = r;
    place.step = 0;
    by_place[where(place)].push_back(r.rank);
  }
  for (const auto& [place, who] : by_place)
    msg += fmt::format("; {} {} {} in {}", who.size() == 1 ? "rank" : "ranks", rank_list(who),
                       who.size() == 1 ? "waits" : "wait", place);
  if (v.same_point && running.size() > 1) {
    msg += v.at_fault.front().section == Section::Collective
               ? "; every rank is at the same point: the fault is inside the collective (or the "
                 "network)"
               : "; every rank is stuck at the same point";
  }
  v.message = msg;
  return v;
}

}  // namespace zaya
