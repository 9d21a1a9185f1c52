// The supervisor's loop (supervisor.h): attempt after attempt, each one launched, watched (exit,
// heartbeats, the stop signals) and ended; then the goodput report.
#include "resilience/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/assert.h"
#include "io/file.h"
#include "resilience/elastic.h"
#include "resilience/faults.h"
#include "resilience/fence.h"
#include "resilience/goodput.h"
#include "resilience/reach.h"
#include "resilience/subprocess.h"
#include "resilience/supervise_files.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) {
  g_stop = 1;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class... Args>
void say(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "supervise: {}\n", fmt::format(f, std::forward<Args>(args)...));
  std::fflush(stderr);
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// A child's stderr, passed through to ours as it comes, with its last lines kept.
struct ErrTail {
  std::string partial;
  std::deque<std::string> lines;

  void take(subprocess::Process& p) {
    std::string chunk;
    p.read_stderr(chunk);
    if (chunk.empty()) return;
    std::fwrite(chunk.data(), 1, chunk.size(), stderr);
    std::fflush(stderr);
    partial += chunk;
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos;) {
      lines.push_back(partial.substr(0, nl));
      partial.erase(0, nl + 1);
      if (lines.size() > 64) lines.pop_front();
    }
  }
  // The line that says why the job failed: "zaya: error: …" (its message), else an injected
  // fault's notice, else mpirun's notice of a dead rank; "" if none.
  std::string reason() const {
    std::vector<std::string> all(lines.begin(), lines.end());
    if (!partial.empty()) all.push_back(partial);
    const std::string error = "zaya: error: ";
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      if (size_t at = it->find(error); at != std::string::npos)
        return it->substr(at + error.size());
    for (const char* mark :
         {"zaya: fault injected ", "noticed that process rank", "exited on signal"})
      for (auto it = all.rbegin(); it != all.rend(); ++it)
        if (size_t at = it->find(mark); at != std::string::npos) return it->substr(at);
    return "";
  }
};

// Waits up to `seconds` for the child's stderr (passing it through), its end (true, `st` set) or
// a stop signal; looks at its exit every 50 ms, so a crash is seen at once. `alive`: the last
// time the child was seen running.
bool wait_a_poll(subprocess::Process& p, ErrTail& tail, double seconds, subprocess::ExitStatus& st,
                 double& alive) {
  const double until = now_s() + seconds;
  while (!g_stop) {
    const double before = now_s();
    if (p.poll(st)) return true;
    alive = before;
    const double left = until - now_s();
    if (left <= 0) break;
    const double slice = std::min(left, 0.05);
    struct pollfd pfd {
      p.stderr_fd(), POLLIN, 0
    };
    // poll waits the slice itself; sleep only where it did not (no pipe, or the pipe hung up).
    const int ready = p.stderr_fd() >= 0 ? ::poll(&pfd, 1, std::max(1, int(slice * 1000))) : -1;
    if (ready > 0 && (pfd.revents & POLLIN)) {
      tail.take(p);
    } else if (ready != 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(slice));
    }
  }
  return false;
}

