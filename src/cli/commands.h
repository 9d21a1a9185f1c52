// Each subcommand registers itself on the CLI11 app; main.cpp runs the chosen one.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "core/enum_words.h"

namespace zaya::cli {

// A flag whose value is a word of a closed set (core/enum_words.h), stored as the enum; another
// word is a flag error naming the flag, the word and the choices ("--device 'tpu': use cpu or
// gpu").
template <WordEnum E>
CLI::Option* add_enum_option(CLI::App* app, const std::string& flag, E& value,
                             const std::string& help) {
  return app->add_option_function<std::string>(
      flag,
      [&value, flag](const std::string& word) {
        const std::optional<E> v = parse_enum<E>(word);
        if (!v) throw CLI::ValidationError(flag + " '" + word + "': use " + enum_choices<E>());
        value = *v;
      },
      help + " (default " + std::string(enum_word(value)) + ")");
}

// Numeric flag checks with a readable message (CLI11's PositiveNumber/NonNegativeNumber print
// the largest double in full, 309 digits): "--rows-per-batch: -1 is not a number >= 0".
CLI::Validator positive_number();
CLI::Validator non_negative_number();

// The one exit for a command line CLI11 rejects: prints "zaya: error: MESSAGE (see zaya ...
// --help)" and returns 1; --help (and the like) prints the help and returns 0.
int flag_error(const CLI::App& app, const CLI::ParseError& e);

// A registered subcommand's body; runs after parsing succeeded. Returns the exit code.
using Action = std::function<int()>;

Action add_eval_command(CLI::App& app);
Action add_inspect_command(CLI::App& app);
Action add_convert_command(CLI::App& app);
// `zaya quantize` (quantize.cpp): a model as one GGUF file of quantized weights.
Action add_quantize_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_tokenizer_train_command(CLI::App& app);
// `zaya data prepare …` (a nested subcommand: data → prepare).
Action add_data_command(CLI::App& app);
Action add_train_command(CLI::App& app);
Action add_generate_command(CLI::App& app);
Action add_chat_command(CLI::App& app);
Action add_template_command(CLI::App& app);
Action add_serve_command(CLI::App& app);
// `zaya preflight`: the per-rank health check `zaya supervise --preflight` launches.
Action add_preflight_command(CLI::App& app);
Action add_supervise_command(CLI::App& app);
// `zaya plot RUN` (plot.cpp): the run's metrics and goodput as an SVG page.
Action add_plot_command(CLI::App& app);
// `zaya plan` (plan.cpp): a training run planned for a cluster (docs/plan.md).
Action add_plan_command(CLI::App& app);
// `zaya tune gemm …` (tune.cpp): the GEMM tuning table.
Action add_tune_command(CLI::App& app);
// `zaya bench decode|comm|step …`: bench.cpp registers `bench`, each file below one of its
// subcommands.
Action add_bench_command(CLI::App& app);
Action add_bench_decode_command(CLI::App& bench);
Action add_bench_comm_command(CLI::App& bench);
Action add_bench_step_command(CLI::App& bench);

}  // namespace zaya::cli
