// Incremental detokenisation with stop strings. Generated ids are pushed one at a time; each push
// returns the text that is now safe to show: complete UTF-8 only (a byte-fallback character split
// over several tokens is held back until whole), and never a tail that could still grow into a stop
// string. When a stop string appears, the text before it is returned, `stopped` is set and the
// stop string itself is never emitted.
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
  std::vector<int32_t> ids_;
  std::string emitted_;
  bool stopped_ = false;
};

}  // namespace zaya
