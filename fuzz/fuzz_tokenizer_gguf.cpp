// Fuzz target: a GGUF file's tokenizer (data/tokenizer_gguf.h) — zaya.tokenizer_json, or the GGML
// vocabulary arrays rebuilt into a tokenizer.json — then a round of encode/decode with it. An
// embedded tokenizer.json is also written back as the GGML arrays (what zaya quantize does): when
// the arrays can say it, the tokenizer they rebuild must encode and decode as it does.
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer_gguf.h"
#include "fuzz_util.h"
#include "io/gguf.h"
#include "io/json_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zaya::fuzz::expect_clean([&] {
    const zaya::GgufFile file = zaya::GgufFile::from_bytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
    const zaya::GgufTokenizer g = zaya::gguf_tokenizer(file);
    if (!g.tok) return;
    const std::string text = "Hello,  world! ünïcödé \n\t 123 <bos>";
    std::vector<int32_t> ids;
    g.tok->encode(text, ids);
    const std::string decoded = g.tok->decode(ids);
    const zaya::GgufValue* embedded = file.find("zaya.tokenizer_json");
    if (!embedded) return;
    const nlohmann::json j = zaya::parse_json(embedded->s);
    (void)zaya::post_processor_adds(j, true);
    std::string why_not;
    std::optional<zaya::GgufVocab> v =
        zaya::vocab_from_tokenizer_json(j, g.tok->vocab_size(), &why_not);
    if (!v) return;
    const zaya::Tokenizer back =
        zaya::Tokenizer::from_json(zaya::tokenizer_json_from_vocab(*v, "back"), "back");
    if (back.encode(text) != ids || back.decode(ids) != decoded) std::abort();
    (void)zaya::ggml_tokenizer_keys(std::move(*v), {});
  });
  return 0;
}
