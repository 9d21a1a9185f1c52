// Structured output: a LogitsProcessor (infer/engine.h) that keeps a choice inside a grammar
// (grammar/: JSON of a schema, any JSON object, the ZAYA tool-call format) by masking, at every
// step, the tokens whose bytes the grammar cannot take next (grammar::mask_logits); EOS only once
// the output is complete.
// With reasoning open (the prompt ends inside <think>), the mask starts only once "</think>" has
// been generated, as vLLM does with a reasoning parser: reasoning is free text, and whitespace
// between "</think>" and the structured answer is let through (the separator the model was trained
// to write). A model that never closes its reasoning is never constrained. Without reasoning the
// mask holds from the first token, with no leading whitespace (the grammar has none): a model
// free to emit whitespace first could spin in it.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "infer/engine.h"

namespace zaya::openai {

class GrammarProcessor final : public LogitsProcessor {
 public:
  // end_when_complete: once the text is a complete sentence of the grammar, only EOS may follow
  // (one tool call for a named tool_choice or parallel_tool_calls false, although the tool-call
  // grammar allows more).
  GrammarProcessor(const grammar::Grammar& g, std::shared_ptr<const grammar::VocabIndex> vocab,
                   std::vector<int32_t> eos_ids, bool after_reasoning,
                   bool end_when_complete = false);
  void apply(std::span<float> logits) override;
  void accept(int32_t id) override;

 private:
  void take(std::string_view bytes);
  grammar::Matcher matcher_;
  std::shared_ptr<const grammar::VocabIndex> vocab_;
  std::vector<int32_t> eos_;
  bool waiting_;  // reasoning open: no mask until "</think>"
  bool end_when_complete_;
  bool leading_ws_;   // after reasoning, before the answer's first byte: whitespace free
  std::string tail_;  // waiting: the last bytes seen (to find "</think>" across tokens)
  std::vector<float> saved_;
};

}  // namespace zaya::openai
