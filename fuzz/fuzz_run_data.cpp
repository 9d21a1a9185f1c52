// Fuzz target: the readers of `zaya plot` (plot/run_data.h) — the input as a metrics file and as a
// goodput report — and the page drawn from whatever they accept, which must be well-formed XML
// (tests/plot/xml_check.h) whatever the values (NaN, huge, negative, one point, going back).
#include <cstdlib>

#include "../tests/plot/xml_check.h"
#include "fuzz_util.h"
#include "plot/run_data.h"
#include "plot/run_plot.h"

namespace {

void check_page(const zaya::plot::RunMetrics* m, const zaya::plot::Goodput* g) {
  const std::string svg = zaya::plot::run_svg(m, g, "fuzz \xff <&>");
  if (!zaya::test::xml::parse(svg).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  zaya::fuzz::expect_clean([&] {
    const zaya::plot::RunMetrics m = zaya::plot::parse_metrics(text, "metrics.jsonl");
    check_page(&m, nullptr);
  });
  zaya::fuzz::expect_clean([&] {
    const zaya::plot::Goodput g = zaya::plot::parse_goodput(text, "goodput.json");
    check_page(nullptr, &g);
  });
  return 0;
}
