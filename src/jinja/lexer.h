// The template's text cut into tokens, as jinja2's lexer cuts it with trim_blocks and
// lstrip_blocks on: data between tags (already stripped by `-`, lstrip_blocks and trim_blocks),
// and inside {{ }} / {% %} the expression tokens. Comments and raw blocks are resolved here.
//
// Contract: lex(source) normalizes newlines (\r\n and \r read as \n) and drops one trailing
// newline (jinja2's keep_trailing_newline=False); every token carries the 1-based line and
// column of its first byte in the normalized source. A malformed tag (unclosed comment, tag or
// string, an unexpected character, unbalanced brackets) throws TemplateError at that position.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::jinja {

enum class Tok : uint8_t {
  Data,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Int,
  Float,
  Op,
  Eof
};

struct Token {
  Tok type = Tok::Eof;
  std::string text;  // Data: the text; Name / Op: the word; String: the decoded value
  int64_t ival = 0;
  double fval = 0;
  int line = 0, col = 0;
};

std::vector<Token> lex(std::string_view source, const std::string& name);

}  // namespace zaya::jinja
