// `zaya generate` end to end: a tiny random model directory with the toy tokenizer; greedy ids are
// deterministic and equal the engine's, text streams, samples decode together, stop strings and
// every user error give one "zaya: error:" line. A run or checkpoint as --model, the tokenizer and
// the trained context taken from the model directory (infer/model_files.h), and --quiet keeping
// the text.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "infer/whole_model_dir.h"
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
                    "exceeds the model's context of 2048 tokens");
  expect_user_error(run_zaya_in(d, "generate --model " + d + "/nope --prompt hi"),
                    "--model " + d + "/nope: no such file or directory");
  expect_user_error(run_zaya_in(d, "generate --model " + t.model + "/nope --prompt hi"),
                    "did you mean " + t.model + "?");
  std::filesystem::remove(t.model + "/tokenizer.json");
  expect_user_error(run_zaya_in(d, "generate" + m + " --prompt hi"),
                    t.model + ": no tokenizer.json in the model directory; pass --tokenizer FILE");
  const CliResult ids_only = run_zaya_in(d, "generate" + m + " --prompt-ids '2 3' --ids --quiet");
  EXPECT_EQ(ids_only.code, 0) << ids_only.err;
}

// A run as the trainer leaves it: --model names the run (its newest checkpoint), a checkpoint, or a
// file in a model directory, with no --tokenizer; stderr says what was picked.
TEST(GenerateCli, ARunOrCheckpointIsAWholeModel) {
  test::ScratchDir d;
  const std::string run = d / "runs/tiny";
  test::save_whole_run(run, {10, 20}, 32);
  const std::string base =
      " --prompt-ids '2 40 41' --ids --temperature 0 --max-new-tokens 6 "
      "--ignore-eos";
  const CliResult newest = run_zaya_in(d.path, "generate --model " + run + base);
  ASSERT_EQ(newest.code, 0) << newest.err;
  const std::string picked = run + "/step_00000020/model";
  const std::string why = "(the newest valid checkpoint of " + run + ": step 20)";
  EXPECT_NE(newest.err.find("generate: model " + picked + " " + why), std::string::npos)
      << newest.err;
  const CliResult step20 = run_zaya_in(d.path, "generate --model " + run + "/step_00000020" + base);
  ASSERT_EQ(step20.code, 0) << step20.err;
  EXPECT_EQ(step20.out, newest.out);
  EXPECT_NE(step20.err.find("checkpoint " + run + "/step_00000020's model"), std::string::npos)
      << step20.err;
  const CliResult step10 = run_zaya_in(d.path, "generate --model " + run + "/step_00000010" + base);
  const CliResult file10 = run_zaya_in(
      d.path, "generate --model " + run + "/step_00000010/model/model.safetensors" + base);
  ASSERT_EQ(file10.code, 0) << file10.err;
  EXPECT_EQ(file10.out, step10.out);
  EXPECT_NE(step10.out, step20.out) << "the two checkpoints hold different weights";
  // Text in and out through the model directory's tokenizer.
  const CliResult text =
      run_zaya_in(d.path, "generate --model " + run +
                              " --prompt 'In the beginning' --max-new-tokens 8 --seed 3");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_FALSE(text.out.empty());
  // A folder the trainer never writes: the run is suggested.
  expect_user_error(run_zaya_in(d.path, "generate --model " + run + "/final --prompt hi"),
                    "did you mean " + run + "? (a run)");
}

// The context is the trained one (tokenizer_config.json's model_max_length, 32 here): the default
// --max-new-tokens is what fits, a prompt or request beyond it is refused naming both numbers, and
// --max-context goes past it (with a warning) up to max_position_embeddings.
TEST(GenerateCli, TheTrainedContextBoundsPromptAndOutput) {
  test::ScratchDir d;
  const std::string model = d / "m";
  test::save_whole_model_dir(model, 32);
  const std::string m = "generate --model " + model + " --ids --temperature 0 --ignore-eos";
  const CliResult fits = run_zaya_in(d.path, m + " --prompt-ids '2 40 41'");
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_EQ(words(fits.out).size(), 29u) << "32 - 3 prompt tokens";
  EXPECT_NE(fits.err.find("context 32"), std::string::npos) << fits.err;

  std::string long_prompt;
  for (int k = 0; k < 40; ++k) long_prompt += std::to_string(10 + k) + " ";
  const CliResult too_long = run_zaya_in(d.path, m + " --prompt-ids '" + long_prompt + "'");
  expect_user_error(too_long, "the prompt has 40 tokens, but the model's context is 32 tokens");
  EXPECT_NE(too_long.err.find("model_max_length"), std::string::npos) << too_long.err;
  EXPECT_NE(too_long.err.find("--max-context up to 2048"), std::string::npos) << too_long.err;
  expect_user_error(run_zaya_in(d.path, m + " --prompt-ids '2 40 41' --max-new-tokens 30"),
                    "exceeds the model's context of 32 tokens");

  const CliResult wider =
      run_zaya_in(d.path, m + " --prompt-ids '" + long_prompt + "' --max-context 64");
  ASSERT_EQ(wider.code, 0) << wider.err;
  EXPECT_EQ(words(wider.out).size(), 24u) << "64 - 40 prompt tokens";
  EXPECT_NE(wider.err.find("zaya: warning: --max-context 64 is beyond the 32 tokens the model was "
                           "trained on"),
            std::string::npos)
      << wider.err;
  expect_user_error(run_zaya_in(d.path, m + " --prompt-ids '2 3' --max-context 4096"),
                    "--max-context 4096 exceeds the model's max_position_embeddings of 2048");
}

// --quiet drops the logs on stderr, never the generated text on stdout (docs/cli.md).
TEST(GenerateCli, QuietKeepsTheText) {
  TinyModelDir t;
  const std::string base = "generate --model " + t.model +
                           " --prompt 'And God said' --max-new-tokens 8 --temperature 0 "
                           "--ignore-eos";
  const CliResult loud = run_zaya_in(t.dir.path, base);
  const CliResult quiet = run_zaya_in(t.dir.path, base + " --quiet");
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_GT(quiet.out.size(), 1u);
  EXPECT_EQ(quiet.out, loud.out);
  EXPECT_EQ(quiet.err, "");
  EXPECT_NE(loud.err, "");
}

}  // namespace
}  // namespace zaya
