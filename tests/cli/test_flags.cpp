// Bad command lines and hostile sizes through the CLI: every one is a single
// "zaya: error:" line and exit 1 (never CLI11's own exit codes 105/106/109, never a 309-digit
// number), --help still exits 0; a max-new-tokens near INT64_MAX and a config with a billion
// experts are clear errors at once.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;

TEST(FlagErrors, EveryParseErrorIsOneLineAndExit1) {
  test::ScratchDir d;
  const std::pair<std::string, std::string> cases[] = {
      {"", "A subcommand is required"},
      {"frobnicate", "frobnicate"},
      {"train --no-such-flag", "--no-such-flag"},
      {"generate --prompt x", "--model is required"},
      {"serve --model m --port 70000", "--port"},
      {"serve --model m --max-batch abc", "--max-batch"},
      {"eval --model m --tokens t --rows-per-batch -1",
       "--rows-per-batch: -1 is not a number >= 0"},
      {"inspect m --seq-len 0", "--seq-len: 0 is not a number > 0"},
      {"generate --model m --num-samples 99999999999999999999", "--num-samples"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    const CliResult r = run_zaya_in(d.path, args);
    expect_user_error(r, needle);
    EXPECT_LT(r.err.size(), 300u) << r.err;  // no 309-digit bound
    EXPECT_NE(r.err.find("--help)"), std::string::npos) << r.err;
  }
  const CliResult help = run_zaya_in(d.path, "serve --help");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("--request-timeout"), std::string::npos);
}

TEST(FlagErrors, MaxNewTokensNearInt64MaxIsAUserError) {
  test::ScratchDir d;
  ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  Model m(c);
  m.init_random(1);
  m.save_dir(d / "model");
  const CliResult r = run_zaya_in(
      d.path, "generate --model " + d / "model" +
                  " --prompt-ids '2 3 4' --ids --max-new-tokens 9223372036854775807 --quiet");
  expect_user_error(r, "exceeds the model's context of 2048 tokens");
}

TEST(FlagErrors, ABillionExpertsIsAnImmediateInspectError) {
  test::ScratchDir d;
  nlohmann::json j;
  std::ifstream(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json") >> j;
  j["zaya_layers"][1] = 1000000000;
  std::ofstream(d / "config.json") << j.dump();
  const auto t = std::chrono::steady_clock::now();
  const CliResult r = run_zaya_in(d.path, "inspect " + d / "config.json");
  expect_user_error(r, "field 'zaya_layers': entry 1 is 1000000000 (the limit is 4096");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(), 10.0);
}

}  // namespace
}  // namespace zaya
