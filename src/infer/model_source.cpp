// Opening a --model argument (model_source.h): a model directory through model_path.h, a GGUF file
// through infer/gguf_model.h, and the extras, tokenizer and template of either.
#include "infer/model_source.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/model_path.h"
#include "core/assert.h"
#include "data/tokenizer.h"
#include "data/tokenizer_gguf.h"
#include "infer/gguf_model.h"
#include "infer/model_files.h"
#include "io/gguf.h"
#include "io/json_parse.h"

namespace zaya {

namespace {

namespace fs = std::filesystem;

// The string value of `key`, or null when absent; another type is an error naming it.
const std::string* gguf_string(const GgufFile& f, const char* key) {
  const GgufValue* v = f.find(key);
  if (!v) return nullptr;
  if (v->type != GgufType::String)
    fail("{}: {} must be a string, got {}", f.path(), key, gguf_type_name(v->type));
  return &v->s;
}

// A token id key (tokenizer.ggml.bos_token_id, ...), or -1 when absent.
int64_t gguf_token_id(const GgufFile& f, const char* key) {
  if (!f.find(key)) return -1;
  const int64_t id = f.get_int(key);
  if (id < 0 || id > INT32_MAX)
    fail("{}: {} {} is not a token id (0 to {})", f.path(), key, id, INT32_MAX);
  return id;
}

// The text of token `id` in tokenizer.ggml.tokens ("" when there is none).
std::string gguf_token_text(const GgufFile& f, int64_t id) {
  const GgufValue* t = f.find("tokenizer.ggml.tokens");
  if (id < 0 || !t || t->type != GgufType::Array || t->elem != GgufType::String ||
      size_t(id) >= t->items.size())
    return "";
  return t->items[size_t(id)].s;
}

// tokenizer_config.json's chat_template in an embedded text: a string, or the "default" of a list
// of {name, template} ("" when there is none).
std::string config_chat_template(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: not valid JSON ({})", origin, e.what());
  }
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) return "";
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const nlohmann::json& x : t)
      if (x.is_object() && x.value("name", "") == "default" && x.contains("template") &&
          x["template"].is_string())
        return x["template"].get<std::string>();
  fail("{}: chat_template must be a string or a list of {{name, template}} with a \"default\"",
       origin);
}

}  // namespace

ModelExtras gguf_model_extras(const GgufFile& f) {
  ModelExtras x;
  const std::string& p = f.path();
  if (f.find("zaya.config_json")) {
    x.vocab_size_origin = p + " zaya.config_json vocab_size";
    x.max_positions_origin = p + " zaya.config_json max_position_embeddings";
  } else {  // built from the keys and shapes (infer/gguf_model.h)
    x.vocab_size_origin = p + " token_embd.weight ne[1]";
    x.max_positions_origin =
        p + (f.find("zaya.context_length") ? " zaya.context_length"
                                           : " (no zaya.context_length: ZAYA1's default)");
  }
  const std::string* tc = gguf_string(f, "zaya.tokenizer_config_json");
  if (tc) {
    read_tokenizer_config_text(*tc, p + " (zaya.tokenizer_config_json)", x);
  } else if (f.find("zaya.context_length")) {
    x.tokenizer_config = p + " (zaya.context_length)";
    const int64_t n = f.get_int("zaya.context_length");
    if (n < 1) fail("{}: zaya.context_length {} must be at least 1", p, n);
    x.model_max_length = n >= kNoModelMaxLength ? 0 : n;
  }
  if (const std::string* gc = gguf_string(f, "zaya.generation_config_json")) {
    read_generation_config_text(*gc, p + " (zaya.generation_config_json)", x);
  } else {
    const int64_t bos = gguf_token_id(f, "tokenizer.ggml.bos_token_id");
    const int64_t eos = gguf_token_id(f, "tokenizer.ggml.eos_token_id");
    if (bos >= 0 || eos >= 0) x.generation_config = p + " (tokenizer.ggml.*)";
    x.bos_token_id = bos;
    if (eos >= 0) x.eos_token_ids = {eos};
    // A chat model's end of turn, when the file names it apart from its EOS.
    if (const int64_t eot = gguf_token_id(f, "tokenizer.ggml.eot_token_id"); eot >= 0 && eot != eos)
      x.eos_token_ids.push_back(eot);
  }
  // The special tokens' text the chat template is given, when no tokenizer config said it.
  if (x.bos_token.empty())
    x.bos_token = gguf_token_text(f, gguf_token_id(f, "tokenizer.ggml.bos_token_id"));
  if (x.eos_token.empty())
    x.eos_token = gguf_token_text(f, gguf_token_id(f, "tokenizer.ggml.eos_token_id"));
  if (const std::string* t = gguf_string(f, "tokenizer.chat_template"); t && !t->empty()) {
    x.chat_template = *t;
    x.chat_template_origin = p + " (tokenizer.chat_template)";
  } else if (tc) {
    const std::string origin = p + " (zaya.tokenizer_config_json)";
    x.chat_template = config_chat_template(*tc, origin);
    x.chat_template_origin = origin + "'s chat_template";
  }
  return x;
}

