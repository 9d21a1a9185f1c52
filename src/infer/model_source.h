// The one place a command opens its `--model ARG`: a model directory, a checkpoint, a run or a file
// in a model directory (checkpoint/model_path.h), or a GGUF file, which is a whole model in one
// file (docs/quantization.md, "Running a GGUF"). Every command that reads a model (generate, chat,
// serve, eval, inspect, bench decode, template) takes what it needs from here, so all of them
// accept the same arguments, find the same tokenizer and template and say the same things.
//
// Contract — what a source gives, for a directory / for a GGUF file F:
//   - config: DIR/config.json / GgufModel::config (zaya.config_json, else the zaya.* keys and the
//     tensors' shapes).
//   - extras (io/model_extras.h): DIR/tokenizer_config.json and generation_config.json / the
//     texts F embeds as zaya.tokenizer_config_json and zaya.generation_config_json; without them
//     the GGML keys: tokenizer.ggml.bos_token_id and eos_token_id (the ids, and the tokens' text
//     from tokenizer.ggml.tokens), zaya.context_length (model_max_length). A GGUF's chat template
//     is tokenizer.chat_template, else the embedded tokenizer config's chat_template. Messages
//     name F and the key ("F.gguf (zaya.generation_config_json): …").
//   - tokenizer: --tokenizer FILE always; else DIR/tokenizer.json / F's (data/tokenizer_gguf.h:
//     zaya.tokenizer_json exactly, else rebuilt from tokenizer.ggml.*). None is not an error until
//     a command needs one: require_tokenizer then fails naming the directory or the file (and for
//     a GGUF, what it lacks), and says to pass --tokenizer.
//   - chat template: chat::ChatTemplate::load with the directory, or with F's embedded template.
//   - weights: InferModel::load_dir / InferModel::load_gguf on the GGUF already opened.
// A GGUF file is opened (mapped and validated, open_gguf_model) once, by open_model_source; its
// tensors are read only by load_weights.
#pragma once
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "infer/infer_model.h"
#include "io/model_extras.h"
#include "io/zaya_config.h"

namespace zaya {

class GgufFile;
class Tokenizer;
struct GgufModel;

struct SourceTokenizer {
  std::unique_ptr<Tokenizer> tok;  // null: none
  std::string origin;              // the file, or "F.gguf (zaya.tokenizer_json)"
  std::string why_not;             // when null and a GGUF was asked: what it lacks
};

struct ModelSource {
  std::string path;  // the model directory, or the GGUF file
  std::string note;  // how `path` was found from the argument ("" when it was `path`)
  std::string name;  // the model's short name (model_path.h)
  std::shared_ptr<const GgufModel> gguf;  // the opened GGUF file; null for a directory
  ZayaConfig config;
  std::string config_origin;  // "DIR/config.json" or "F.gguf (zaya.config_json)", for messages
  ModelExtras extras;

  bool is_gguf() const { return gguf != nullptr; }
  // "model DIR (NOTE)" for stderr, or "" when there is nothing to say (model_path_line).
  std::string line() const;

  // --tokenizer `flag` when not empty, else the model's own (see the contract).
  SourceTokenizer load_tokenizer(const std::string& flag) const;
  // load_tokenizer, failing when there is none: the message names the model and says to pass
  // --tokenizer (or `alternative`, e.g. "use --prompt-ids with --ids").
  SourceTokenizer require_tokenizer(const std::string& flag,
                                    const std::string& alternative = "") const;
  // The chat format (chat_template.h), --chat-template `flag_path` first.
  chat::ChatTemplate chat_template(const std::string& flag_path, const Tokenizer* tok) const;
  // The weights (infer_model.h); to_bf16 rounds F32 matrices to BF16.
  InferModel load_weights(bool to_bf16 = false) const;
};

// What GGUF file `f` says besides its weights (the extras of the contract above), with the keys
// the config's vocab_size and max_position_embeddings came from for messages (zaya.config_json,
// else token_embd.weight and zaya.context_length).
ModelExtras gguf_model_extras(const GgufFile& f);

// Opens `arg` as above; `flag` names it in messages. Throws zaya::Error naming the argument (a
// path that is no model: model_path.h's messages), the GGUF file and what is wrong with it, or
// the file and key of a malformed config or extra.
ModelSource open_model_source(const std::string& arg, const std::string& flag = "--model");

}  // namespace zaya
