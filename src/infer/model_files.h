// What `zaya generate` and `zaya serve` take from a model directory besides the weights, decided
// the same way for both (docs/cli.md, docs/serving.md):
//   - the tokenizer: --tokenizer, else DIR/tokenizer.json;
//   - the context: the trained one (tokenizer_config.json's model_max_length, capped by
//     config.json's max_position_embeddings; that alone when there is no model_max_length) unless
//     --max-context asks for another, which may go past the trained context (with a warning: the
//     model never saw those positions) but never past max_position_embeddings;
//   - the special ids: generation stops at generation_config.json's eos_token_id (one or a list),
//     else config.json's; a text prompt starts with generation_config.json's bos_token_id, else
//     tokenizer_config.json's bos_token, else the tokenizer's "<bos>";
//   - the sampling defaults: generation_config.json's temperature, top_p, top_k, min_p and
//     repetition_penalty (do_sample false: greedy), which a flag or a request overrides.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "infer/sampler.h"
#include "io/model_extras.h"
#include "io/zaya_config.h"

namespace zaya {

class Tokenizer;

// --tokenizer `flag` when given, else DIR/tokenizer.json when it exists (`dir`: the model
// directory), else "".
std::string find_tokenizer(const std::string& dir, const std::string& flag);
// The message for a model directory without a tokenizer when one is needed: names the directory
// and says to pass --tokenizer (and `alternative`, when not empty, e.g. "use --prompt-ids").
[[noreturn]] void fail_no_tokenizer(const std::string& dir, const std::string& alternative = "");

// "" when every id of tokenizer `tok` (read from `tok_path`) is in the model's vocabulary, else a
// warning naming both sizes: text that encodes to the others cannot be generated from (a model
// bigger than its tokenizer is fine: Gemma 3's tokenizer fills 262,145 of ZAYA1's 262,272 ids).
// `vocab_origin` names where the vocabulary size came from (ModelExtras::vocab_size_origin).
std::string tokenizer_fit_warning(const Tokenizer& tok, const std::string& tok_path,
                                  const ZayaConfig& c,
                                  const std::string& vocab_origin = "config.json vocab_size");

struct ContextLimit {
  int64_t tokens = 0;         // prompt + generated tokens per sequence
  int64_t trained = 0;        // the trained context (see the top of this file)
  int64_t max_positions = 0;  // config.json's max_position_embeddings
  std::string source;         // where `tokens` came from, for messages and logs
  std::vector<std::string> warnings;
};

// The context for a --max-context of `requested` (0: not given). Throws zaya::Error when
// `requested` exceeds max_position_embeddings (naming both, and where that came from:
// x.max_positions_origin, config.json's or a GGUF file's key).
ContextLimit choose_context(const ZayaConfig& c, const ModelExtras& x, int64_t requested);

// The ids generation stops at: generation_config.json's eos_token_id (one or a list), else
// config.json's; plus, given the tokenizer, the ids of tokenizer_config.json's eos_token, "<eos>"
// and "<|im_end|>" where the vocabulary has them. Throws zaya::Error naming generation_config.json
// for an id outside the model's vocabulary.
std::vector<int32_t> eos_ids(const ZayaConfig& c, const ModelExtras& x,
                             const Tokenizer* tok = nullptr);
// The id a text prompt starts with (-1: none). `tok` may be null (then only the generation
// config's id counts). Throws zaya::Error naming the file for an id outside the vocabulary.
int32_t bos_id(const ZayaConfig& c, const ModelExtras& x, const Tokenizer* tok);

// SamplingParams' defaults with generation_config.json's sampling fields in place (see the top of
// this file): what a command or request starts from before its own flags or fields.
SamplingParams default_sampling(const ModelExtras& x);

}  // namespace zaya
