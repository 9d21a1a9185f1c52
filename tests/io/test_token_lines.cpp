// Token-id text files: round trip, tolerant whitespace/blank lines, and one clear error per kind
// of bad input.
#include "io/token_lines.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/assert.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {}  // namespace

class TokenLinesTest : public testing::Test {
 protected:
  ScratchDir dir;
  std::string path = dir / "tokens.txt";
  void write(const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  void expect_read_error(const std::string& text, std::initializer_list<std::string> parts,
                         int64_t vocab = 512) {
    SCOPED_TRACE(text);
    write(text);
    expect_error([&] { read_token_lines(path, vocab); }, parts);
  }
};

TEST_F(TokenLinesTest, RoundTrip) {
  TokenLines lines{3, 4, {0, 1, 2, 511, 5, 6, 7, 8, 100, 200, 300, 400}};
  write_token_lines(path, lines);
  TokenLines back = read_token_lines(path, 512);
  EXPECT_EQ(back.rows, 3);
  EXPECT_EQ(back.cols, 4);
  EXPECT_EQ(back.ids, lines.ids);
}

TEST_F(TokenLinesTest, WhitespaceBlankLinesAndCrlf) {
  write("\n  1 2\t3  \r\n\n\n4   5 6\n7 8 9");  // no trailing newline on the last line
  TokenLines t = read_token_lines(path, 10);
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.cols, 3);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  write("1 2\n\n   \n");
  t = read_token_lines(path, 3);
  EXPECT_EQ(t.rows, 1);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 2}));
}

TEST_F(TokenLinesTest, MissingFile) {
  expect_error([&] { read_token_lines(dir / "absent.txt", 512); }, {"absent.txt", "cannot open"});
}

TEST_F(TokenLinesTest, NonIntegerToken) {
  expect_read_error("1 2 3\n4 x1 6\n",
                    {path, "line 2, column 3", "'x1'", "not a non-negative integer"});
  expect_read_error("1 2.5\n", {"line 1, column 3", "'2.5'"});
  expect_read_error("1 +2\n", {"'+2'"});
  expect_read_error("1 -\n", {"'-'"});
  expect_read_error("1 -x\n", {"'-x'", "not a non-negative integer"});
}

TEST_F(TokenLinesTest, IdOutOfRange) {
  expect_read_error("1 2\n3 4\n5 600\n", {path, "line 3: token id 600 out of range [0, 512)"});
  expect_read_error("1 512\n", {"line 1: token id 512 out of range [0, 512)"});
  expect_read_error("1 -1\n", {"line 1: token id -1 out of range [0, 512)"});
  expect_read_error("1 99999999999999999999999\n", {"out of range [0, 512)"});
}

TEST_F(TokenLinesTest, RaggedLines) {
  expect_read_error("1 2 3 4 5 6 7 8 9\n\n1 2 3 4 5 6 7\n",
                    {path, "line 3 has 7 tokens, line 1 has 9; all lines must be the same length"});
  expect_read_error("1 2 3 4 5 6 7 8 9\n1 2 3 4 5 6 7\n",
                    {"line 2 has 7 tokens, line 1 has 9; all lines must be the same length"});
}

TEST_F(TokenLinesTest, EmptyFile) {
  expect_read_error("", {path, "empty"});
  expect_read_error("\n \n\t\n", {path, "empty"});
}

TEST_F(TokenLinesTest, LineShorterThanTwoTokens) {
  expect_read_error("7\n", {"line 1 has 1 token", "at least 2"});
  expect_read_error("1 2\n3\n", {"line 2 has 1 token", "at least 2"});
}
