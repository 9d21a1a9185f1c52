// Logging to stderr; a command's results go to stdout instead (core/output.h, the rule of
// docs/cli.md). Levels: info (default), quiet (errors only), debug (ZAYA_LOG=debug).
#pragma once
#include <fmt/format.h>

#include <cstdio>

namespace zaya {

enum class LogLevel { Quiet, Info, Debug };
LogLevel log_level();
void set_log_level(LogLevel level);

template <class... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() >= LogLevel::Info)
    fmt::print(stderr, "{}\n", fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() >= LogLevel::Debug)
    fmt::print(stderr, "[debug] {}\n", fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace zaya
