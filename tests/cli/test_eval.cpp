// `zaya eval` end to end on a tiny random model with the toy tokenizer in its directory: --text and
// --dataset against direct computations (one forward over a text that fits a window; the --tokens
// rows of the same tokens for non-overlapping windows), the default context and stride, --json,
// --quiet, the --model note, and the errors (missing files, a shard or binary file given to
// --tokens, flags of the wrong mode, a tokenizer or dataset that does not fit the model).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

const std::string kToy = std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json";

// A model directory: the tiny config with `vocab` tokens, random weights, the toy tokenizer.
std::string make_model(const ScratchDir& dir, const std::string& name, int64_t vocab) {
  const std::string m = dir / name;
  ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  c.vocab_size = vocab;
  Model model(c);
  model.init_random(3, 0.05);
  model.save_dir(m);
  fs::copy_file(kToy, m + "/tokenizer.json");
  return m;
}

std::string story() {
  std::string s;
  for (int i = 0; i < 40; ++i)
    s += "Line " + std::to_string(i) + " of the story: the fox ran " + std::to_string(i * 7) +
         " miles.\n";
  return s;
}

// "loss X" on the first line of stdout.
double loss_of(const CliResult& r) {
  EXPECT_EQ(r.out.rfind("loss ", 0), 0u) << r.out << r.err;
  return r.out.size() > 5 ? std::stod(r.out.substr(5)) : NAN;
}

// A --tokens file: rows [i·C, i·C + C + 1) of `ids` (consecutive rows share a token).
std::string token_rows(const std::vector<int32_t>& ids, int64_t C, int64_t rows) {
  std::string s;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i <= C; ++i) s += (i ? " " : "") + std::to_string(ids[size_t(r * C + i)]);
    s += "\n";
  }
  return s;
}

class EvalCli : public testing::Test {
 protected:
  ScratchDir dir;
  std::string model = make_model(dir, "model", 1024);
  Tokenizer tok = Tokenizer::load(kToy);
  std::string text = story();
  std::string text_file = dir / "story.txt";
  void SetUp() override { std::ofstream(text_file, std::ios::binary) << text; }
  CliResult run(const std::string& args) { return run_zaya_in(dir.path, args); }
  std::vector<int32_t> text_ids() const {
    std::vector<int32_t> ids = {tok.bos_id()};
    tok.encode(text, ids);
    return ids;
  }
};

}  // namespace

// The whole text in one window: the loss is the mean of one forward's per-token losses.
TEST_F(EvalCli, TextInOneWindowIsOneForward) {
  const std::vector<int32_t> ids = text_ids();
  const int64_t n = int64_t(ids.size());
  ASSERT_LT(n, 2048);
  const CliResult r = run("eval --model " + model + " --text " + text_file + " --context 2048");
  ASSERT_EQ(r.code, 0) << r.err;
  const Model m = Model::load_dir(model);
  Activations a(m.config(), 1, n);
  const double want = model_forward(m, a, ids.data());  // the n − 1 next-token losses
  EXPECT_NEAR(loss_of(r), want, 1e-6);
  EXPECT_NE(
      r.out.find(fmt::format("over {} tokens in 1 windows (context 2048, stride 1024)", n - 1)),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("eval: text " + text_file + " (" + std::to_string(n) + " tokens by " +
                       model + "/tokenizer.json)"),
            std::string::npos)
      << r.err;
}

// Non-overlapping windows (stride = context) are the --tokens rows of the same ids; --max-tokens
// cuts the stream to a whole number of windows.
TEST_F(EvalCli, TextWindowsMatchTokenRows) {
  const std::vector<int32_t> ids = text_ids();
  const int64_t C = 16, rows = (int64_t(ids.size()) - 1) / C;
  ASSERT_GE(rows, 10);
  std::ofstream(dir / "rows.txt", std::ios::binary) << token_rows(ids, C, rows);
  const CliResult want = run("eval --model " + model + " --tokens " + dir / "rows.txt");
  ASSERT_EQ(want.code, 0) << want.err;
  const CliResult got = run("eval --model " + model + " --text " + text_file + " --context 16 " +
                            "--stride 16 --max-tokens " + std::to_string(rows * C));
  ASSERT_EQ(got.code, 0) << got.err;
  EXPECT_NEAR(loss_of(got), loss_of(want), 1e-6);
  EXPECT_NE(got.out.find(fmt::format("over {} tokens in {} windows", rows * C, rows)),
            std::string::npos)
      << got.out;
  EXPECT_NE(want.out.find(fmt::format("over {} tokens in {} rows of 17", rows * C, rows)),
            std::string::npos)
      << want.out;
}

