// Fuzz target: an OpenAI request body, through both endpoints' parsers, for three served models
// with the toy tokenizer: no chat template (the parser's own transcript), the built-in ChatML
// template (tools, tool_choice, chat_template_kwargs, response_format compiled to grammars) and the
// plain transcript as a chat::ChatTemplate. Every rejection must be an ApiError with a 4xx status;
// an accepted request must be within the engine's bounds (n 1..8, top_logprobs -1..20, token ids
// of logit_bias and stop_token_ids inside the vocabulary), its constraint (if any) must run a few
// masked steps without throwing, each choice's chat output must split a sample answer (reasoning,
// a tool call, content), and its answer — every choice, logprobs of those ids in both shapes —
// must format and serialize.
#include <cstdlib>

#include <limits>
#include <memory>

#include "chat/chat_template.h"
#include "data/tokenizer.h"
#include "fuzz_util.h"
#include "grammar/token_mask.h"
#include "serve/chat_output.h"
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
  // A constraint runs: a few steps of masking flat logits and taking the first id left.
  if (r.gen.make_processor) {
    std::unique_ptr<LogitsProcessor> p = r.gen.make_processor();
    std::vector<float> logits(size_t(m.vocab_size));
    for (int step = 0; p && step < 4; ++step) {
      std::fill(logits.begin(), logits.end(), 0.f);
      p->apply(logits);
      size_t id = 0;
      while (id < logits.size() && logits[id] == -std::numeric_limits<float>::infinity()) ++id;
      if (id == logits.size()) break;
      p->accept(int32_t(id));
    }
  }
  std::vector<openai::ChoiceResult> choices(size_t(r.gen.n));
  int64_t offset = 0;
  for (int i = 0; i < r.gen.n; ++i) {
    choices[size_t(i)].index = i;
    if (r.endpoint == openai::Endpoint::Chat) {
      // A sample answer, in two pieces: reasoning, a call of the request's first tool, content.
      std::string name = "f";
      if (r.chat.tools.is_array() && !r.chat.tools.empty() && r.chat.tools[0].is_object())
        name = r.chat.tools[0]["function"].value("name", "f");
      openai::ChatOutput out(r.chat, i);
      (void)openai::ChatOutput::delta_json(
          out.push("<think>why</think>\n\nok\n<zyphra_tool_call>\n"));
      (void)openai::ChatOutput::delta_json(out.push("<function=" + name +
                                                    ">\n<parameter=a>\n1\n</parameter>\n"
                                                    "</function>\n</zyphra_tool_call>"));
      (void)openai::ChatOutput::delta_json(out.finish());
      choices[size_t(i)].text = out.content();
      choices[size_t(i)].reasoning = out.reasoning();
      if (out.has_tool_calls()) choices[size_t(i)].tool_calls = out.tool_calls_json();
    }
    choices[size_t(i)].logprobs = r.endpoint == openai::Endpoint::Chat
                                      ? openai::chat_logprobs(m.tok, lp)
                                      : openai::completion_logprobs(m.tok, lp, offset);
  }
  const nlohmann::json out = r.endpoint == openai::Endpoint::Chat
                                 ? openai::chat_response("chatcmpl-f", 0, m.id, choices, {1, 1})
                                 : openai::completion_response("cmpl-f", 0, m.id, choices, {1, 1});
  (void)openai::sse_event(out);
}

// The served models: [0] no template, [1] built-in ChatML with structured output, [2] the plain
// transcript as a template.
const std::vector<zaya::openai::ServedModel>& models() {
  using namespace zaya;
  static const chat::ChatTemplate chatml = chat::ChatTemplate::from_source(
      chat::builtin_chatml_source(), "built-in ChatML", chat::ChatFormat::BuiltinChatML);
  static const chat::ChatTemplate transcript = [] {
    chat::ChatTemplate t;
    t.format = chat::ChatFormat::Transcript;
    t.origin = "transcript";
    return t;
  }();
  static const std::vector<openai::ServedModel> ms = [] {
    std::vector<openai::ServedModel> v(3, openai::ServedModel{"tiny", 64, 1024, &toy()});
    v[1].chat_template = &chatml;
    v[1].max_context = 4096;  // room for tool declarations
    v[1].chat_kwargs = {{"enable_thinking", false}};
    v[1].eos_ids = {1};
    auto index = std::make_shared<const grammar::VocabIndex>(toy());
    v[1].vocab_index = [index] { return index; };
    v[2].chat_template = &transcript;
    return v;
  }();
  return ms;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (size_t k = 0; k < models().size(); ++k) {
    const zaya::openai::ServedModel& m = models()[k];
    for (bool chat : {false, true}) {
      if (!chat && k > 0) continue;  // completions do not read the template
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
  }
  return 0;
}
