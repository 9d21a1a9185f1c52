// Placeholder while `zaya bench comm` is being built in this session (replaced before it is called done).
#include "cli/commands.h"
#include "core/assert.h"

namespace zaya::cli {

Action add_bench_comm_command(CLI::App& bench) {
  bench.add_subcommand("comm", "(being built)");
  return []() -> int { fail("bench comm: not built yet"); };
}

}  // namespace zaya::cli
