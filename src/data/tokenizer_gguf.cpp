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

// The pipeline of the rebuilt tokenizer.json (and the one a tokenizer.json must have for its
// vocabulary to be written as the GGML arrays): Gemma 3's.
json gemma_normalizer() {
  return {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", std::string(kSpace)}};
}
json gemma_pre_tokenizer() {
  return {{"type", "Split"},
          {"pattern", {{"String", " "}}},
          {"behavior", "MergedWithPrevious"},
          {"invert", false}};
}
json gemma_decoder() {
  const std::string space(kSpace);
  return {{"type", "Sequence"},
          {"decoders",
           json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}}})}};
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
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", std::move(added)},
          {"normalizer", gemma_normalizer()},
          {"pre_tokenizer", gemma_pre_tokenizer()},
          {"post_processor", nullptr},
          {"decoder", gemma_decoder()},
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

namespace {

// Member `k` of object `o`, or null when absent.
const json* member(const json& o, const char* k) {
  auto it = o.find(k);
  return it == o.end() ? nullptr : &*it;
}

// A member that must be absent, null or `want` for the rebuilt model to behave the same.
bool is(const json& m, const char* k, const json& want) {
  const json* v = member(m, k);
  return v ? *v == want : want.is_null() || want == false;
}

// Whether TemplateProcessing `p` (or one inside a Sequence of processors) puts a special token
// first (`first`) or last in a single sequence.
bool adds_special(const json& p, bool first) {
  if (!p.is_object()) return false;
  const json* type = member(p, "type");
  if (!type || !type->is_string()) return false;
  if (*type == "Sequence") {
    const json* ps = member(p, "processors");
    if (!ps || !ps->is_array()) return false;
    for (const json& q : *ps)
      if (adds_special(q, first)) return true;
    return false;
  }
  if (*type != "TemplateProcessing") return false;
  const json* single = member(p, "single");
  if (!single || !single->is_array() || single->empty()) return false;
  const json& piece = first ? single->front() : single->back();
  return piece.is_object() && piece.contains("SpecialToken");
}

}  // namespace