// Sleeps up to `seconds`, in slices, until a stop signal. False if stopped.
bool pause(double seconds) {
  for (const double until = now_s() + seconds; !g_stop && now_s() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return !g_stop;
}

// What the supervisor knows of the job's hosts, from the heartbeats of every attempt.
struct Hosts {
  std::map<std::string, std::vector<std::string>> addrs;  // every host seen: its addresses
  std::set<std::string> lost;        // left out by an elastic restart: not probed again
  std::map<std::string, int> ranks;  // ranks per host in the newest attempt with heartbeats

  void learn(const std::map<int, RankState>& seen) {
    if (seen.empty()) return;
    ranks.clear();
    for (const auto& [rank, s] : seen) {
      ++ranks[s.record.host];
      if (!s.record.addrs.empty() || !addrs.count(s.record.host))
        addrs[s.record.host] = s.record.addrs;
    }
  }
  std::vector<HostAddresses> active() const {
    std::vector<HostAddresses> out;
    for (const auto& [host, a] : addrs)
      if (!lost.count(host)) out.push_back({host, a});
    return out;
  }
};

// "zmh3 (10.78.0.13)" for each unreachable host.
std::vector<std::string> unreachable_list(const std::vector<HostReach>& probes) {
  std::vector<std::string> out;
  for (const HostReach& r : probes) {
    if (r.reachable) continue;
    std::string a;
    for (const std::string& x : r.addrs) a += (a.empty() ? "" : ", ") + x;
    out.push_back(fmt::format("{} ({})", r.host, a));
  }
  return out;
}

// Probes every host the job runs on but this one (which a firewall may keep from answering its own
// probe, and which is there: the supervisor runs on it); none: nothing to probe.
std::vector<HostReach> probe(const SuperviseOptions& opt, const Hosts& hosts) {
  char self[256] = {};
  gethostname(self, sizeof self - 1);
  std::vector<HostAddresses> list;
  for (const HostAddresses& h : hosts.active())
    if (h.host != self) list.push_back(h);
  if (list.empty()) return {};
  return probe_hosts(list, opt.probe_port, opt.probe_timeout_s);
}

// The fencing watchdog's period on the ranks (fence::start_watchdog's default): a rank alive
// after a tear-down advances its heartbeat's beat at least once in three of them.
constexpr double kBeatPeriod = 0.5;

// One attempt: launched, watched until it ends, ended. Fills the record (events included).
struct Attempt {
  const SuperviseOptions& opt;
  const std::string& dir;
  Hosts& hosts;
  AttemptRecord rec;
  bool any_step = false;

  // The attempt's ranks whose watchdog beats (its heartbeat's `beat`), as they are now.
  std::map<int, HeartbeatRecord> beats_now(int n) const {
    std::map<int, HeartbeatRecord> out;
    for (const HeartbeatRecord& r : read_heartbeats(dir))
      if (r.attempt == n && r.beat > 0 && r.section != heartbeat::Section::Done) out[r.rank] = r;
    return out;
  }

  // After the tear-down: the attempt's ranks whose heartbeat still beats since `before` (taken as
  // the tear-down ended, before DIR/attempt said the attempt ended): alive on a host the
  // supervisor could not signal. A fenced rank's watchdog beats once more, then exits. Waits up
  // to the grace period for them to go and says which did not.
  void check_left_running(int n, std::map<int, HeartbeatRecord> before) {
    if (before.empty() || !pause(3 * kBeatPeriod)) return;
    auto beating = [&](std::map<int, HeartbeatRecord>& last) {
      std::map<int, HeartbeatRecord> alive;
      for (const HeartbeatRecord& r : read_heartbeats(dir))
        if (auto it = last.find(r.rank);
            it != last.end() && r.attempt == n && r.beat != it->second.beat)
          alive[r.rank] = r;
      last = alive;
      return alive;
    };
    std::map<int, HeartbeatRecord> alive = beating(before);
    for (const auto& [rank, r] : alive)
      rec.left_running.push_back(fmt::format("rank {} on host {} (pid {})", rank, r.host, r.pid));
    if (alive.empty()) return;
    std::string list;
    for (const std::string& l : rec.left_running) list += (list.empty() ? "" : ", ") + l;
    say("after the tear-down still running: {}; fenced ({}/attempt says attempt {} ended)", list,
        dir, n);
    for (const double until = now_s() + std::max(opt.grace_s, 3 * kBeatPeriod);
         !alive.empty() && now_s() < until && pause(3 * kBeatPeriod);)
      alive = beating(alive);
    std::string left;
    for (const auto& [rank, r] : alive)
      left += fmt::format("{}rank {} on host {} (pid {})", left.empty() ? "" : ", ", rank, r.host,
                          r.pid);
    if (!left.empty()) say("still running after the fence: {} (does its host see {}?)", left, dir);
  }

  void run(int n, const std::vector<std::string>& argv) {
    rec.attempt = n;
    remove_attempt_files(dir);
    fence::write_attempt(dir, n, /*ended=*/false);
    subprocess::Options so;
    so.env = {{"ZAYA_SUPERVISE_DIR", dir}, {"ZAYA_SUPERVISE_ATTEMPT", std::to_string(n)}};
    so.pipe_stderr = true;
    rec.launch_s = rec.progress_stop_s = now_s();
    subprocess::Process p = subprocess::Process::spawn(argv, so);
    say("attempt {} started (pid {}): {}", n, p.pid(), join(argv));
    ErrTail tail;
    std::map<int, RankState> ranks;
    int world = 1;
    subprocess::ExitStatus st;
    // Reads the heartbeats; a seq that changed is stamped `at`.
    auto look = [&](double at) {
      for (const HeartbeatRecord& r : read_heartbeats(dir)) {
        if (r.attempt != n) continue;  // a process of an attempt before, not gone yet
        RankState& s = ranks[r.rank];
        if (!s.seen || s.record.seq != r.seq) s.changed_at = rec.progress_stop_s = at;
        s.seen = true;
        s.record = r;
        s.rank = r.rank;
        world = std::max(world, r.world);
        any_step |= r.last_step > 0;
      }
    };
    for (double alive = rec.launch_s;;) {
      const bool ended = wait_a_poll(p, tail, opt.poll_s, st, alive);
      const double now = now_s();
      if (ended) {
        rec.end = st.ok() ? AttemptEnd::Completed : AttemptEnd::Crashed;
        // Its last heartbeats changed after the last look, while it was still seen running; with
        // no heartbeats at all, its last progress is the last time it was seen running.
        look(alive);
        if (ranks.empty()) rec.progress_stop_s = alive;
        p.terminate(opt.grace_s);  // what the launcher left behind, if anything
        break;
      }
      if (g_stop) {
        say("stop requested: ending attempt {}", n);
        st = p.terminate(opt.grace_s);
        rec.end = AttemptEnd::Stopped;
        rec.cause = "the supervisor was stopped (SIGINT/SIGTERM)";
        break;
      }
      look(now);
      std::vector<RankState> all;
      for (int r = 0; r < world; ++r) {
        auto it = ranks.find(r);
        RankState missing;  // no heartbeat file yet: in setup since the launch
        missing.rank = r;
        missing.changed_at = rec.launch_s;
        all.push_back(it != ranks.end() ? it->second : missing);
      }
      if (HangVerdict v = detect_hang(all, now, opt.timeouts); v.hung) {
        // A host the network lost stops its ranks (and, at one point, every rank): probe before
        // the tear-down, so that the verdict names it.
        hosts.learn(ranks);
        if (hosts.active().size() > 1) {
          const std::vector<HostReach> probes = probe(opt, hosts);
          rec.unreachable_hosts = unreachable_list(probes);
          if (!rec.unreachable_hosts.empty()) v.message += "; " + describe_unreachable(probes);
        }
        say("hang: {}", v.message);
        rec.cause = "hang: " + v.message;
        double silence = 0;
        for (const RankReport& r : v.at_fault) silence = std::max(silence, r.silence_s);
        rec.progress_stop_s = now - silence;
        st = p.terminate(opt.grace_s);
        rec.end = AttemptEnd::Hung;
        break;
      }
    }
    tail.take(p);
    rec.end_s = now_s();
    std::map<int, HeartbeatRecord> beats = beats_now(n);
    fence::write_attempt(dir, n, /*ended=*/true);
    hosts.learn(ranks);
    {
      std::set<std::string> seen;
      for (const auto& [rank, r] : ranks) seen.insert(r.record.host);
      rec.hosts.assign(seen.begin(), seen.end());
    }
    if (rec.end == AttemptEnd::Crashed || rec.end == AttemptEnd::Hung) {
      check_left_running(n, std::move(beats));
      // Before a restart: is every host still there?
      if (rec.unreachable_hosts.empty() && !g_stop) {
        const std::vector<HostReach> probes = probe(opt, hosts);
        rec.unreachable_hosts = unreachable_list(probes);
        if (!rec.unreachable_hosts.empty()) say("{}", describe_unreachable(probes));
      }
    }
    rec.exit = subprocess::describe(st);
    rec.events = parse_events(read_text(dir + "/events.jsonl"));
    for (const auto& it : rec.events.items) any_step |= !it.rollback && !it.skipped;
    if (rec.end == AttemptEnd::Crashed) {
      std::string why;
      for (const auto& [rank, msg] : read_rank_errors(dir))
        why += (why.empty() ? "" : "; ") + fmt::format("rank {}: {}", rank, msg);
      if (why.empty()) why = tail.reason();
      rec.cause = why.empty() ? rec.exit : rec.exit + ": " + why;
      for (const std::string& h : rec.unreachable_hosts)
        rec.cause += fmt::format("; host {} unreachable", h);
      say("attempt {} failed after {:.1f} s: {}", n, rec.end_s - rec.launch_s, rec.cause);
    } else if (rec.end == AttemptEnd::Completed) {
      say("attempt {} completed in {:.1f} s", n, rec.end_s - rec.launch_s);
    } else {
      say("attempt {} ended after {:.1f} s ({})", n, rec.end_s - rec.launch_s, rec.exit);
    }
  }
};

// Runs `launcher… zaya preflight`; a zaya::Error quoting its failing line if it fails. False if
// the supervisor was stopped meanwhile.
bool run_preflight(const SuperviseOptions& opt) {
  std::vector<std::string> argv = opt.launcher;
  // This binary's own path (a launcher would resolve /proc/self/exe to itself).
  std::error_code ec;
  const fs::path self =
      opt.self_exe.empty() ? fs::read_symlink("/proc/self/exe", ec) : fs::path(opt.self_exe);
  ZAYA_CHECK_INPUT(!ec, "preflight: cannot find this zaya binary (/proc/self/exe): {}",
                   ec.message());
  argv.push_back(self.string());
  argv.push_back("preflight");
  say("preflight: {}", join(argv));
  subprocess::Options so;
  so.pipe_stderr = so.stdout_too = true;
  subprocess::Process p = subprocess::Process::spawn(argv, so);
  ErrTail tail;
  subprocess::ExitStatus st;
  const double deadline = now_s() + opt.timeouts.seconds[int(heartbeat::Section::Setup)];
  for (double alive = 0; !wait_a_poll(p, tail, opt.poll_s, st, alive);) {
    if (g_stop || now_s() > deadline) {
      st = p.terminate(opt.grace_s);
      if (g_stop) return false;
      fail("preflight: did not finish within the setup timeout (the job was not started)");
    }
  }
  tail.take(p);
  if (st.ok()) {
    say("preflight passed");
    return true;
  }
  // The bad ranks' lines ("preflight: rank R (host H): why"), else the error or fault line, else
  // its last line that says something (not one of mpirun's rules of dashes).
  std::string line;
  for (const std::string& l : tail.lines)
    if (l.rfind("preflight: rank ", 0) == 0) line += (line.empty() ? "" : "; ") + l;
  if (line.empty()) line = tail.reason();
  for (auto it = tail.lines.rbegin(); line.empty() && it != tail.lines.rend(); ++it)
    if (std::any_of(it->begin(), it->end(), [](unsigned char c) { return std::isalpha(c); }))
      line = it->substr(it->find_first_not_of(" \t"));
  fail("preflight failed ({}): {} — the job was not started", subprocess::describe(st),
       line.empty() ? "no output" : line);
}

void write_report(const nlohmann::json& report, const std::string& path) {
  write_file(path, report.dump(2) + "\n");
}

}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string w;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        w += text[++i];
      } else {
        w += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c, in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      w += text[++i], in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(w), w.clear(), in_word = false;
    } else {
      w += c, in_word = true;
    }
  }
  ZAYA_CHECK_INPUT(!quote, "--launcher '{}': unbalanced {} quote", text, quote);
  if (in_word) words.push_back(w);
  return words;
}

