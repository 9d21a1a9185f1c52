// Failing fast. ZAYA_ASSERT guards invariants (a bug in zaya if it fires: prints file:line and
// aborts). User errors (bad files, flags, configs) throw zaya::Error, which the CLI turns into one
// clear line and a non-zero exit.
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace zaya {

// A user-facing error: the message says what was wrong and, where it can, what to do.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

[[noreturn]] inline void assert_fail(const char* file, int line, const char* cond,
                                     const std::string& msg) {
  std::fprintf(stderr, "zaya: internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::fflush(stderr);
  std::abort();
}

}  // namespace zaya

#define ZAYA_ASSERT(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond)) ::zaya::assert_fail(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

// User-input check: throws zaya::Error with the formatted message.
#define ZAYA_CHECK_INPUT(cond, ...)         \
  do {                                      \
    if (!(cond)) ::zaya::fail(__VA_ARGS__); \
  } while (0)
