// Fuzz target: a GGUF file's tokenizer (data/tokenizer_gguf.h) — zaya.tokenizer_json, or the GGML
// vocabulary arrays rebuilt into a tokenizer.json — then a round of encode/decode with it.
#include <string>
#include <vector>

#include "data/tokenizer_gguf.h"
#include "fuzz_util.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zaya::fuzz::expect_clean([&] {
    const zaya::GgufFile file = zaya::GgufFile::from_bytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
    const zaya::GgufTokenizer g = zaya::gguf_tokenizer(file);
    if (!g.tok) return;
    std::vector<int32_t> ids;
    g.tok->encode("Hello,  world! ünïcödé \n\t 123 <bos>", ids);
    (void)g.tok->decode(ids);
  });
  return 0;
}
