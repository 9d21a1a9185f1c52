// zaya bench decode|comm|step: benchmarks that report ratios measured in the same run (achieved vs
// the machine's own bound), never bare times. Each subcommand lives in its own file.
#include <memory>
#include <vector>

#include "cli/commands.h"

namespace zaya::cli {

Action add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (decode, comm, step)");
  bench->require_subcommand(1);
  auto subs = std::make_shared<std::vector<std::pair<CLI::App*, Action>>>();
  for (auto reg : {add_bench_decode_command, add_bench_comm_command, add_bench_step_command}) {
    const size_t before = bench->get_subcommands({}).size();
    Action act = reg(*bench);
    subs->emplace_back(bench->get_subcommands({})[before], std::move(act));
  }
  return [subs] {
    for (auto& [sub, act] : *subs)
      if (sub->parsed()) return act();
    return 1;
  };
}

}  // namespace zaya::cli
