// Running the official `openai` npm client (tests/serve/*.mjs) against a test server: where the
// package is ($ZAYA_NODE_CACHE/node_modules, as scripts/fetch_openai_npm.sh writes it, else
// build/node-cache/node_modules), whether node and the package are there, and one run of a script.
// Without them the tests skip naming the setup step — not an allowed skip reason
// (tests/test_skips.h), so a failure under ZAYA_STRICT_SKIPS=1.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli_util.h"
#include "test_paths.h"

namespace zaya::test {

inline std::filesystem::path repo_root() {
  return std::filesystem::path(ZAYA_TEST_FIXTURES).parent_path().parent_path();
}

inline std::filesystem::path openai_node_modules() {
  const char* cache = std::getenv("ZAYA_NODE_CACHE");
  return (cache && *cache ? std::filesystem::path(cache) : repo_root() / "build/node-cache") /
         "node_modules";
}

// "" when node and the openai package are there, else the skip message saying what to run.
inline std::string node_client_missing() {
  if (std::system("node --version >/dev/null 2>&1") != 0)
    return "node is not installed: run scripts/setup.sh (it installs nodejs)";
  if (!std::filesystem::exists(openai_node_modules() / "openai/package.json"))
    return "the openai npm package is not in " + openai_node_modules().string() +
           ": run scripts/fetch_openai_npm.sh (scripts/setup.sh runs it)";
  return "";
}

// Runs `node tests/serve/SCRIPT ARGS` (ARGS already quoted) with `env` (e.g. "VAR=value ") before
// it; stdout and stderr go to `log`. True when the script exits 0.
inline bool run_node_client(const std::string& script, const std::string& args,
                            const std::string& log, const std::string& env = "") {
  const std::string cmd = env + "NODE_PATH=" + shell_quote(openai_node_modules().string()) +
                          " node " + shell_quote((repo_root() / "tests/serve" / script).string()) +
                          " " + args + " > " + shell_quote(log) + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace zaya::test
