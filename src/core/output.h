// A command's results on stdout. The rule every command follows (docs/cli.md): progress and logs
// on stderr (core/log.h), what the command produced on stdout, so `zaya … | tee` or `> file` keeps
// the result, and `--quiet` silences the progress but never the result.
#pragma once
#include <fmt/format.h>

#include <cstdio>

namespace zaya {

// One line of the command's result (its final summary, a table it was asked for): stdout, at
// every log level, flushed at once (the process may be killed next).
template <class... Args>
void print_result(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stdout, "{}\n", fmt::format(f, std::forward<Args>(args)...));
  std::fflush(stdout);
}

}  // namespace zaya
