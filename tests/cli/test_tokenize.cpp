// `zaya tokenize` and `zaya tokenizer-train` end to end on the committed toy tokenizer: every
// input form (--text, --file whole or --lines, --jsonl, standard input), --bos, --decode, the
// round trip of a file with its newlines, and bad input (an empty corpus too) giving one
// "zaya: error:" line and exit code 1.
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
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

  const std::string file = "first line\r\nsecond  line\n\nlast";
  std::ofstream(dir / "in.txt", std::ios::binary) << file;
  r = run(dir, base + " --file " + dir / "in.txt");  // one text, newlines and all
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, id_line(tok.encode(file)));
  r = run(dir, base + " --file " + dir / "in.txt" + " --lines");
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

// A file with newlines (blank lines, a trailing one) encodes to ids that decode to the file.
TEST_F(TokenizeCli, FileRoundTripKeepsNewlines) {
  const std::string text = "Chapter 1\n\nIt was a dark night.\n  Indented line\tand tab\n\n\n";
  std::ofstream(dir / "story.txt", std::ios::binary) << text;
  CliResult r = run(dir, base + " --file " + dir / "story.txt");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;  // one line of ids
  std::vector<int32_t> ids;
  std::istringstream in(r.out);
  for (int32_t id; in >> id;) ids.push_back(id);
  EXPECT_EQ(tok.decode(ids), text);
  // And through the CLI: --decode prints the text and ends it with a newline.
  std::ofstream(dir / "ids.txt", std::ios::binary) << r.out;
  r = run(dir, base + " --decode --file " + dir / "ids.txt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text + "\n");
  // --lines needs --file.
  r = run(dir, base + " --lines --text x");
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(r.crashed);
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
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/gemma3_corpus.jsonl",
                  std::ios::binary);
  std::ofstream a(dir / "a.txt", std::ios::binary), b(dir / "b.txt", std::ios::binary);
  int n = 0;
  for (std::string line; n < 80 && std::getline(f, line); ++n)
    (n % 2 ? a : b) << nlohmann::json::parse(line).get<std::string>() << "\n";
  a.close();
  b.close();
  CliResult r = run(dir, "tokenizer-train --input " + shell_quote(dir / "*.txt") +
                             " --vocab-size 700 --out " + dir / "tok.json");
  ASSERT_EQ(r.code, 0) << r.err;
  // The result on stdout, progress on stderr.
  EXPECT_EQ(r.out, "tokenizer-train: wrote " + dir / "tok.json" + " (700 tokens)\n");
  EXPECT_NE(r.err.find("tokenizer-train: "), std::string::npos) << r.err;
  const Tokenizer t = Tokenizer::load(dir / "tok.json");
  EXPECT_EQ(t.vocab_size(), 700);
  EXPECT_EQ(t.bos_id(), 2);
  r = run(dir, "tokenize --tokenizer " + dir / "tok.json" + " --text 'round trip'");
  EXPECT_EQ(r.out, id_line(t.encode("round trip")));

  // --quiet: no progress, the result stays.
  r = run(dir, "tokenizer-train --input " + shell_quote(dir / "*.txt") +
                   " --vocab-size 700 --quiet --out " + dir / "tok2.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "tokenizer-train: wrote " + dir / "tok2.json" + " (700 tokens)\n");

  // No text to learn from: an error, and no tokenizer written.
  std::ofstream(dir / "empty.txt", std::ios::binary) << "";
  expect_user_error(run(dir, "tokenizer-train --input " + dir / "empty.txt" +
                                 " --vocab-size 700 --quiet --out " + dir / "e.json"),
                    "no text to train a tokenizer on: " + dir / "empty.txt" + " (0 bytes)");
  EXPECT_FALSE(std::filesystem::exists(dir / "e.json"));
  std::ofstream(dir / "blank.txt", std::ios::binary) << "\n\n\n";
  expect_user_error(run(dir, "tokenizer-train --input " + dir / "blank.txt" +
                                 " --vocab-size 700 --quiet --out " + dir / "e.json"),
                    "no text");

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