// A dataset's split, windowed the same way: the --tokens rows of the split's own tokens.
TEST_F(EvalCli, DatasetSplitMatchesTokenRows) {
  std::string big;
  for (int i = 0; i < 6; ++i) big += text;
  std::ofstream(dir / "big.txt", std::ios::binary) << big;
  CliResult r = run("data prepare --quiet --tokenizer " + model + "/tokenizer.json --input " +
                    dir / "big.txt" + " --out " + dir / "ds" + " --val-fraction 0.2");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string split : {"val", "train"}) {
    const TokenLoader l(dir / "ds", split, 2, 0);
    const int64_t C = 16, rows = std::min<int64_t>(12, (l.total_tokens() - 1) / C);
    ASSERT_GE(rows, 4) << split;
    std::vector<int32_t> ids(size_t(rows * C + 1));
    l.read_tokens(0, int64_t(ids.size()), ids.data());
    std::ofstream(dir / "rows.txt", std::ios::binary) << token_rows(ids, C, rows);
    const CliResult want = run("eval --model " + model + " --tokens " + dir / "rows.txt");
    ASSERT_EQ(want.code, 0) << want.err;
    const CliResult got =
        run("eval --model " + model + " --dataset " + dir / "ds" + " --split " + split +
            " --context 16 --stride 16 --max-tokens " + std::to_string(rows * C) + " --json");
    ASSERT_EQ(got.code, 0) << got.err;
    const nlohmann::json j = nlohmann::json::parse(got.out);
    EXPECT_NEAR(j.at("loss").get<double>(), loss_of(want), 1e-6) << split;
    EXPECT_EQ(j.at("tokens"), rows * C);
    EXPECT_EQ(j.at("windows"), rows);
    EXPECT_EQ(j.at("source"), "dataset");
    EXPECT_NEAR(j.at("perplexity").get<double>(), std::exp(j.at("loss").get<double>()), 1e-9);
  }
  // The default split is val; the default stride half the context.
  r = run("eval --model " + model + " --dataset " + dir / "ds" + " --context 32");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("split val"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("(context 32, stride 16)"), std::string::npos) << r.out;
}

// The trained context (tokenizer_config.json), --quiet, --json, and --model naming a file.
TEST_F(EvalCli, DefaultContextQuietJsonAndModelNote) {
  std::ofstream(model + "/tokenizer_config.json") << R"({"model_max_length": 24})";
  CliResult r = run("eval --model " + model + " --text " + text_file);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(context 24, stride 12)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("context 24 (model_max_length in"), std::string::npos) << r.err;
  const std::string out = r.out;
  r = run("eval --quiet --model " + model + " --text " + text_file);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, out);  // the result, kept
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
  r = run("eval --model " + model + "/config.json --text " + text_file + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(
      r.err.find("eval: model " + model + " (the model directory of " + model + "/config.json)"),
      std::string::npos)
      << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("context"), 24);
  EXPECT_EQ(j.at("stride"), 12);
  EXPECT_EQ(j.at("source"), "text");
  EXPECT_EQ(j.at("tokens"), int64_t(text_ids().size()) - 1);
}

TEST_F(EvalCli, Errors) {
  const std::string m = "eval --model " + model;
  expect_user_error(run(m + " --text " + dir / "absent.txt"), "--text " + dir / "absent.txt");
  expect_user_error(run(m + " --dataset " + dir / "nods"), "no dataset.json");
  expect_user_error(run(m), "--tokens");  // nothing to evaluate names the three flags
  expect_user_error(run(m + " --text " + text_file + " --logits " + dir / "l.st"),
                    "--logits and --grads go with --tokens");
  expect_user_error(run(m + " --tokens x --stride 4"), "go with --text or --dataset");
  expect_user_error(run(m + " --text " + text_file + " --split train"),
                    "--split goes with --dataset");
  expect_user_error(run(m + " --text " + text_file + " --context 4096"),
                    "--context 4096 is longer than the model's max_position_embeddings 2048");
  expect_user_error(run(m + " --text " + text_file + " --context 16 --stride 17"),
                    "--stride 17 is longer than the context 16");
  CliResult r = run(m + " --text " + text_file + " --split test");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--split 'test': use train or val"), std::string::npos) << r.err;

  // A shard or any binary file given to --tokens: named, never echoed.
  CliResult p = run("data prepare --quiet --tokenizer " + kToy + " --input " + text_file +
                    " --out " + dir / "ds");
  ASSERT_EQ(p.code, 0) << p.err;
  r = run(m + " --tokens " + dir / "ds/train_000000.bin");
  expect_user_error(r, "a zaya token shard, not a text file of token ids");
  EXPECT_NE(r.err.find("--dataset DIR"), std::string::npos) << r.err;
  std::ofstream(dir / "bin.dat", std::ios::binary) << std::string("12 7\0\x01\xff 9\n", 9);
  r = run(m + " --tokens " + dir / "bin.dat");
  expect_user_error(r, "binary data (byte 0x00 at offset 4)");
  for (const CliResult* x : {&r})
    EXPECT_TRUE(std::all_of(x->err.begin(), x->err.end(),
                            [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7f); }))
        << "raw bytes in: " << x->err;

  // A tokenizer larger than the model's vocabulary; a dataset of another tokenizer.
  const std::string small = make_model(dir, "small", 512);
  expect_user_error(run("eval --model " + small + " --text " + text_file),
                    "has 1024 tokens but the model's vocab_size is 512");
  std::ofstream(dir / "other.json") << slurp(kToy) << "\n";  // same vocabulary, other bytes
  p = run("data prepare --quiet --tokenizer " + dir / "other.json" + " --input " + text_file +
          " --out " + dir / "ds2 --val-fraction 0.5");
  ASSERT_EQ(p.code, 0) << p.err;
  expect_user_error(run(m + " --dataset " + dir / "ds2"),
                    "was tokenized with " + dir / "other.json");
  // … accepted when --tokenizer names the one it was made with.
  r = run(m + " --dataset " + dir / "ds2 --tokenizer " + dir / "other.json");
  EXPECT_EQ(r.code, 0) << r.err;
  // A text too short to score.
  std::ofstream(dir / "empty.txt") << "";
  expect_user_error(run(m + " --text " + dir / "empty.txt"), "at least 2 are needed");
}