std::optional<GgufVocab> vocab_from_tokenizer_json(const json& tok, int64_t vocab_size,
                                                   std::string* why_not) {
  auto no = [&](std::string reason) -> std::optional<GgufVocab> {
    if (why_not) *why_not = std::move(reason);
    return std::nullopt;
  };
  if (!tok.is_object()) return no("it is not a JSON object");
  const json* mp = member(tok, "model");
  if (!mp || !mp->is_object()) return no("it has no \"model\" object");
  const json& m = *mp;
  // The model and pipeline tokenizer_json_from_vocab rebuilds: anything else would tokenize
  // differently once rebuilt.
  if (!is(m, "type", "BPE")) return no("its model is not BPE");
  if (!is(m, "byte_fallback", true)) return no("its model has no byte_fallback");
  if (!is(m, "fuse_unk", true)) return no("its model does not fuse_unk");
  for (const char* k : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (!is(m, k, nullptr)) return no(fmt::format("its model sets {}", k));
  if (!is(m, "ignore_merges", false)) return no("its model sets ignore_merges");
  if (!is(tok, "normalizer", gemma_normalizer()))
    return no("its normalizer is not Replace \" \" with \"\xe2\x96\x81\"");
  if (!is(tok, "pre_tokenizer", gemma_pre_tokenizer()))
    return no("its pre_tokenizer is not Split on \" \"");
  if (!is(tok, "decoder", gemma_decoder()))
    return no("its decoder is not Replace \"\xe2\x96\x81\" with \" \", ByteFallback, Fuse");
  const json* vocab = member(m, "vocab");
  const json* merges = member(m, "merges");
  if (!vocab || !vocab->is_object() || vocab->empty()) return no("it has no model.vocab");
  if (!merges || !merges->is_array() || merges->empty()) return no("it has no model.merges");
  const json* added = member(tok, "added_tokens");
  if (added && !added->is_null() && !added->is_array()) return no("added_tokens is not a list");
  const size_t n_added = added && added->is_array() ? added->size() : 0;

  // Ids: the largest, bounded so that no allocation is sized by a hostile id.
  auto id_of = [](const json& v) -> int64_t {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < INT32_MAX
               ? v.get<int64_t>()
               : -1;
  };
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const int64_t id = id_of(it.value());
    if (id < 0) return no(fmt::format("model.vocab gives {} no token id", json(it.key()).dump()));
    max_id = std::max(max_id, id);
  }
  for (size_t i = 0; i < n_added; ++i) {
    const json& a = (*added)[i];
    const json* id = a.is_object() ? member(a, "id") : nullptr;
    if (!id || id_of(*id) < 0) return no(fmt::format("added_tokens[{}] has no token id", i));
    max_id = std::max(max_id, id_of(*id));
  }
  const int64_t entries = int64_t(vocab->size() + n_added);
  const int64_t base = std::max<int64_t>(vocab_size, 0);
  if (max_id + 1 > base + entries)
    return no(fmt::format("its ids reach {} with {} tokens", max_id, entries));
  const size_t n = size_t(std::max(base, max_id + 1));

  GgufVocab v;
  v.model = "gemma4";
  v.tokens.assign(n, std::string());
  v.types.assign(n, 0);  // 0: free so far
  bool gemma_style = false;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const std::string& text = it.key();
    const size_t id = size_t(id_of(it.value()));
    if (text.empty()) return no("model.vocab holds an empty token");
    if (v.types[id] != 0)
      return no(fmt::format("model.vocab gives id {} to {} and {}", id, json(v.tokens[id]).dump(),
                            json(text).dump()));
    const bool byte = is_byte_token(text);
    gemma_style = gemma_style || byte || text.find(kSpace) != std::string::npos;
    v.tokens[id] = text;
    v.types[id] = int32_t(byte ? GgufTokenType::Byte : GgufTokenType::Normal);
  }
  if (!gemma_style) return no("its tokens have neither \"\xe2\x96\x81\" nor <0xNN> byte tokens");

  std::unordered_set<std::string> added_texts;
  std::vector<char> is_added(n, 0);
  for (size_t i = 0; i < n_added; ++i) {
    const json& a = (*added)[i];
    const json* content = member(a, "content");
    if (!content || !content->is_string() || content->get_ref<const std::string&>().empty())
      return no(fmt::format("added_tokens[{}] has no content", i));
    const std::string& text = content->get_ref<const std::string&>();
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"})
      if (!is(a, flag, false))
        return no(fmt::format("added token {} sets {}", json(text).dump(), flag));
    const json* sp = member(a, "special");
    if (sp && !sp->is_boolean())
      return no(fmt::format("added token {}: special is not a bool", json(text).dump()));
    const bool special = sp && sp->get<bool>();
    // The arrays spell a user-defined token's "▁" as a space: a space of its own would come back
    // as "▁".
    if (!special && text.find(' ') != std::string::npos)
      return no(fmt::format("added token {} holds a space", json(text).dump()));
    const size_t id = size_t(id_of(a["id"]));
    if (v.types[id] != 0 && v.tokens[id] != text)
      return no(fmt::format("added token {} has id {}, which model.vocab gives to {}",
                            json(text).dump(), id, json(v.tokens[id]).dump()));
    if (is_added[id] || !added_texts.insert(text).second)
      return no(fmt::format("added token {} is listed twice", json(text).dump()));
    if (auto in_vocab = vocab->find(text);
        in_vocab != vocab->end() && size_t(id_of(*in_vocab)) != id)
      return no(fmt::format("added token {} has id {} but model.vocab {}", json(text).dump(), id,
                            id_of(*in_vocab)));
    is_added[id] = 1;
    v.tokens[id] = special ? text : replace_all(text, kSpace, " ");
    v.types[id] = int32_t(special ? GgufTokenType::Control : GgufTokenType::UserDefined);
  }

  // The unknown token: the reader takes the first UNKNOWN token, else "<unk>" when there is one.
  const json* unk = member(m, "unk_token");
  if (unk && !unk->is_null() && !unk->is_string()) return no("model.unk_token is not a string");
  const std::string unk_text = unk && unk->is_string() ? unk->get<std::string>() : "";
  const bool has_unk_token = vocab->contains("<unk>") || added_texts.count("<unk>") > 0;
  if (!unk_text.empty()) {
    bool marked = false;
    for (size_t id = 0; id < n && !marked; ++id)
      if (is_added[id] && v.types[id] == int32_t(GgufTokenType::Control) &&
          v.tokens[id] == unk_text) {
        v.types[id] = int32_t(GgufTokenType::Unknown);
        marked = true;
      }
    if (!marked && !(unk_text == "<unk>" && has_unk_token))
      return no(
          fmt::format("model.unk_token {} is not a special added token", json(unk_text).dump()));
  } else if (has_unk_token) {
    return no("model.unk_token is not set but \"<unk>\" is a token");
  }

  for (size_t id = 0; id < n; ++id)
    if (v.types[id] == 0) {
      v.tokens[id] = "[PAD" + std::to_string(id) + "]";
      v.types[id] = int32_t(GgufTokenType::Unused);
    }

  v.merges.reserve(merges->size());
  for (size_t r = 0; r < merges->size(); ++r) {
    const json& e = (*merges)[r];
    std::string a, b;
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else if (e.is_string()) {  // the older "a b" form: split where Tokenizer splits it
      const std::string& t = e.get_ref<const std::string&>();
      const size_t sp = t.find(' ');
      if (sp == std::string::npos) return no(fmt::format("model.merges[{}] has no space", r));
      a = t.substr(0, sp), b = t.substr(sp + 1);
    } else {
      return no(fmt::format("model.merges[{}] is neither [\"a\", \"b\"] nor \"a b\"", r));
    }
    // The reader splits "a b" at its first space after the first byte.
    if (a.empty() || b.empty() || a.find(' ', 1) != std::string::npos)
      return no(fmt::format("model.merges[{}] {} cannot be written as \"a b\"", r, e.dump()));
    v.merges.push_back(std::move(a) + " " + b);
  }
  return v;
}

