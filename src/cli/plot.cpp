// zaya plot [RUN] [--out FILE.svg] [--goodput FILE] [--quiet]
// Draws a training run as one SVG page (plot/run_plot.h): RUN is a run directory, its checkpoint
// directory, or a metrics file (train.metrics); the supervisor's goodput report is drawn too when
// RUN holds one (goodput.json, or in a subdirectory) or --goodput names it. The page goes to
// --out (default: plot.svg in RUN, or beside the file named; "-": stdout); the path written is
// the command's result on stdout, what it drew a line on stderr.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/output.h"
#include "io/file.h"
#include "plot/run_data.h"
#include "plot/run_plot.h"

namespace zaya::cli {

namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::string run, out, goodput;
  bool quiet = false;
};

int run_plot(const PlotArgs& a) {
  if (a.quiet) set_log_level(LogLevel::Quiet);
  if (a.run.empty() && a.goodput.empty())
    fail("zaya plot: name a run (its directory or its metrics file) or --goodput FILE");
  plot::RunFiles files;
  if (!a.run.empty()) files = plot::find_run_files(a.run);
  if (!a.goodput.empty()) {
    if (!fs::is_regular_file(a.goodput)) fail("--goodput {}: no such file", a.goodput);
    files.goodput = a.goodput;
    if (a.run.empty()) {
      const fs::path p(a.goodput);
      files.folder = p.has_parent_path() ? p.parent_path().string() : ".";
    }
  }
  // Where the page goes, checked before anything is read.
  const std::string out = a.out.empty() ? (fs::path(files.folder) / "plot.svg").string() : a.out;
  if (out != "-") {
    const fs::path parent = fs::absolute(out).parent_path();
    if (!fs::is_directory(parent))
      fail("{} {}: directory {} does not exist", a.out.empty() ? "plot" : "--out", out,
           parent.string());
  }

  std::optional<plot::RunMetrics> metrics;
  std::optional<plot::Goodput> goodput;
  if (!files.metrics.empty()) {
    metrics = plot::read_metrics(files.metrics);
    if (metrics->torn_last_line)
      log_info("plot: {}: the last line is incomplete (the run is writing it): left out",
               files.metrics);
  } else if (!a.run.empty()) {
    log_info("plot: {}: no metrics file (train.metrics writes one): the goodput report only",
             a.run);
  }
  if (!files.goodput.empty()) goodput = plot::read_goodput(files.goodput);

  const plot::RunMetrics* m = metrics ? &*metrics : nullptr;
  const plot::Goodput* g = goodput ? &*goodput : nullptr;
  const std::string svg =
      plot::run_svg(m, g, "zaya plot: " + (a.run.empty() ? files.goodput : a.run));
  if (out == "-") {
    std::fwrite(svg.data(), 1, svg.size(), stdout);
    std::fflush(stdout);
  } else {
    write_file(out, svg, WriteMode{.atomic = true, .fsync = false});
  }
  log_info("plot: {}", plot::run_summary(m, g));
  if (out != "-") print_result("{}", out);
  return 0;
}

}  // namespace

Action add_plot_command(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* sub = app.add_subcommand(
      "plot", "Draw a training run (metrics, goodput) as an SVG page a browser opens");
  sub->add_option("RUN", args->run,
                  "a run directory (holding metrics.jsonl), its checkpoint directory, or a "
                  "metrics file (train.metrics)");
  sub->add_option("--out", args->out,
                  "the SVG to write (default: plot.svg in RUN, or beside the file; - for stdout)");
  sub->add_option("--goodput", args->goodput,
                  "the goodput report of zaya supervise (default: RUN's goodput.json, if any)");
  sub->add_flag("--quiet", args->quiet, "no summary line on stderr (the path is still printed)");
  return [args] { return run_plot(*args); };
}

}  // namespace zaya::cli
