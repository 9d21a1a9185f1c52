// Placeholder while `zaya bench decode` is being built in this session (replaced before it is called done).
#include "cli/commands.h"
#include "core/assert.h"

namespace zaya::cli {

Action add_bench_decode_command(CLI::App& bench) {
  bench.add_subcommand("decode", "(being built)");
  return []() -> int { fail("bench decode: not built yet"); };
}

}  // namespace zaya::cli
