// zaya supervise [--max-restarts 10] [--launcher "mpirun -np 4 …"] [--dir ./zaya-supervise]
//                [--timeout SECTION=SECONDS …] [--timeout-floor 60] [--timeout-factor 10]
//                [--poll 0.2] [--restart-delay 1] [--grace 5] [--preflight] [--report FILE]
//                [--min-hosts K] [--host-wait 600] [--probe-port 22] [--probe-timeout 2]
//                -- COMMAND…
// Runs COMMAND (e.g. `zaya train --config run.toml`) under the launcher, watches its heartbeats,
// ends it on a crash or a hang and restarts it until it completes or the restarts are spent;
// then writes DIR/goodput.json and prints the goodput summary (resilience/supervisor.h).
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "resilience/supervisor.h"

namespace zaya::cli {

namespace {

struct SuperviseArgs {
  SuperviseOptions opt;
  std::string launcher;
  std::vector<std::string> timeouts;
  double floor = 60, factor = 10;
};

int run_supervise(SuperviseArgs& a) {
  a.opt.launcher = split_words(a.launcher);
  for (const std::string& t : a.timeouts) set_timeout(a.opt.timeouts, t);
  a.opt.timeouts.floor = a.floor;
  a.opt.timeouts.factor = a.factor;
  return supervise(a.opt);
}

}  // namespace

Action add_supervise_command(CLI::App& app) {
  auto args = std::make_shared<SuperviseArgs>();
  SuperviseOptions& o = args->opt;
  CLI::App* sub = app.add_subcommand(
      "supervise", "Run a training job, detect crashes and hangs, restart it, report goodput");
  sub->add_option("--max-restarts", o.max_restarts, "restarts before giving up (default 10)")
      ->check(non_negative_number());
  sub->add_option("--launcher", args->launcher,
                  "launcher words before the command, e.g. \"mpirun -np 4\" or \"srun\"");
  sub->add_option("--dir", o.dir, "the run directory: heartbeats, events, goodput.json")
      ->capture_default_str();
  sub->add_option("--timeout", args->timeouts,
                  "SECTION=SECONDS (setup, data, forward-backward, collective, optimizer, eval, "
                  "checkpoint, or step for the four in-step ones; auto for in-step); repeatable")
      ->allow_extra_args(false);
  sub->add_option("--timeout-floor", args->floor,
                  "the least an auto timeout is once a step completed (seconds)")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--timeout-factor", args->factor,
                  "auto timeout = max(floor, factor x the slowest step)")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--poll", o.poll_s, "seconds between looks at the job")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--restart-delay", o.restart_delay_s, "seconds between attempts")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_option("--grace", o.grace_s, "seconds from SIGTERM to SIGKILL when ending the job")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_flag("--preflight", o.preflight,
                "first run `LAUNCHER zaya preflight`; refuse to start if it fails");
  sub->add_option("--report", o.report, "also write the goodput report (JSON) to this file");
  sub->add_option("--min-hosts", o.min_hosts,
                  "when hosts are unreachable and at least this many answer, restart on those "
                  "(mpirun --hostfile/--host, srun -N); 0: wait for the lost hosts")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_option("--host-wait", o.host_wait_s,
                  "the most seconds in all to wait for unreachable hosts (back-off) before "
                  "failures with one count against --max-restarts")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_option("--probe-port", o.probe_port,
                  "TCP port of the reachability probe (a refused connection counts as reachable)")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  sub->add_option("--probe-timeout", o.probe_timeout_s,
                  "seconds the reachability probe waits for a host to answer")
      ->check(positive_number())
      ->capture_default_str();
  // The job: every word after -- (CLI11 hands them to this positional unparsed).
  sub->add_option("command", o.command, "the job, after --: e.g. -- zaya train --config run.toml");
  return [args] { return run_supervise(*args); };
}

}  // namespace zaya::cli
