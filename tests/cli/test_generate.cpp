// `zaya generate` end to end: a tiny random model directory with the toy tokenizer; greedy ids are
// deterministic and equal the engine's, text streams, samples decode together, stop strings and
// every user error give one "zaya: error:" line.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya {
namespace {

using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;

// A tiny random model with the toy tokenizer (vocab 1024) beside it.
struct TinyModelDir {
  test::ScratchDir dir;
  std::string model = dir / "model";
  TinyModelDir() {
    ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
    c.vocab_size = 1024;
    Model m(c);
    m.init_random(7, 0.2);  // a larger std than training's so greedy output varies
    m.save_dir(model);
    std::filesystem::copy_file(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json",
                               model + "/tokenizer.json");
  }
};

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(GenerateCli, GreedyIdsAreDeterministicAndSized) {
  TinyModelDir t;
  const std::string args = "generate --model " + t.model +
                           " --prompt-ids '2 40 41 42' --ids --temperature 0 "
                           "--max-new-tokens 12 --ignore-eos --quiet";
  const CliResult a = run_zaya_in(t.dir.path, args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(words(a.out).size(), 12u) << a.out;
  EXPECT_TRUE(a.err.empty()) << a.err;  // --quiet
  const CliResult b = run_zaya_in(t.dir.path, args);
  EXPECT_EQ(a.out, b.out);
}

// --bf16 rounds the F32 checkpoint's matrices at load: it generates, and says BF16 on stderr.
TEST(GenerateCli, Bf16RoundsAnF32CheckpointAtLoad) {
  TinyModelDir t;
  const CliResult r = run_zaya_in(t.dir.path, "generate --model " + t.model +
                                                  " --prompt-ids '2 40 41' --ids --temperature 0 "
                                                  "--max-new-tokens 6 --ignore-eos --bf16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(words(r.out).size(), 6u) << r.out;
  EXPECT_NE(r.err.find("BF16"), std::string::npos) << r.err;
}

TEST(GenerateCli, TextPromptStreamsTextAndReportsRates) {
  TinyModelDir t;
  const CliResult r = run_zaya_in(
      t.dir.path, "generate --model " + t.model +
                      " --prompt 'In the beginning' --max-new-tokens 8 --seed 3 --ignore-eos");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("prompt "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

TEST(GenerateCli, SamplesDecodeTogetherWithTheirOwnSeeds) {
  TinyModelDir t;
  const std::string base = "generate --model " + t.model +
                           " --prompt-ids '2 50' --ids --max-new-tokens 6 --ignore-eos --quiet";
  const CliResult both = run_zaya_in(t.dir.path, base + " --num-samples 2 --seed 10");
  ASSERT_EQ(both.code, 0) << both.err;
  const CliResult first = run_zaya_in(t.dir.path, base + " --seed 10");
  const CliResult second = run_zaya_in(t.dir.path, base + " --seed 11");
  EXPECT_EQ(both.out, first.out + second.out);
}

TEST(GenerateCli, StopStringEndsTheText) {
  TinyModelDir t;
  const std::string base = "generate --model " + t.model +
                           " --prompt 'And God said' --max-new-tokens 24 --temperature 0 "
                           "--ignore-eos --quiet";
  const CliResult full = run_zaya_in(t.dir.path, base);
  ASSERT_EQ(full.code, 0) << full.err;
  const std::string text = full.out.substr(0, full.out.size() - 1);  // trailing newline
  ASSERT_GE(text.size(), 6u) << "greedy text too short to pick a stop string: " << text;
  const std::string stop = text.substr(text.size() / 2, 2);
  const CliResult cut = run_zaya_in(t.dir.path, base + " --stop " + test::shell_quote(stop));
  ASSERT_EQ(cut.code, 0) << cut.err;
  EXPECT_EQ(cut.out, text.substr(0, text.find(stop)) + "\n");
}

// --echo: the prompt's text, then the same text as without it, on stdout; the status line goes to
// stderr whole (its own line), never into the text.
TEST(GenerateCli, EchoPrintsThePromptBeforeTheText) {
  TinyModelDir t;
  const std::string base = "generate --model " + t.model +
                           " --prompt 'And God said' --max-new-tokens 12 --temperature 0 "
                           "--ignore-eos";
  const CliResult plain = run_zaya_in(t.dir.path, base);
  const CliResult echo = run_zaya_in(t.dir.path, base + " --echo");
  ASSERT_EQ(echo.code, 0) << echo.err;
  EXPECT_EQ(echo.out, "And God said" + plain.out);
  const size_t status = echo.err.find("generate: ");
  ASSERT_NE(status, std::string::npos) << echo.err;
  EXPECT_TRUE(status == 0 || echo.err[status - 1] == '\n') << echo.err;
  EXPECT_EQ(echo.err.find("And God said"), std::string::npos) << echo.err;
}

TEST(GenerateCli, UserErrors) {
  TinyModelDir t;
  const std::string& d = t.dir.path;
  const std::string m = " --model " + t.model;
  expect_user_error(run_zaya_in(d, "generate" + m + " --ids"), "exactly one of");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt a --prompt-ids 1"),
                    "exactly one of");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt-ids '1 x' --ids"), "'x'");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt-ids '1 5000' --ids"),
                    "outside the vocabulary");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt hi --temperature -1"),
                    "temperature");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt hi --top-p 0"), "top_p");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt hi --max-new-tokens 5000"),
                    "exceeds the context");
  expect_user_error(run_zaya_in(d, "generate --model " + d + "/nope --prompt hi"),
                    "does not exist");
  std::filesystem::remove(t.model + "/tokenizer.json");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt hi"), "tokenizer");
  const CliResult ids_only = run_zaya_in(d, "generate" + m + " --prompt-ids '2 3' --ids --quiet");
  EXPECT_EQ(ids_only.code, 0) << ids_only.err;
}

}  // namespace
}  // namespace zaya
