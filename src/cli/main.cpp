// zaya: one binary, one subcommand per file in src/cli/. User errors (zaya::Error) print one
// "zaya: error: …" line and exit 1, and so do bad flags (flags.cpp). `zaya --version` prints
// version.h's line on stdout and exits 0.
#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "cli/version.h"
#include "core/assert.h"
#include "core/heartbeat.h"

int main(int argc, char** argv) {
  CLI::App app{"zaya — train and run ZAYA1-architecture mixture-of-experts language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", zaya::cli::version_line(zaya::cli::kBuildInfo),
                       "print the version, the commit and the build's configuration, and exit");
  std::vector<std::pair<CLI::App*, zaya::cli::Action>> commands;
  auto add = [&](zaya::cli::Action (*reg)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    zaya::cli::Action act = reg(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(act));
  };
  add(zaya::cli::add_eval_command);
  add(zaya::cli::add_inspect_command);
  add(zaya::cli::add_convert_command);
  add(zaya::cli::add_quantize_command);
  add(zaya::cli::add_tokenize_command);
  add(zaya::cli::add_tokenizer_train_command);
  add(zaya::cli::add_data_command);
  add(zaya::cli::add_train_command);
  add(zaya::cli::add_generate_command);
  add(zaya::cli::add_chat_command);
  add(zaya::cli::add_template_command);
  add(zaya::cli::add_serve_command);
  add(zaya::cli::add_bench_command);
  add(zaya::cli::add_preflight_command);
  add(zaya::cli::add_supervise_command);
  add(zaya::cli::add_plot_command);
  add(zaya::cli::add_tune_command);
  add(zaya::cli::add_plan_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return zaya::cli::flag_error(app, e);
  }
  try {
    for (auto& [sub, act] : commands)
      if (sub->parsed()) return act();
  } catch (const std::exception& e) {  // zaya::Error and the rest: one line, exit 1
    std::fprintf(stderr, "zaya: error: %s\n", e.what());
    zaya::heartbeat::record_error(e.what());  // for `zaya supervise`
    return 1;
  }
  return 1;
}
