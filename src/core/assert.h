// Failing fast. ZAYA_ASSERT guards invariants (a bug in zaya if it fires: prints file:line and
// aborts). User errors (bad files, flags, configs) throw zaya::Error, which the CLI turns into one
// clear line and a non-zero exit.
//
// nvcc (CUDA 13 with fmt 9 in C++20) cannot compile fmt's headers, so a translation unit nvcc
// compiles (the GPU kernels, ops/gpu/*.cu) gets a fmt-free variant: the same macros and `fail`,
// whose messages keep the format string with its {} placeholders unfilled. The kernels' entry
// points assert nothing a caller can get wrong: ops/ops.cpp validated the call before dispatch.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if !defined(__NVCC__)
#include <fmt/format.h>
#endif

namespace zaya {

// A user-facing error: the message says what was wrong and, where it can, what to do.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void assert_fail(const char* file, int line, const char* cond,
                                     const std::string& msg) {
  std::fprintf(stderr, "zaya: internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::fflush(stderr);
  std::abort();
}

#if !defined(__NVCC__)

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

#define ZAYA_ASSERT_MESSAGE(...) fmt::format(__VA_ARGS__)

#else  // nvcc: the format string alone

template <class... Args>
[[noreturn]] void fail(const char* f, Args&&...) {
  throw Error(f);
}

namespace detail {
template <class... Args>
std::string format_string_only(const char* f, Args&&...) {
  return f;
}
}  // namespace detail

#define ZAYA_ASSERT_MESSAGE(...) ::zaya::detail::format_string_only(__VA_ARGS__)

#endif

}  // namespace zaya

#define ZAYA_ASSERT(cond, ...)                                                                     \
  do {                                                                                             \
    if (!(cond)) ::zaya::assert_fail(__FILE__, __LINE__, #cond, ZAYA_ASSERT_MESSAGE(__VA_ARGS__)); \
  } while (0)

// User-input check: throws zaya::Error with the formatted message.
#define ZAYA_CHECK_INPUT(cond, ...)         \
  do {                                      \
    if (!(cond)) ::zaya::fail(__VA_ARGS__); \
  } while (0)
