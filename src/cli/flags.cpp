// Flag checks and the flag-error exit (see commands.h).
#include <cstdio>
#include <string>

#include "cli/commands.h"

namespace zaya::cli {

namespace {

CLI::Validator number_above(double lo, bool inclusive) {
  const std::string want = std::string(inclusive ? ">= " : "> ") + (lo == 0 ? "0" : "1");
  return CLI::Validator(
      [lo, inclusive, want](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return s + " is not a number";
        if (inclusive ? v >= lo : v > lo) return "";
        return s + " is not a number " + want;
      },
      "NUMBER " + want);
}

}  // namespace

CLI::Validator positive_number() {
  return number_above(0, false);
}

CLI::Validator non_negative_number() {
  return number_above(0, true);
}

int flag_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all
  // The innermost subcommand that was named, for the hint.
  std::string cmd = "zaya";
  for (const CLI::App* a = &app;;) {
    const std::vector<const CLI::App*> subs =
        a->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (subs.empty()) break;
    a = subs.front();
    cmd += " " + a->get_name();
  }
  std::string msg = e.what();
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  for (char& c : msg)
    if (c == '\n') c = ' ';
  // "A subcommand is required" for `zaya frobnicate`: name what was not understood.
  if (const std::vector<std::string> rest = app.remaining(); !rest.empty() && cmd == "zaya")
    msg += "; not a command: " + rest.front();
  std::fprintf(stderr, "zaya: error: %s (see %s --help)\n", msg.c_str(), cmd.c_str());
  return 1;
}

}  // namespace zaya::cli