bool post_processor_adds(const json& tok, bool first) {
  const json* post = tok.is_object() ? member(tok, "post_processor") : nullptr;
  return post && adds_special(*post, first);
}

std::vector<std::pair<std::string, GgufValue>> ggml_tokenizer_keys(GgufVocab&& v,
                                                                   const GgmlSpecialIds& s) {
  const size_t n = v.tokens.size();
  std::vector<GgufValue> tokens, scores, types, merges;
  tokens.reserve(n);
  scores.reserve(n);
  types.reserve(n);
  merges.reserve(v.merges.size());
  int64_t unk = -1;
  for (size_t id = 0; id < n; ++id) {
    tokens.push_back(GgufValue::str(std::move(v.tokens[id])));
    scores.push_back(GgufValue::f32(0));
    const int32_t type = id < v.types.size() ? v.types[id] : int32_t(GgufTokenType::Normal);
    types.push_back(GgufValue::i32(type));
    if (unk < 0 && type == int32_t(GgufTokenType::Unknown)) unk = int64_t(id);
  }
  v.tokens = {};
  for (std::string& m : v.merges) merges.push_back(GgufValue::str(std::move(m)));
  v.merges = {};
  std::vector<std::pair<std::string, GgufValue>> out;
  out.emplace_back("tokenizer.ggml.model", GgufValue::str(v.model));
  out.emplace_back("tokenizer.ggml.tokens", GgufValue::array(GgufType::String, std::move(tokens)));
  out.emplace_back("tokenizer.ggml.scores", GgufValue::array(GgufType::F32, std::move(scores)));
  out.emplace_back("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
  out.emplace_back("tokenizer.ggml.merges", GgufValue::array(GgufType::String, std::move(merges)));
  out.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(false));
  for (const auto& [key, id] :
       {std::pair<const char*, int64_t>{"tokenizer.ggml.bos_token_id", s.bos},
        {"tokenizer.ggml.eos_token_id", s.eos},
        {"tokenizer.ggml.eot_token_id", s.eot},
        {"tokenizer.ggml.padding_token_id", s.pad},
        {"tokenizer.ggml.unknown_token_id", unk}})
    if (id >= 0 && size_t(id) < n) out.emplace_back(key, GgufValue::u32(uint32_t(id)));
  out.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(s.add_bos));
  out.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(s.add_eos));
  return out;
}

}  // namespace zaya
