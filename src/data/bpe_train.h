// Learns a byte-fallback BPE tokenizer in Gemma 3's tokenizer.json format, for small demo models
// (where a 262k vocabulary would dominate the parameters). Same pipeline as Gemma 3: " " → "▁",
// newline runs and special tokens cut out first, BPE with <0xNN> byte fallback, the same decoder.
// Layout of the vocabulary (ZAYA1's pad/eos/bos ids 0/1/2 hold):
//   0 <pad>, 1 <eos>, 2 <bos>, 3 <unk>, 4 <mask>, 5 <start_of_turn>, 6 <end_of_turn>   (special)
//   then "\n" … "\n"×kNewlineRuns (added, not special), <0x00> … <0xFF>, the most frequent
//   characters, then one token per merge, and <unusedK> padding if the text runs out of pairs.
// Training: words = the pieces encode's BPE sees, cut before each "▁" run (as SentencePiece
// counts words); pairs are merged by count (ties: the smaller id pair), never across words.
// Deterministic: the same inputs and options give the same tokenizer.json, for any thread count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace zaya {

struct BpeTrainOptions {
  int64_t min_frequency = 2;     // a pair seen fewer times is never merged
  int64_t max_token_chars = 24;  // merged tokens are at most this many characters
  int64_t max_chars = 0;         // characters kept as tokens (0: up to a quarter of the vocab)
  bool progress = false;         // log progress lines
};

inline constexpr int kNewlineRuns = 8;  // "\n" … "\n"×8 are added tokens

// The smallest vocab_size train_bpe accepts: the special, newline and 256 byte tokens + 1.
int64_t bpe_min_vocab_size();

// Trains on text files, streamed in blocks; counting runs on all OpenMP threads. Throws
// zaya::Error on a missing file, a vocab_size below bpe_min_vocab_size(), or input without any
// text to learn from (empty files, only newlines), naming the files.
Tokenizer train_bpe(const std::vector<std::string>& files, int64_t vocab_size,
                    const BpeTrainOptions& opt = {});
// The same on in-memory texts (each text is one document).
Tokenizer train_bpe_on_texts(const std::vector<std::string>& texts, int64_t vocab_size,
                             const BpeTrainOptions& opt = {});

}  // namespace zaya
