// Fuzz target: an OpenAI request body, through both endpoints' parsers (a model with the toy
// tokenizer). Every rejection must be an ApiError with a 4xx status; an accepted request must be
// within the engine's bounds (n 1..8, top_logprobs -1..20, token ids of logit_bias and
// stop_token_ids inside the vocabulary), and its answer — every choice, logprobs of those ids in
// both shapes — must format and serialize.
#include <cstdlib>

#include "data/tokenizer.h"
#include "fuzz_util.h"
#include "serve/openai_response.h"

namespace {
const zaya::Tokenizer& toy() {
  static const zaya::Tokenizer tok = zaya::Tokenizer::load(ZAYA_FUZZ_TOY_TOKENIZER);
  return tok;
}

void check_accepted(const zaya::openai::ParsedRequest& r, const zaya::openai::ServedModel& m) {
  using namespace zaya;
  const SamplingParams& s = r.gen.sampling;
  if (r.gen.n < 1 || r.gen.n > openai::kMaxChoices) std::abort();
  if (s.top_logprobs < -1 || s.top_logprobs > openai::kMaxTopLogprobs) std::abort();
  if (s.check()) std::abort();
  std::vector<TokenLogprob> lp;
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= m.vocab_size) std::abort();
    lp.push_back({id, -bias, {{id, -bias}}});
  }
  for (int32_t id : s.stop_ids) {
    if (id < 0 || id >= m.vocab_size) std::abort();
    lp.push_back({id, -1.f, {}});
  }
  std::vector<openai::ChoiceResult> choices(size_t(r.gen.n));
  int64_t offset = 0;
  for (int i = 0; i < r.gen.n; ++i) {
    choices[size_t(i)].index = i;
    choices[size_t(i)].logprobs = r.endpoint == openai::Endpoint::Chat
                                      ? openai::chat_logprobs(m.tok, lp)
                                      : openai::completion_logprobs(m.tok, lp, offset);
  }
  const nlohmann::json out = r.endpoint == openai::Endpoint::Chat
                                 ? openai::chat_response("chatcmpl-f", 0, m.id, choices, {1, 1})
                                 : openai::completion_response("cmpl-f", 0, m.id, choices, {1, 1});
  (void)openai::sse_event(out);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const zaya::openai::ServedModel m{"tiny", 64, 1024, &toy()};
  for (bool chat : {false, true}) {
    try {
      check_accepted(chat ? zaya::openai::parse_chat_request(body, m)
                          : zaya::openai::parse_completion_request(body, m),
                     m);
    } catch (const zaya::openai::ApiError& e) {
      if (e.status < 400 || e.status >= 500) std::abort();
      // As the server sends it (a message may quote invalid UTF-8 from the body: replaced).
      (void)zaya::openai::error_body(e).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace);
    }
  }
  return 0;
}
