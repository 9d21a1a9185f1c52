// Each subcommand registers itself on the CLI11 app; main.cpp runs the chosen one.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace zaya::cli {

// A registered subcommand's body; runs after parsing succeeded. Returns the exit code.
using Action = std::function<int()>;

Action add_eval_command(CLI::App& app);
Action add_inspect_command(CLI::App& app);
Action add_convert_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_tokenizer_train_command(CLI::App& app);
// `zaya data prepare …` (a nested subcommand: data → prepare).
Action add_data_command(CLI::App& app);
Action add_train_command(CLI::App& app);
Action add_generate_command(CLI::App& app);
Action add_serve_command(CLI::App& app);
// `zaya bench decode|comm …`: bench.cpp registers `bench`, each file below one of its subcommands.
Action add_bench_command(CLI::App& app);
Action add_bench_decode_command(CLI::App& bench);
Action add_bench_comm_command(CLI::App& bench);

}  // namespace zaya::cli
