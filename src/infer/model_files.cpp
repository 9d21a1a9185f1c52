// The tokenizer, context and special ids of a model directory (model_files.h).
#include "infer/model_files.h"

#include <algorithm>
#include <filesystem>

#include "core/assert.h"
#include "data/tokenizer.h"

namespace zaya {

namespace fs = std::filesystem;

std::string find_tokenizer(const std::string& dir, const std::string& flag) {
  if (!flag.empty()) return flag;
  const fs::path p = fs::path(dir) / "tokenizer.json";
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? p.string() : "";
}

void fail_no_tokenizer(const std::string& dir, const std::string& alternative) {
  fail(
      "{}: no tokenizer.json in the model directory; pass --tokenizer FILE (the tokenizer.json "
      "the model was trained with){}",
      dir, alternative.empty() ? "" : ", or " + alternative);
}

std::string tokenizer_fit_warning(const Tokenizer& tok, const std::string& tok_path,
                                  const ZayaConfig& c, const std::string& vocab_origin) {
  if (tok.vocab_size() <= c.vocab_size) return "";
  return fmt::format(
      "{} has {} token ids but the model's vocabulary is {} ({}): a prompt holding ids from {} up "
      "is refused; is it the tokenizer the model was trained with?",
      tok_path, tok.vocab_size(), c.vocab_size, vocab_origin, c.vocab_size);
}

ContextLimit choose_context(const ZayaConfig& c, const ModelExtras& x, int64_t requested) {
  ContextLimit L;
  L.max_positions = c.max_position_embeddings;
  L.trained = L.max_positions;
  std::string trained_from = x.max_positions_origin;
  if (x.model_max_length > 0) {
    trained_from = x.tokenizer_config + "'s model_max_length";
    if (x.model_max_length <= L.max_positions) {
      L.trained = x.model_max_length;
    } else {
      L.warnings.push_back(fmt::format("{}: model_max_length {} exceeds {} {}: the context is {}",
                                       x.tokenizer_config, x.model_max_length,
                                       x.max_positions_origin, L.max_positions, L.max_positions));
    }
  }
  if (requested <= 0) {
    L.tokens = L.trained;
    L.source = x.model_max_length > 0 ? "the trained context, " + trained_from : trained_from;
    return L;
  }
  if (requested > L.max_positions)
    fail(
        "--max-context {} exceeds the model's max_position_embeddings of {} ({}): it has no "
        "positions beyond; the trained context is {}",
        requested, L.max_positions, x.max_positions_origin, L.trained);
  L.tokens = requested;
  L.source = "--max-context";
  if (requested > L.trained)
    L.warnings.push_back(fmt::format(
        "--max-context {} is beyond the {} tokens the model was trained on ({}): it never saw "
        "positions past {}, so expect worse text there",
        requested, L.trained, trained_from, L.trained));
  return L;
}

namespace {

int32_t checked_id(const ZayaConfig& c, const ModelExtras& x, int64_t id, const std::string& file,
                   const char* key) {
  if (id < 0 || id >= c.vocab_size)
    fail("{}: {} {} is outside the model's vocabulary of {} ({})", file, key, id, c.vocab_size,
         x.vocab_size_origin);
  return int32_t(id);
}

}  // namespace

std::vector<int32_t> eos_ids(const ZayaConfig& c, const ModelExtras& x, const Tokenizer* tok) {
  std::vector<int32_t> ids;
  if (x.eos_token_ids.empty()) ids.push_back(int32_t(c.eos_token_id));
  for (int64_t id : x.eos_token_ids)
    ids.push_back(checked_id(c, x, id, x.generation_config, "eos_token_id"));
  if (tok) {
    // The tokenizer's end-of-text tokens where the model has them: a chat model converted with
    // eos 1 still stops at its turn end.
    for (const std::string& text : {x.eos_token, std::string("<eos>"), std::string("<|im_end|>")}) {
      const int32_t id = text.empty() ? -1 : tok->token_id(text);
      if (id >= 0 && id < c.vocab_size && std::find(ids.begin(), ids.end(), id) == ids.end())
        ids.push_back(id);
    }
  }
  return ids;
}

int32_t bos_id(const ZayaConfig& c, const ModelExtras& x, const Tokenizer* tok) {
  if (x.bos_token_id >= 0)
    return checked_id(c, x, x.bos_token_id, x.generation_config, "bos_token_id");
  if (!tok) return -1;
  if (!x.bos_token.empty()) {
    const int32_t id = tok->token_id(x.bos_token);
    if (id < 0)
      fail("{}: bos_token '{}' is not in the tokenizer's vocabulary", x.tokenizer_config,
           x.bos_token);
    return checked_id(c, x, id, x.tokenizer_config, "bos_token");
  }
  return tok->bos_id();
}

SamplingParams default_sampling(const ModelExtras& x) {
  SamplingParams p;
  if (x.temperature) p.temperature = *x.temperature;
  if (x.top_p) p.top_p = *x.top_p;
  if (x.top_k) p.top_k = *x.top_k;
  if (x.min_p) p.min_p = *x.min_p;
  if (x.repetition_penalty) p.repetition_penalty = *x.repetition_penalty;
  if (x.do_sample == false) p.temperature = 0;  // transformers: do_sample false is greedy
  return p;
}

}  // namespace zaya
