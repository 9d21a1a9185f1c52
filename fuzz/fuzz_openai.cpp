// Fuzz target: an OpenAI request body, through both endpoints' parsers (a model with the toy
// tokenizer). Every rejection must be an ApiError with a 4xx status.
#include <cstdlib>

#include "data/tokenizer.h"
#include "fuzz_util.h"
#include "serve/openai_response.h"

namespace {
const zaya::Tokenizer& toy() {
  static const zaya::Tokenizer tok = zaya::Tokenizer::load(ZAYA_FUZZ_TOY_TOKENIZER);
  return tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const zaya::openai::ServedModel m{"tiny", 64, 1024, &toy()};
  for (bool chat : {false, true}) {
    try {
      chat ? zaya::openai::parse_chat_request(body, m)
           : zaya::openai::parse_completion_request(body, m);
    } catch (const zaya::openai::ApiError& e) {
      if (e.status < 400 || e.status >= 500) std::abort();
      // As the server sends it (a message may quote invalid UTF-8 from the body: replaced).
      (void)zaya::openai::error_body(e).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace);
    }
  }
  return 0;
}
