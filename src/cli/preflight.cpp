// zaya preflight [--seconds 0.3] [--min-ratio 0.5] [--bytes 2M] [--group auto|single|mpi]
//                [--timeout 60] [--json]
// The per-rank health check that `zaya supervise --preflight` runs through the job's launcher
// (`mpirun -np N zaya preflight`) before the job: each rank times a checked sgemm and checks an
// all_reduce and an all_gather (resilience/preflight.h). Rank 0 alone prints: a table (rank, host,
// sgemm GFLOP/s, ratio to the median, sgemm check, collective check, all_reduce GB/s) and a
// verdict line on stdout — or with --json one JSON object instead — and, for each bad rank, one
// line on stderr: "preflight: rank R (host H): why". Exit: 0 every rank good, 1 refused (on every
// rank: all of them judge the same gathered figures). ZAYA_FAULT's slow@preflight / nan@preflight
// (resilience/faults.h) make a rank slow or wrong on purpose; a bad ZAYA_FAULT is a zaya::Error.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "dist/group.h"
#include "perf/comm.h"
#include "resilience/faults.h"
#include "resilience/preflight.h"

namespace zaya::cli {

namespace {

struct PreflightArgs {
  preflight::Options opt;
  std::string bytes = "2M", group = "auto";
  double timeout_s = 60;
  bool json = false;
};

std::string check_word(int64_t wrong) {
  return wrong ? fmt::format("WRONG({})", wrong) : "ok";
}

void print_table(const dist::Group& g, const PreflightArgs& a,
                 const std::vector<preflight::RankFigures>& ranks, const preflight::Verdict& v) {
  fmt::print(
      "# zaya preflight: {} rank{} ({} group): sgemm {}^3 f32 for {} s, all_reduce {} B f32, "
      "all_gather 64K i32\n",
      g.size(), g.size() == 1 ? "" : "s", enum_word(g.backend()), preflight::kSgemmN, a.opt.seconds,
      a.opt.allreduce_bytes);
  fmt::print("# {:>4} {:<20} {:>13} {:>6} {:>11} {:>16} {:>15}\n", "rank", "host", "sgemm GFLOP/s",
             "ratio", "sgemm check", "collective check", "all_reduce GB/s");
  for (const preflight::RankFigures& f : ranks)
    fmt::print("  {:>4} {:<20} {:>13.2f} {:>6.2f} {:>11} {:>16} {:>15.3f}\n", f.rank, f.host,
               f.sgemm_gflops, v.ratio[f.rank], check_word(f.sgemm_wrong),
               check_word(f.allreduce_wrong + f.allgather_wrong), f.allreduce_gbs);
  if (v.ok())
    fmt::print("preflight: ok: {} rank{}, median sgemm {:.1f} GFLOP/s, every result correct\n",
               g.size(), g.size() == 1 ? "" : "s", v.median_gflops);
  else
    fmt::print("preflight: refused: {} of {} rank{} bad (min ratio {}x of the median)\n",
               v.problems.size(), g.size(), g.size() == 1 ? "" : "s", a.opt.min_ratio);
}

nlohmann::json to_json(const dist::Group& g, const PreflightArgs& a,
                       const std::vector<preflight::RankFigures>& ranks,
                       const preflight::Verdict& v) {
  nlohmann::json rows = nlohmann::json::array();
  for (const preflight::RankFigures& f : ranks)
    rows.push_back({{"rank", f.rank},
                    {"host", f.host},
                    {"sgemm_gflops", f.sgemm_gflops},
                    {"ratio", v.ratio[f.rank]},
                    {"sgemm_wrong_rows", f.sgemm_wrong},
                    {"allreduce_wrong", f.allreduce_wrong},
                    {"allgather_wrong", f.allgather_wrong},
                    {"allreduce_gbs", f.allreduce_gbs}});
  return {{"ok", v.ok()},
          {"ranks", g.size()},
          {"backend", enum_word(g.backend())},
          {"sgemm_n", preflight::kSgemmN},
          {"seconds", a.opt.seconds},
          {"allreduce_bytes", a.opt.allreduce_bytes},
          {"min_ratio", a.opt.min_ratio},
          {"median_sgemm_gflops", v.median_gflops},
          {"rows", rows},
          {"problems", v.problems}};
}

int run_preflight(PreflightArgs& a) {
  a.opt.allreduce_bytes = dist::parse_byte_size(a.bytes);
  preflight::validate(a.opt);
  // Before the group exists: a bad spec fails alike on every rank, without MPI.
  if (const char* spec = std::getenv("ZAYA_FAULT"); spec && *spec) faults::parse_fault_specs(spec);

  std::unique_ptr<dist::Group> group = dist::make_group(a.group, a.timeout_s);
  const faults::PreflightFault pf = faults::preflight_fault(group->rank());
  const preflight::RankFigures mine =
      preflight::measure_rank(*group, a.opt, {pf.slow_seconds, pf.nan});
  const std::vector<preflight::RankFigures> ranks = preflight::gather_figures(*group, mine);
  const preflight::Verdict v = preflight::judge(ranks, a.opt.min_ratio);
  if (group->rank() == 0) {
    if (a.json)
      fmt::print("{}\n", to_json(*group, a, ranks, v).dump(2));
    else
      print_table(*group, a, ranks, v);
    std::fflush(stdout);
    for (const std::string& p : v.problems) std::fprintf(stderr, "preflight: %s\n", p.c_str());
    std::fflush(stderr);
  }
  return v.ok() ? 0 : 1;
}

}  // namespace

Action add_preflight_command(CLI::App& app) {
  auto a = std::make_shared<PreflightArgs>();
  CLI::App* cmd = app.add_subcommand(
      "preflight",
      "Per-rank health check before a job (checked sgemm rate, checked all_reduce/all_gather); "
      "launch with mpirun -np N like the job. Exit 1 naming the bad rank(s)");
  cmd->add_option("--seconds", a->opt.seconds, "Seconds of timed sgemm products (default 0.3)")
      ->check(positive_number());
  cmd->add_option("--min-ratio", a->opt.min_ratio,
                  "Refuse a rank whose sgemm rate is below this × the median of the ranks, in "
                  "(0, 1] (default 0.5)")
      ->check(positive_number());
  cmd->add_option("--bytes", a->bytes, "Size of the timed all_reduce, e.g. 1M, 4M (default 2M)");
  cmd->add_option("--group", a->group, "auto (mpi under mpirun/srun), single or mpi");
  cmd->add_option("--timeout", a->timeout_s,
                  "Seconds a collective waits for the other ranks before failing (default 60)")
      ->check(positive_number());
  cmd->add_flag("--json", a->json, "One JSON object on stdout instead of the table");
  return [a] { return run_preflight(*a); };
}

}  // namespace zaya::cli
