// Token-id text files (see token_lines.h). Line numbers in messages are 1-based physical lines
// (blank lines count), columns 1-based bytes.
#include "io/token_lines.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/assert.h"
#include "io/file.h"

namespace zaya {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Shortened token for messages.
std::string shown(std::string_view tok) {
  return tok.size() <= 32 ? std::string(tok) : std::string(tok.substr(0, 32)) + "...";
}

}  // namespace

TokenLines read_token_lines(const std::string& path, int64_t vocab_size) {
  ZAYA_ASSERT(vocab_size > 0, "read_token_lines: vocab_size {} must be positive", vocab_size);
  const std::string text = read_text_file(path, "token file");
  TokenLines out;
  int64_t first_line = 0;  // line number of the first non-blank line (sets cols)
  int64_t line_no = 0;
  size_t pos = 0;
  std::vector<int32_t> row;
  while (pos < text.size()) {
    ++line_no;
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;

    row.clear();
    for (size_t i = 0; i < line.size();) {
      if (is_space(line[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      const std::string_view tok = line.substr(i, j - i);
      const size_t column = i + 1;
      i = j;

      const bool negative = tok.size() > 1 && tok[0] == '-';
      const std::string_view digits = negative ? tok.substr(1) : tok;
      int64_t id = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
      if (end != digits.data() + digits.size() ||
          (ec != std::errc() && ec != std::errc::result_out_of_range))
        fail("{}: line {}, column {}: token '{}' is not a non-negative integer id", path, line_no,
             column, shown(tok));
      if (negative || ec == std::errc::result_out_of_range || id >= vocab_size)
        fail("{}: line {}: token id {} out of range [0, {})", path, line_no, shown(tok),
             vocab_size);
      row.push_back(int32_t(id));
    }
    if (row.empty()) continue;  // blank line
    if (row.size() < 2)
      fail(
          "{}: line {} has 1 token; each line needs at least 2 (the loss predicts token t+1 from "
          "token t)",
          path, line_no);
    if (out.rows == 0) {
      out.cols = int64_t(row.size());
      first_line = line_no;
    } else if (int64_t(row.size()) != out.cols) {
      fail("{}: line {} has {} tokens, line {} has {}; all lines must be the same length", path,
           line_no, row.size(), first_line, out.cols);
    }
    out.ids.insert(out.ids.end(), row.begin(), row.end());
    ++out.rows;
  }
  if (out.rows == 0) fail("{}: no token lines (the file is empty or blank)", path);
  return out;
}

void write_token_lines(const std::string& path, const TokenLines& lines) {
  ZAYA_ASSERT(
      lines.rows >= 0 && lines.cols >= 0 && int64_t(lines.ids.size()) == lines.rows * lines.cols,
      "write_token_lines: {} ids for [{}, {}]", lines.ids.size(), lines.rows, lines.cols);
  std::string text;
  for (int64_t r = 0; r < lines.rows; ++r) {
    for (int64_t c = 0; c < lines.cols; ++c) {
      if (c) text += ' ';
      text += std::to_string(lines.ids[size_t(r * lines.cols + c)]);
    }
    text += '\n';
  }
  write_file(path, text);
}

}  // namespace zaya
