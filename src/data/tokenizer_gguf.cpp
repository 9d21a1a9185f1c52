// A GGUF file's tokenizer as a tokenizer.json (tokenizer_gguf.h).
#include "data/tokenizer_gguf.h"

#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/assert.h"
#include "io/gguf.h"
#include "io/json_parse.h"

namespace zaya {

namespace {

using json = nlohmann::json;

constexpr std::string_view kSpace = "\xe2\x96\x81";  // "▁", U+2581: SentencePiece's space

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// "[PAD123]": the filler the converters give ids past the tokenizer's vocabulary.
bool is_pad_filler(const std::string& t) {
  if (t.size() < 6 || t.compare(0, 4, "[PAD") != 0 || t.back() != ']') return false;
  for (size_t i = 4; i + 1 < t.size(); ++i)
    if (t[i] < '0' || t[i] > '9') return false;
  return true;
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// The string items of array `key` of `f` (an absent key: empty).
std::vector<std::string> strings(const GgufFile& f, const std::string& key) {
  std::vector<std::string> out;
  const GgufValue* v = f.find(key);
  if (!v) return out;
  if (v->type != GgufType::Array || v->elem != GgufType::String)
    fail("{}: {} must be an array of strings, got {}", f.path(), key,
         v->type == GgufType::Array ? "an array of " + std::string(gguf_type_name(v->elem))
                                    : std::string(gguf_type_name(v->type)));
  out.reserve(v->items.size());
  for (const GgufValue& s : v->items) out.push_back(s.s);
  return out;
}

}  // namespace

GgufVocab read_gguf_vocab(const GgufFile& f) {
  GgufVocab v;
  if (const GgufValue* m = f.find("tokenizer.ggml.model")) {
    if (m->type != GgufType::String)
      fail("{}: tokenizer.ggml.model must be a string, got {}", f.path(), gguf_type_name(m->type));
    v.model = m->s;
  }
  v.tokens = strings(f, "tokenizer.ggml.tokens");
  v.merges = strings(f, "tokenizer.ggml.merges");
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    const bool integers =
        t->type == GgufType::Array && (t->elem == GgufType::I32 || t->elem == GgufType::U32 ||
                                       t->elem == GgufType::I8 || t->elem == GgufType::U8);
    if (!integers)
      fail("{}: tokenizer.ggml.token_type must be an array of integers, got {}", f.path(),
           gguf_type_name(t->type == GgufType::Array ? t->elem : t->type));
    if (t->items.size() != v.tokens.size())
      fail("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens {}", f.path(),
           t->items.size(), v.tokens.size());
    v.types.reserve(t->items.size());
    const bool is_signed = t->elem == GgufType::I32 || t->elem == GgufType::I8;
    for (const GgufValue& x : t->items)
      v.types.push_back(is_signed ? int32_t(x.i) : int32_t(std::min<uint64_t>(x.u, 1000)));
  }
  return v;
}

json tokenizer_json_from_vocab(const GgufVocab& v, const std::string& origin) {
  if (v.tokens.empty()) fail("{}: no tokenizer.ggml.tokens", origin);
  if (!v.types.empty() && v.types.size() != v.tokens.size())
    fail("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens {}", origin,
         v.types.size(), v.tokens.size());
  if (v.tokens.size() >= size_t(INT32_MAX))
    fail("{}: tokenizer.ggml.tokens has {} entries, more than a token id holds", origin,
         v.tokens.size());
  json vocab = json::object();
  json added = json::array();
  std::string unk;
  std::unordered_set<std::string> seen;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const auto type = v.types.empty() ? GgufTokenType::Normal : GgufTokenType(v.types[id]);
    std::string text = v.tokens[id];
    if (type == GgufTokenType::Unused && is_pad_filler(text)) continue;
    // The converters write a user-defined token's "▁" as a space (Gemma 3's added whitespace
    // runs "▁▁", ...); the vocabulary the merges build has "▁".
    if (type == GgufTokenType::UserDefined) text = replace_all(text, " ", kSpace);
    if (text.empty()) continue;  // an empty token can never be produced: an unused id
    if (!seen.insert(text).second)
      fail("{}: tokenizer.ggml.tokens holds {} twice (again at id {})", origin, json(text).dump(),
           id);
    vocab[text] = int64_t(id);
    if (type == GgufTokenType::Unknown && unk.empty()) unk = text;
    const bool special = type == GgufTokenType::Control || type == GgufTokenType::Unknown ||
                         type == GgufTokenType::Unused;
    if (special || type == GgufTokenType::UserDefined)
      added.push_back({{"id", int64_t(id)},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", special}});
  }
  json merges = json::array();
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos || sp + 1 >= m.size())
      fail("{}: tokenizer.ggml.merges[{}] {} is not two tokens separated by a space", origin, r,
           json(m).dump());
    merges.push_back(json::array({m.substr(0, sp), m.substr(sp + 1)}));
  }
  if (unk.empty() && vocab.contains("<unk>")) unk = "<unk>";
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", unk.empty() ? json() : json(unk)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  const std::string space(kSpace);
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", std::move(added)},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}}},
          {"pre_tokenizer",
           {{"type", "Split"},
            {"pattern", {{"String", " "}}},
            {"behavior", "MergedWithPrevious"},
            {"invert", false}}},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                          {{"type", "ByteFallback"}},
                          {{"type", "Fuse"}}})}}},
          {"model", std::move(model)}};
}

GgufTokenizer gguf_tokenizer(const GgufFile& f) {
  GgufTokenizer r;
  if (const GgufValue* t = f.find("zaya.tokenizer_json")) {
    r.origin = f.path() + " (zaya.tokenizer_json)";
    if (t->type != GgufType::String)
      fail("{}: must be a string (the tokenizer.json text), got {}", r.origin,
           gguf_type_name(t->type));
    json j;
    try {
      j = parse_json(t->s);
    } catch (const JsonError& e) {
      fail("{}: not valid JSON ({})", r.origin, e.what());
    }
    r.tok = Tokenizer::from_json(j, r.origin);
    return r;
  }
  const GgufVocab v = read_gguf_vocab(f);
  r.origin = f.path() + " (tokenizer.ggml.*)";
  const std::string model = v.model.empty() ? "(none)" : "'" + v.model + "'";
  if (v.tokens.empty()) {
    r.why_not = "it has neither zaya.tokenizer_json nor tokenizer.ggml.tokens";
    return r;
  }
  if (v.merges.empty()) {
    r.why_not = fmt::format(
        "tokenizer.ggml.model {} has no tokenizer.ggml.merges (zaya rebuilds BPE vocabularies "
        "only, not SentencePiece scores)",
        model);
    return r;
  }
  // Gemma-style tokens: "▁" for a space, or <0xNN> byte tokens. Byte-level (GPT-2) ones spell a
  // space "Ġ" and have neither.
  bool gemma_style = false;
  for (const std::string& t : v.tokens)
    if (is_byte_token(t) || t.find(kSpace) != std::string::npos) {
      gemma_style = true;
      break;
    }
  if (!gemma_style) {
    r.why_not = fmt::format(
        "tokenizer.ggml.tokens of tokenizer.ggml.model {} are byte-level (GPT-2 style), which "
        "zaya's tokenizer does not read",
        model);
    return r;
  }
  r.tok = Tokenizer::from_json(tokenizer_json_from_vocab(v, r.origin), r.origin);
  return r;
}

}  // namespace zaya