ModelSource open_model_source(const std::string& arg, const std::string& flag) {
  const ModelPath mp = resolve_model_path(arg, flag);
  ModelSource s;
  s.note = mp.note;
  s.name = mp.name;
  if (!mp.gguf.empty()) {
    s.path = mp.gguf;
    s.gguf = std::make_shared<const GgufModel>(open_gguf_model(mp.gguf));
    s.config = s.gguf->config;
    s.config_origin =
        mp.gguf + (s.gguf->file->find("zaya.config_json") ? " (zaya.config_json)"
                                                          : " (its zaya.* keys and tensor shapes)");
    s.extras = gguf_model_extras(*s.gguf->file);
    return s;
  }
  s.path = mp.dir;
  s.config_origin = (fs::path(mp.dir) / "config.json").string();
  s.config = load_config(s.config_origin);
  s.extras = read_model_extras(mp.dir);
  return s;
}

std::string ModelSource::line() const {
  return note.empty() ? "" : fmt::format("model {} ({})", path, note);
}

SourceTokenizer ModelSource::load_tokenizer(const std::string& flag) const {
  SourceTokenizer r;
  if (!flag.empty() || !is_gguf()) {
    r.origin = find_tokenizer(path, flag);
    if (!r.origin.empty()) r.tok = std::make_unique<Tokenizer>(Tokenizer::load(r.origin));
    return r;
  }
  GgufTokenizer g = gguf_tokenizer(*gguf->file);
  r.origin = g.origin;
  r.why_not = g.why_not;
  if (g.tok) r.tok = std::make_unique<Tokenizer>(std::move(*g.tok));
  return r;
}

SourceTokenizer ModelSource::require_tokenizer(const std::string& flag,
                                               const std::string& alternative) const {
  SourceTokenizer r = load_tokenizer(flag);
  if (r.tok) return r;
  if (!is_gguf()) fail_no_tokenizer(path, alternative);
  fail(
      "{}: this GGUF has no tokenizer zaya can read ({}); pass --tokenizer FILE (the "
      "tokenizer.json the model was trained with){}",
      path, r.why_not, alternative.empty() ? "" : ", or " + alternative);
}

chat::ChatTemplate ModelSource::chat_template(const std::string& flag_path,
                                              const Tokenizer* tok) const {
  return chat::ChatTemplate::load(is_gguf() ? "" : path, flag_path, extras, tok);
}

InferModel ModelSource::load_weights(bool to_bf16) const {
  return is_gguf() ? InferModel::load_gguf(gguf, to_bf16) : InferModel::load_dir(path, to_bf16);
}

}  // namespace zaya