int supervise(const SuperviseOptions& opt) {
  if (const char* spec = std::getenv("ZAYA_FAULT"); spec && *spec) faults::parse_fault_specs(spec);
  ZAYA_CHECK_INPUT(!opt.command.empty(),
                   "no job to supervise: give its command after --, e.g. zaya supervise -- zaya "
                   "train --config run.toml");
  ZAYA_CHECK_INPUT(opt.max_restarts >= 0, "--max-restarts {}: must be >= 0", opt.max_restarts);
  if (!opt.launcher.empty())
    ZAYA_CHECK_INPUT(!subprocess::find_executable(opt.launcher[0]).empty(),
                     "launcher '{}' not found on PATH", opt.launcher[0]);
  ZAYA_CHECK_INPUT(!subprocess::find_executable(opt.command[0]).empty(),
                   "job command '{}' not found on PATH", opt.command[0]);
  std::error_code ec;
  fs::create_directories(opt.dir, ec);
  ZAYA_CHECK_INPUT(!ec && fs::is_directory(opt.dir), "--dir {}: cannot create it: {}", opt.dir,
                   ec.message());
  const std::string dir = fs::absolute(opt.dir).lexically_normal().string();

  g_stop = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  subprocess::adopt_orphans();

  GoodputInput in;
  in.start_s = now_s();
  std::string error;  // why the supervisor gives up ("" when the job completed or it was stopped)
  std::vector<std::string> launcher = opt.launcher;  // an elastic restart rewrites it
  auto job_argv = [&] {
    std::vector<std::string> argv = launcher;
    argv.insert(argv.end(), opt.command.begin(), opt.command.end());
    return argv;
  };
  // Attempt numbers go on from those of a supervisor that ran in this directory before, so that
  // its ranks, if any are left, are fenced by the first attempt of this one.
  const int first = fence::recorded_attempt(read_text(dir + "/attempt")) + 1;
  Hosts hosts;
  int no_progress = 0, counted = 0;  // failures in a row without a step; failures that count
  double host_waited = 0;            // seconds waited for unreachable hosts, in all
  std::optional<JobOutcome> outcome;
  if (opt.preflight && !run_preflight(opt)) outcome = JobOutcome::Stopped;
  for (int n = first; !outcome; ++n) {
    Attempt a{opt, dir, hosts, {}};
    a.run(n, job_argv());
    in.attempts.push_back(a.rec);
    const AttemptRecord& rec = in.attempts.back();
    if (rec.end == AttemptEnd::Completed) {
      outcome = JobOutcome::Completed;
      break;
    }
    if (rec.end == AttemptEnd::Stopped) {
      outcome = JobOutcome::Stopped;
      break;
    }
    // The hosts that answer, and those that do not.
    std::vector<HostAddresses> lost, left;
    {
      std::set<std::string> gone;
      for (const std::string& h : rec.unreachable_hosts) gone.insert(h.substr(0, h.find(' ')));
      for (const HostAddresses& h : hosts.active()) (gone.count(h.host) ? lost : left).push_back(h);
    }
    if (opt.min_hosts > 0 && !rec.unreachable_hosts.empty()) {
      std::string why_not;
      if (int(left.size()) < opt.min_hosts) {
        why_not =
            fmt::format("{} host(s) answer, fewer than --min-hosts {}", left.size(), opt.min_hosts);
      } else {
        int lost_ranks = 0;
        for (const HostAddresses& h : lost) {
          const auto it = hosts.ranks.find(h.host);
          lost_ranks = it == hosts.ranks.end() || lost_ranks < 0 ? -1 : lost_ranks + it->second;
        }
        const std::string hostfile = fmt::format("{}/hostfile.attempt{}", dir, n + 1);
        const ShrunkLauncher shrunk =
            shrink_launcher(launcher, lost, lost_ranks, int(left.size()), hostfile);
        why_not = shrunk.why_not;
        if (shrunk.launcher.size()) {
          if (!shrunk.hostfile_text.empty()) write_file(hostfile, shrunk.hostfile_text);
          launcher = shrunk.launcher;
          std::string names;
          for (const HostAddresses& h : left) names += (names.empty() ? "" : ", ") + h.host;
          for (const HostAddresses& h : lost) hosts.lost.insert(h.host);
          say("elastic restart on the {} host(s) that answer ({}): {}", left.size(), names,
              join(job_argv()));
          if (!pause(opt.restart_delay_s)) outcome = JobOutcome::Stopped;
          continue;
        }
      }
      say("no elastic restart: {}", why_not);
    }
    // A failure with a host the network lost is the host's, not the job's: it spends no restart
    // (until --host-wait is used up).
    const bool host_fault = !rec.unreachable_hosts.empty() && host_waited < opt.host_wait_s;
    if (!host_fault) {
      ++counted;
      no_progress = a.any_step ? 0 : no_progress + 1;
      if (no_progress >= opt.max_no_progress) {
        outcome = JobOutcome::NoProgress;
        error =
            fmt::format("the job fails before its first step every time ({} attempts in a row): {}",
                        no_progress, rec.cause);
        break;
      }
      if (counted > opt.max_restarts) {
        outcome = JobOutcome::RestartsSpent;
        error =
            fmt::format("the job failed {} time(s), restarts spent (--max-restarts {}); last: {}",
                        counted, opt.max_restarts, rec.cause);
        break;
      }
      say("restart {} of {} in {:.1f} s", counted, opt.max_restarts, opt.restart_delay_s);
      if (!pause(opt.restart_delay_s)) outcome = JobOutcome::Stopped;
      continue;
    }
    // Wait for the lost hosts, with back-off, before relaunching into them.
    std::string what = describe_unreachable(probe(opt, hosts));
    for (double delay = 1; !what.empty();) {
      if (host_waited >= opt.host_wait_s) {
        say("still unreachable after {:.0f} s of waiting (--host-wait {:.0f}): relaunching; from "
            "now on failures count against --max-restarts",
            host_waited, opt.host_wait_s);
        break;
      }
      const double d = std::min({delay, 30.0, opt.host_wait_s - host_waited});
      say("{}: waiting {:.1f} s before relaunching (back-off; {:.0f} of {:.0f} s of --host-wait "
          "used; no restart spent)",
          what, d, host_waited, opt.host_wait_s);
      if (!pause(d)) break;
      host_waited += d;
      delay *= 2;
      what = describe_unreachable(probe(opt, hosts));
      if (what.empty()) say("every host answers again: relaunching");
    }
    if (g_stop || !pause(opt.restart_delay_s)) outcome = JobOutcome::Stopped;
  }
  in.outcome = *outcome;
  in.faults = parse_faults_fired(read_text(dir + "/faults_fired.txt"));
  in.end_s = now_s();
  const nlohmann::json report = goodput_report(in);
  write_report(report, dir + "/goodput.json");
  if (!opt.report.empty()) write_report(report, opt.report);
  std::fputs(goodput_summary(report).c_str(), stderr);
  say("report: {}/goodput.json", dir);
  if (in.outcome == JobOutcome::Stopped) return 130;
  if (!error.empty()) fail("{}", error);
  return 0;
}

}  // namespace zaya
