// Placeholder while `zaya generate` is being built in this session (replaced before it is called done).
#include "cli/commands.h"
#include "core/assert.h"

namespace zaya::cli {

Action add_generate_command(CLI::App& app) {
  app.add_subcommand("generate", "(being built)");
  return []() -> int { fail("generate: not built yet"); };
}

}  // namespace zaya::cli
