// What a model directory holds beside config.json and the weights, in the files transformers
// writes and `zaya train` saves (docs/cli.md, "What a model directory holds"):
//   tokenizer_config.json   model_max_length (the context the model was trained with), the
//                           special tokens' text (bos_token, eos_token: a string, or transformers'
//                           {"content": "..."} object)
//   generation_config.json  bos_token_id, eos_token_id (an id or a list of ids: generation stops
//                           at any of them); the sampling defaults do_sample, temperature, top_p,
//                           top_k, min_p, repetition_penalty (transformers' GenerationConfig)
// Both files and every field are optional; other fields are ignored. A file that is there must be
// valid: malformed JSON or a field of the wrong type is a zaya::Error naming the file and the key
// (a model that silently lost its context or its EOS would generate past both).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zaya {

// transformers writes model_max_length = int(1e30) for "no limit"; a value this large or more is
// read as not given.
inline constexpr int64_t kNoModelMaxLength = int64_t(1) << 40;

struct ModelExtras {
  // tokenizer_config.json ("" when absent), and its fields.
  std::string tokenizer_config;
  int64_t model_max_length = 0;      // 0: not given (or transformers' "no limit")
  std::string bos_token, eos_token;  // the special tokens' text; "" when not given
  // generation_config.json ("" when absent), and its fields.
  std::string generation_config;
  int64_t bos_token_id = -1;           // -1: not given
  std::vector<int64_t> eos_token_ids;  // empty: not given
  // Sampling defaults (unset: not given). do_sample false means greedy decoding.
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  // How messages name the config fields these limit (infer/model_files.h): config.json's for a
  // model directory; for a GGUF file, the file and the key each came from ("F.gguf
  // zaya.context_length").
  std::string vocab_size_origin = "config.json vocab_size";
  std::string max_positions_origin = "config.json max_position_embeddings";
  // A chat template the model carries inside (a GGUF's tokenizer.chat_template; "" for a model
  // directory, whose template is a file: chat/chat_template.h finds it) and where it came from.
  std::string chat_template, chat_template_origin;
};

// Reads DIR/tokenizer_config.json and DIR/generation_config.json, each when present.
ModelExtras read_model_extras(const std::string& dir);

// One file each (it must exist), filling that file's fields of `x` (and its path).
void read_tokenizer_config(const std::string& path, ModelExtras& x);
void read_generation_config(const std::string& path, ModelExtras& x);
// The same from the file's text (a GGUF file carries both as metadata strings); `origin` names
// the text in messages and becomes x.tokenizer_config / x.generation_config.
void read_tokenizer_config_text(const std::string& text, const std::string& origin, ModelExtras& x);
void read_generation_config_text(const std::string& text, const std::string& origin,
                                 ModelExtras& x);

}  // namespace zaya
