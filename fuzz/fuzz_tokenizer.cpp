// Fuzz target: a tokenizer.json (Hugging Face BPE), then a round of encode/decode with it.
#include <vector>

#include "data/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::input_file(data, size, "tokenizer.json");
  zaya::fuzz::expect_clean([&] {
    const zaya::Tokenizer tok = zaya::Tokenizer::load(path);
    std::vector<int32_t> ids;
    tok.encode("Hello, world! ünïcödé \n\t 123", ids);
    (void)tok.decode(ids);
  });
  return 0;
}
