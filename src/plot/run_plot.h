// The picture of a training run, `zaya plot` (docs/cli.md#zaya-plot): one SVG page a browser
// opens, 1200 px wide. A header names the run and sums it up; then, from the metrics file, six
// panels against the step:
//   loss          training loss (the skipped steps left out of the line, marked ▼ at the top
//                 with their values in the tooltip), validation loss (dots), rollbacks (dashed
//                 rules at the step the run went back to, labelled "from→to");
//   learning rate linear, from 0 (a schedule's warm-up and decay read best so);
//   gradient norm skipped steps left out; a log scale when the values span 100× or more;
//   throughput    tokens/s, from 0;      MFU     in %, from 0;
//   expert-load entropy (1 = an even load);
// and, from the supervisor's goodput report, a chart of where the wall time went (one bar split
// into productive, overhead, anomaly and failure parts) above the attempts on the same time axis.
// A panel whose values the file does not hold says so. Long runs are thinned per pixel column
// keeping each column's extremes (svg.h decimate), so a spike is never lost.
//
// The document's structure is stable for tests and tools: each panel is <g id="panel-NAME"
// class="panel"> (loss, lr, grad_norm, tokens_per_s, mfu, expert_load_entropy, goodput), each
// series one <polyline id="series-NAME">, a skipped step <g class="skip" data-step="N">, a
// rollback <g class="rollback" data-from="F" data-to="T">, a goodput part <rect
// class="goodput-part" data-part="NAME">, an attempt <rect class="attempt" data-attempt="N">.
#pragma once
#include <string>

#include "plot/run_data.h"

namespace zaya::plot {

// The SVG page; either input may be null (not both). `title` heads the page.
std::string run_svg(const RunMetrics* metrics, const Goodput* goodput, const std::string& title);

// One line about what was drawn: "330 steps (1–330), loss 10.38 → 3.901, 2 skipped, 1 rollback;
// goodput 87.3% over 3 attempts".
std::string run_summary(const RunMetrics* metrics, const Goodput* goodput);

}  // namespace zaya::plot
