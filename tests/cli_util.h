// Running the zaya binary from tests: capture exit status, stdout and stderr; check the
// one-line "zaya: error:" contract for user errors.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.h"

namespace zaya::test {

struct CliResult {
  int code = -1;         // exit status (−1 if killed)
  bool crashed = false;  // killed by a signal, or a shell status > 125
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Single-quotes `s` for the shell.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `zaya ARGS` with `stdin_text` on standard input; the capture files live in `dir`.
inline CliResult run_zaya_in(const std::string& dir, const std::string& args,
                             const std::string& stdin_text = "") {
  std::ofstream(dir + "/stdin", std::ios::binary) << stdin_text;
  const std::string cmd = std::string(ZAYA_BINARY) + " " + args + " <" + dir + "/stdin >" + dir +
                          "/stdout 2>" + dir + "/stderr";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.crashed = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 125);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir + "/stdout");
  r.err = slurp(dir + "/stderr");
  return r;
}

// Exit code 1, no crash, and exactly one "zaya: error:" line mentioning `needle`.
inline void expect_user_error(const CliResult& r, const std::string& needle) {
  EXPECT_FALSE(r.crashed) << r.err;
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("zaya: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << r.err;
}

}  // namespace zaya::test
