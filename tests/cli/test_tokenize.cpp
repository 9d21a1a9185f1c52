// `zaya tokenize` and `zaya tokenizer-train` end to end on the committed toy tokenizer: every
// input form (--text, --file, --jsonl, standard input), --bos, --decode, and bad input giving one
// "zaya: error:" line and exit code 1.
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "data/tokenizer.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

CliResult run(const ScratchDir& dir, const std::string& args, const std::string& stdin_text = "") {
  return run_zaya_in(dir.path, args, stdin_text);
}

std::string toy() {
  return std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json";
}

std::string id_line(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "\n";
}

}  // namespace

class TokenizeCli : public testing::Test {
 protected:
  ScratchDir dir;
  Tokenizer tok = Tokenizer::load(toy());
  std::string base = "tokenize --tokenizer " + toy();
};

TEST_F(TokenizeCli, TextFileJsonlAndStdin) {
  const std::string text = "Hello, world! Καλημέρα 🤗  <start_of_turn>user";
  CliResult r = run(dir, base + " --text " + shell_quote(text));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(tok.encode(text)));

  r = run(dir, base + " --text " + shell_quote(text) + " --bos");
  std::vector<int32_t> with_bos = {2};
  for (int32_t id : tok.encode(text)) with_bos.push_back(id);
  EXPECT_EQ(r.out, id_line(with_bos));

  std::ofstream(dir / "in.txt", std::ios::binary) << "first line\r\nsecond  line\n\nlast";
  r = run(dir, base + " --file " + dir / "in.txt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(tok.encode("first line")) + id_line(tok.encode("second  line")) +
                       id_line({}) + id_line(tok.encode("last")));

  std::ofstream(dir / "in.jsonl", std::ios::binary)
      << nlohmann::json("two\nlines").dump() << "\n"
      << nlohmann::json({{"text", "an object"}}).dump() << "\n";
  r = run(dir, base + " --jsonl " + dir / "in.jsonl");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(tok.encode("two\nlines")) + id_line(tok.encode("an object")));

  r = run(dir, base, "from stdin\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(tok.encode("from stdin")));
}

TEST_F(TokenizeCli, DecodeReversesEncode) {
  const std::string text = "Decode me: ünïcödé and   spaces\tand tabs";
  CliResult r = run(dir, base + " --decode --text " + shell_quote(id_line(tok.encode(text))));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text + "\n");

  std::ofstream(dir / "ids.txt", std::ios::binary)
      << id_line(tok.encode("one")) << "[" << tok.encode("two")[0] << "]\n";
  r = run(dir, base + " --decode --file " + dir / "ids.txt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "one\n" + tok.decode(std::vector<int32_t>{tok.encode("two")[0]}) + "\n");

  // --jsonl round trip: texts with newlines survive as JSON strings.
  std::ofstream(dir / "t.jsonl", std::ios::binary) << nlohmann::json("a\nb <bos>").dump() << "\n";
  r = run(dir, base + " --jsonl " + dir / "t.jsonl");
  std::ofstream(dir / "ids.jsonl", std::ios::binary) << r.out;
  r = run(dir, base + " --decode --jsonl " + dir / "ids.jsonl");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, nlohmann::json("a\nb <bos>").dump() + "\n");
}

TEST_F(TokenizeCli, BadInput) {
  expect_user_error(run(dir, "tokenize --tokenizer " + dir / "absent.json" + " --text x"),
                    "absent.json");
  std::ofstream(dir / "bad.json") << "{\"model\": ";
  expect_user_error(run(dir, "tokenize --tokenizer " + dir / "bad.json" + " --text x"),
                    "not valid JSON");
  std::ofstream(dir / "wp.json") << R"({"model": {"type": "WordPiece", "vocab": {}}})";
  expect_user_error(run(dir, "tokenize --tokenizer " + dir / "wp.json" + " --text x"),
                    "model type 'WordPiece' is not supported");
  expect_user_error(run(dir, base + " --file " + dir / "absent.txt"), "absent.txt");
  expect_user_error(run(dir, base + " --decode --text '1 x 3'"), "'x' is not a token id");
  expect_user_error(run(dir, base + " --decode --text '5 99999'"), "99999");
  std::ofstream(dir / "bad.jsonl") << "not json\n";
  expect_user_error(run(dir, base + " --jsonl " + dir / "bad.jsonl"), "line 1");
  const CliResult both = run(dir, base + " --text a --file b");
  EXPECT_NE(both.code, 0);
}

TEST(TokenizerTrainCli, TrainsLoadsAndErrors) {
  ScratchDir dir;
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/gemma3_corpus.jsonl", std::ios::binary);
  std::ofstream a(dir / "a.txt", std::ios::binary), b(dir / "b.txt", std::ios::binary);
  int n = 0;
  for (std::string line; n < 80 && std::getline(f, line); ++n)
    (n % 2 ? a : b) << nlohmann::json::parse(line).get<std::string>() << "\n";
  a.close();
  b.close();
  CliResult r = run(dir, "tokenizer-train --input " + shell_quote(dir / "*.txt") +
                             " --vocab-size 700 --out " + dir / "tok.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("700 tokens"), std::string::npos) << r.err;
  const Tokenizer t = Tokenizer::load(dir / "tok.json");
  EXPECT_EQ(t.vocab_size(), 700);
  EXPECT_EQ(t.bos_id(), 2);
  r = run(dir, "tokenize --tokenizer " + dir / "tok.json" + " --text 'round trip'");
  EXPECT_EQ(r.out, id_line(t.encode("round trip")));

  expect_user_error(run(dir, "tokenizer-train --input " + shell_quote(dir / "*.none") +
                                 " --vocab-size 700 --out " + dir / "x.json"),
                    "matches no files");
  expect_user_error(run(dir, "tokenizer-train --input " + dir / "a.txt" +
                                 " --vocab-size 50 --out " + dir / "x.json"),
                    "--vocab-size 50 is too small");
  expect_user_error(run(dir, "tokenizer-train --input " + dir / "a.txt" +
                                 " --vocab-size 700 --out /nonexistent/dir/x.json"),
                    "/nonexistent/dir");
}
