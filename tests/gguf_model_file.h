// A model directory written as one GGUF file, for the tests of running a GGUF
// (docs/quantization.md, "Running a GGUF"): the directory's weights under their scheme-B names
// (gguf_name), the metadata of set_model_keys (zaya.config_json: the exact config) and, as the
// options say,
//   - the tokenizer: the exact tokenizer.json as zaya.tokenizer_json (what zaya writes), or only
//     the GGML vocabulary arrays the community converters write (tokenizer.ggml.model "gemma4",
//     tokens, token_type, merges; user-defined tokens with their "▁" written as spaces; the ids
//     past the tokenizer filled with "[PADn]" UNUSED tokens up to the model's vocabulary), or none;
//   - the extras: tokenizer_config.json and generation_config.json as zaya.*_json texts, or only
//     the GGML keys tokenizer.ggml.bos_token_id / eos_token_id; tokenizer.chat_template from
//     chat_template.jinja either way.
// Matrices, experts and the embedding in `matrix` (F32 or BF16, rounded as InferModel's --bf16
// rounds); with BF16 the conv weights too (the loader widens them to F32); vectors F32.
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "infer/gguf_model.h"
#include "io/gguf.h"
#include "model/model.h"
#include "model/param_layout.h"

namespace zaya::test {

enum class GgufTokenizerKind { Embedded, GgmlArrays, None };

struct GgufFileOptions {
  DType matrix = DType::F32;
  GgufTokenizerKind tokenizer = GgufTokenizerKind::Embedded;
  bool embedded_extras = true;  // zaya.tokenizer_config_json + zaya.generation_config_json
};

inline std::string read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The GGML vocabulary arrays of tokenizer.json `tok`, as the converters write them, padded to
// `vocab_size` ids.
inline void set_ggml_vocab(GgufWriter& w, const nlohmann::json& tok, int64_t vocab_size) {
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id → text, type
  for (const auto& [text, id] : tok["model"]["vocab"].items()) {
    const bool byte = text.size() == 6 && text.rfind("<0x", 0) == 0;
    by_id[id.get<int64_t>()] = {text, byte ? 6 : 1};
  }
  for (const nlohmann::json& a : tok["added_tokens"]) {
    std::string text = a["content"].get<std::string>();
    int32_t type = 3;  // control
    if (!a.value("special", false)) {
      type = 4;  // user-defined: the converters write its "▁" as a space
      for (size_t at = text.find("\xe2\x96\x81"); at != std::string::npos;
           at = text.find("\xe2\x96\x81", at + 1))
        text.replace(at, 3, " ");
    }
    by_id[a["id"].get<int64_t>()] = {text, type};
  }
  if (by_id.count(3)) by_id[3].second = 2;  // <unk>: unknown
  std::vector<GgufValue> tokens, types, merges;
  for (int64_t id = 0; id < vocab_size; ++id) {
    auto it = by_id.find(id);
    const bool have = it != by_id.end();
    tokens.push_back(GgufValue::str(have ? it->second.first : "[PAD" + std::to_string(id) + "]"));
    types.push_back(GgufValue::i32(have ? it->second.second : 5));
  }
  for (const nlohmann::json& m : tok["model"]["merges"])
    merges.push_back(GgufValue::str(m[0].get<std::string>() + " " + m[1].get<std::string>()));
  w.set("tokenizer.ggml.model", GgufValue::str("gemma4"));
  w.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::String, std::move(tokens)));
  w.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
  w.set("tokenizer.ggml.merges", GgufValue::array(GgufType::String, std::move(merges)));
}

// Writes model directory `dir` as the GGUF file `out` (see the top of this file).
inline void write_model_gguf(const std::string& dir, const std::string& out,
                             const GgufFileOptions& o = {}) {
  namespace fs = std::filesystem;
  const Model m = Model::load_dir(dir);
  const ZayaConfig& c = m.config();
  GgufWriter w(out);
  set_model_keys(w, c);
  const std::string tok_path = dir + "/tokenizer.json";
  if (o.tokenizer == GgufTokenizerKind::Embedded)
    w.set("zaya.tokenizer_json", GgufValue::str(read_whole(tok_path)));
  if (o.tokenizer == GgufTokenizerKind::GgmlArrays)
    set_ggml_vocab(w, nlohmann::json::parse(read_whole(tok_path)), c.vocab_size);
  if (o.embedded_extras) {
    w.set("zaya.tokenizer_config_json", GgufValue::str(read_whole(dir + "/tokenizer_config.json")));
    w.set("zaya.generation_config_json",
          GgufValue::str(read_whole(dir + "/generation_config.json")));
  } else {
    const nlohmann::json g = nlohmann::json::parse(read_whole(dir + "/generation_config.json"));
    w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(g["bos_token_id"].get<uint32_t>()));
    const nlohmann::json& eos = g["eos_token_id"];
    w.set("tokenizer.ggml.eos_token_id",
          GgufValue::u32((eos.is_array() ? eos[0] : eos).get<uint32_t>()));
  }
  if (fs::exists(dir + "/chat_template.jinja"))
    w.set("tokenizer.chat_template", GgufValue::str(read_whole(dir + "/chat_template.jinja")));

  // Tensors: one per GGUF name, the experts of a sub-layer stacked in expert order.
  struct Out {
    GgufName name;
    DType dtype;
    std::vector<const ParamSpec*> parts;  // by expert (one part when not stacked)
  };
  std::vector<Out> outs;
  std::map<std::string, size_t> where;
  for (const ParamSpec& s : m.layout().specs) {
    const GgufName g = gguf_name(c, s);
    const bool matrix = s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert ||
                        s.kind == ParamKind::Embedding || s.kind == ParamKind::Conv;
    auto [it, fresh] = where.emplace(g.name, outs.size());
    if (fresh) outs.push_back({g, matrix ? o.matrix : DType::F32, {}});
    Out& e = outs[it->second];
    const size_t slot = g.expert < 0 ? 0 : size_t(g.expert);
    if (e.parts.size() <= slot) e.parts.resize(slot + 1, nullptr);
    e.parts[slot] = &s;
  }
  for (const Out& e : outs) w.add_tensor(e.name.name, e.dtype, e.name.ne);
  for (const Out& e : outs)
    for (const ParamSpec* s : e.parts) {
      const float* x = m.params() + s->offset;
      if (e.dtype == DType::F32) {
        w.write_tensor(e.name.name, x, size_t(s->numel()) * sizeof(float));
      } else {
        std::vector<uint16_t> b(size_t(s->numel()));
        for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(x[i]);
        w.write_tensor(e.name.name, b.data(), b.size() * sizeof(uint16_t));
      }
    }
  w.finish();
}

}  // namespace zaya::test
