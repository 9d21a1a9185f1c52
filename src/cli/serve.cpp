// Placeholder while `zaya serve` is being built in this session (replaced before it is called done).
#include "cli/commands.h"
#include "core/assert.h"

namespace zaya::cli {

Action add_serve_command(CLI::App& app) {
  app.add_subcommand("serve", "(being built)");
  return []() -> int { fail("serve: not built yet"); };
}

}  // namespace zaya::cli
