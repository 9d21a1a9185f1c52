// Incremental detokenisation with stop strings. Generated ids are pushed one at a time; each push
// returns the text that is now safe to show: complete UTF-8 only (a byte-fallback character split
// over several tokens is held back until whole), and never a tail that could still grow into a stop
// string. When a stop string appears, the text before it is returned, `stopped` is set and the
// stop string itself is never emitted.
//
// Decoding is windowed (the Hugging Face text-generation-inference scheme): the new text of a push
// is decode(ids[prefix:]) minus decode(ids[prefix:read]), where [prefix, read) are the tokens of
// the previous emission, so decoders that treat the start of a sequence specially (Strip) and
// tokens whose text depends on their neighbour stay right, and each push costs O(window), not
// O(length). Text ending in U+FFFD is held (an incomplete byte-fallback character). For valid UTF-8
// the emitted text equals tok.decode(all ids) up to the stop string; invalid bytes still come out
// as U+FFFD, though their count may differ from a whole-sequence decode.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace zaya {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop);

  struct Delta {
    std::string text;      // new text to emit (may be empty)
    bool stopped = false;  // a stop string matched; nothing more will be emitted
  };
  Delta push(int32_t id);
  // End of generation (length/EOS): whatever is held back, minus an incomplete UTF-8 tail.
  std::string flush();
  const std::string& emitted() const { return emitted_; }  // all text emitted so far

 private:
  const Tokenizer& tok_;
  std::vector<std::string> stop_;
  // Appends `text` to the held text, looks for stop strings, and returns what is safe to emit.
  Delta release(const std::string& text, bool final);

  std::vector<int32_t> ids_;
  size_t prefix_ = 0, read_ = 0;  // the decode window: ids_[prefix_, read_) was emitted last
  std::string held_;              // decoded, complete text not yet emitted (a stop-string prefix)
  std::string emitted_;
  bool stopped_ = false;
};

}  // namespace zaya
