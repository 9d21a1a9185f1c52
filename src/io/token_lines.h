// Token-id text files: one sequence per line, whitespace-separated non-negative integer ids, all
// lines the same length (at least 2: the loss predicts token t+1 from token t). Blank lines are
// skipped. Used by `zaya eval`-style commands and tests to feed fixed batches.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct TokenLines {
  int64_t rows = 0, cols = 0;
  std::vector<int32_t> ids;  // [rows, cols], row-major
};

// Reads and validates `path`; every id must lie in [0, vocab_size). Throws zaya::Error naming the
// file and line on any problem (missing file, non-integer token, id out of range, ragged lines,
// no lines, lines shorter than 2 tokens).
TokenLines read_token_lines(const std::string& path, int64_t vocab_size);

// Writes one line per row, ids separated by single spaces. Throws zaya::Error on I/O failure.
void write_token_lines(const std::string& path, const TokenLines& lines);

}  // namespace zaya
