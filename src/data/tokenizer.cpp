// The tokenizer.json reader, encoder and decoder (tokenizer.h): parsing and validating the
// vocabulary, merges, added tokens, normalizer and decoder; encode as the HF pipeline does it
// (added tokens, normalize, pre-tokenize, BPE with byte fallback); decode back to UTF-8.
#include "data/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya {

using json = nlohmann::json;

namespace {

// ---- UTF-8 ----

// Length of the valid UTF-8 sequence starting at s[i] (1–4), or 0 when s[i] does not start one.
size_t utf8_len(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  const size_t left = s.size() - i;
  if (c < 0x80) return *cp = c, 1;
  const auto cont = [&](size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF && cont(1)) return *cp = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu), 2;
  if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
    const uint32_t v = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0;  // overlong or a surrogate
    return *cp = v, 3;
  }
  if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    const uint32_t v =
        ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    if (v < 0x10000 || v > 0x10FFFF) return 0;
    return *cp = v, 4;
  }
  return 0;
}

bool valid_utf8(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Unicode White_Space (as JavaScript's trim sees it), for lstrip/rstrip of added tokens.
bool is_js_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000 || c == 0xFEFF;
}
std::string_view trim_start(std::string_view s) {
  uint32_t cp;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_len(s, i, &cp);
    if (n == 0 || !is_js_space(cp)) break;
    i += n;
  }
  return s.substr(i);
}
std::string_view trim_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    uint32_t cp;
    if (utf8_len(s, start, &cp) != end - start || !is_js_space(cp)) break;
    end = start;
  }
  return s.substr(0, end);
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  size_t i = 0;
  for (size_t j; (j = s.find(from, i)) != std::string::npos; i = j + from.size())
    out.append(s, i, j - i).append(to);
  out.append(s, i, std::string::npos);
  s.swap(out);
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Open-addressing map (left id, right id) → (rank, merged id): the hot lookup of BPE.
class MergeTable {
 public:
  struct Value {
    int32_t rank = -1, id = -1;
  };
  void build(const std::vector<std::pair<int32_t, int32_t>>& pairs,
             const std::vector<int32_t>& merged) {
    size_t cap = 16;
    while (cap < pairs.size() * 2) cap *= 2;
    keys_.assign(cap, kEmpty);
    values_.assign(cap, Value{});
    mask_ = cap - 1;
    for (size_t r = 0; r < pairs.size(); ++r) {
      const uint64_t k = key(pairs[r].first, pairs[r].second);
      size_t h = slot(k);
      while (keys_[h] != kEmpty && keys_[h] != k) h = (h + 1) & mask_;
      if (keys_[h] == k) continue;  // a repeated merge keeps its first (lowest) rank
      keys_[h] = k;
      values_[h] = {int32_t(r), merged[r]};
    }
  }
  Value find(int32_t a, int32_t b) const {
    if (keys_.empty()) return {};
    const uint64_t k = key(a, b);
    for (size_t h = slot(k);; h = (h + 1) & mask_) {
      if (keys_[h] == k) return values_[h];
      if (keys_[h] == kEmpty) return {};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  size_t slot(uint64_t k) const { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t mask_ = 0;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
enum class DecodeKind { Replace, ByteFallback, Fuse, Strip };

struct DecodeStep {
  DecodeKind kind;
  std::string from, to;  // Replace; Strip: `from` is the stripped content
  int start = 0, stop = 0;
};

struct AddedToken {
  std::string content;
  int32_t id;
  bool special, lstrip, rstrip, single_word, normalized;
};

}  // namespace

struct Tokenizer::Impl {
  std::string origin;  // file name for messages
  // model
  std::vector<std::string> vocab;  // id → token text ("" for an id nobody uses)
  std::vector<uint8_t> used;       // 0: no token, 1: a model token, 2: only an added token
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;
  std::vector<std::pair<int32_t, int32_t>> merges;  // rank order, as token ids
  MergeTable merge_table;
  std::unordered_map<uint32_t, int32_t> char_ids;  // code point → id of the one-char token
  int32_t byte_ids[256];                           // <0xNN> → id, -1 if absent
  int32_t unk_id = -1;
  std::string unk_token;
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  // pipeline
  std::vector<std::pair<std::string, std::string>> normalizer;  // Replace rules, in order
  bool split = false;
  std::string split_pattern;
  SplitBehavior split_behavior = SplitBehavior::Removed;
  std::vector<DecodeStep> decoder;
  json normalizer_json, pre_tokenizer_json, post_processor_json, decoder_json;  // for save
  json extra;  // version, truncation, padding, model.dropout … (passed through by save)
  // added tokens: a byte trie, leftmost-longest
  std::vector<AddedToken> added;
  std::vector<uint8_t> added_flag;             // per id
  bool first_byte[256] = {};                   // bytes that start an added token
  std::unordered_map<uint64_t, int32_t> trie;  // (node << 8 | byte) → child node
  std::vector<int32_t> trie_end;               // node → index into `added`, or -1

  void add_to_trie(const std::string& s, int32_t index) {
    if (trie_end.empty()) trie_end.push_back(-1);
    int32_t node = 0;
    for (unsigned char c : s) {
      const uint64_t k = (uint64_t(node) << 8) | c;
      auto it = trie.find(k);
      if (it == trie.end()) {
        it = trie.emplace(k, int32_t(trie_end.size())).first;
        trie_end.push_back(-1);
      }
      node = it->second;
    }
    trie_end[node] = index;
    first_byte[static_cast<unsigned char>(s[0])] = true;
  }
  // Longest added token starting at text[i]: index into `added`, or -1.
  int32_t match_added(std::string_view text, size_t i) const {
    int32_t node = 0, best = -1;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = trie.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[j]));
      if (it == trie.end()) break;
      node = it->second;
      if (trie_end[node] >= 0) best = trie_end[node];
    }
    return best;
  }

  int32_t find_id(std::string_view s) const {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  }

  // Splits text at added tokens (honouring lstrip/rstrip), hands each section's pieces to
  // `piece` and each added token's id to `added_id` (when set), in text order.
  void walk(std::string_view text, const std::function<void(std::string_view)>& piece,
            const std::function<void(int32_t)>& added_id) const;
  void for_each_piece(std::string_view text, const std::function<void(std::string_view)>& fn) const;
  void pieces_of_section(std::string_view section,
                         const std::function<void(std::string_view)>& fn) const;
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;
  void encode(std::string_view text, std::vector<int32_t>& out) const;
};

namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  fail("{}: {}", origin, what);
}

const json& field(const json& j, const char* key, const std::string& origin, const char* where) {
  auto it = j.find(key);
  if (it == j.end()) bad(origin, fmt::format("{} has no \"{}\"", where, key));
  return *it;
}

std::string string_pattern(const json& j, const std::string& origin, const char* where) {
  const json& p = field(j, "pattern", origin, where);
  if (!p.is_object() || !p.contains("String") || !p["String"].is_string())
    bad(origin,
        fmt::format("{}: only {{\"String\": …}} patterns are supported (got {})", where, p.dump()));
  return p["String"].get<std::string>();
}

void parse_normalizer(Tokenizer::Impl& t, const json& n) {
  if (n.is_null()) return;
  const std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const json& s : field(n, "normalizers", t.origin, "normalizer Sequence"))
      parse_normalizer(t, s);
  } else if (type == "Replace") {
    t.normalizer.emplace_back(
        string_pattern(n, t.origin, "normalizer Replace"),
        field(n, "content", t.origin, "normalizer Replace").get<std::string>());
  } else {
    bad(t.origin, fmt::format("normalizer type '{}' is not supported (zaya reads Replace and "
                              "Sequence of Replace, as in Gemma 3)",
                              type));
  }
}

void parse_pre_tokenizer(Tokenizer::Impl& t, const json& p) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type != "Split")
    bad(t.origin, fmt::format("pre_tokenizer type '{}' is not supported (zaya reads Split on a "
                              "string, as in Gemma 3)",
                              type));
  if (p.value("invert", false))
    bad(t.origin, "pre_tokenizer Split with invert=true is not supported");
  t.split = true;
  t.split_pattern = string_pattern(p, t.origin, "pre_tokenizer Split");
  if (t.split_pattern.empty()) bad(t.origin, "pre_tokenizer Split has an empty pattern");
  const std::string b = field(p, "behavior", t.origin, "pre_tokenizer Split").get<std::string>();
  if (b == "Removed")
    t.split_behavior = SplitBehavior::Removed;
  else if (b == "Isolated")
    t.split_behavior = SplitBehavior::Isolated;
  else if (b == "MergedWithPrevious")
    t.split_behavior = SplitBehavior::MergedWithPrevious;
  else if (b == "MergedWithNext")
    t.split_behavior = SplitBehavior::MergedWithNext;
  else if (b == "Contiguous")
    t.split_behavior = SplitBehavior::Contiguous;
  else
    bad(t.origin, fmt::format("pre_tokenizer Split behavior '{}' is unknown", b));
}

void parse_decoder(Tokenizer::Impl& t, const json& d) {
  if (d.is_null()) return;
  const std::string type = d.value("type", "");
  if (type == "Sequence") {
    for (const json& s : field(d, "decoders", t.origin, "decoder Sequence")) parse_decoder(t, s);
  } else if (type == "Replace") {
    t.decoder.push_back({DecodeKind::Replace, string_pattern(d, t.origin, "decoder Replace"),
                         field(d, "content", t.origin, "decoder Replace").get<std::string>()});
  } else if (type == "ByteFallback") {
    t.decoder.push_back({DecodeKind::ByteFallback, "", ""});
  } else if (type == "Fuse") {
    t.decoder.push_back({DecodeKind::Fuse, "", ""});
  } else if (type == "Strip") {
    t.decoder.push_back({DecodeKind::Strip,
                         field(d, "content", t.origin, "decoder Strip").get<std::string>(), "",
                         field(d, "start", t.origin, "decoder Strip").get<int>(),
                         field(d, "stop", t.origin, "decoder Strip").get<int>()});
  } else {
    bad(t.origin, fmt::format("decoder type '{}' is not supported (zaya reads Sequence, Replace, "
                              "ByteFallback, Fuse and Strip)",
                              type));
  }
}

void parse_model(Tokenizer::Impl& t, const json& m) {
  if (!m.is_object()) bad(t.origin, "\"model\" is not an object");
  const std::string type = m.value("type", "BPE");
  if (type != "BPE")
    bad(t.origin, fmt::format("model type '{}' is not supported (zaya reads BPE tokenizers such "
                              "as Gemma 3's)",
                              type));
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
      bad(t.origin, fmt::format("BPE option \"{}\" is not supported", k));
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
    bad(t.origin, "BPE dropout is not supported");
  t.byte_fallback = m.value("byte_fallback", false);
  t.fuse_unk = m.value("fuse_unk", false);
  t.ignore_merges = m.value("ignore_merges", false);
  if (m.contains("unk_token") && m["unk_token"].is_string())
    t.unk_token = m["unk_token"].get<std::string>();

  const json& vocab = field(m, "vocab", t.origin, "model");
  if (!vocab.is_object()) bad(t.origin, "model.vocab is not an object of token → id");
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() >= (int64_t(1) << 31) - 1)
      bad(t.origin, fmt::format("model.vocab: token {} has id {}, not an id ≥ 0",
                                json(it.key()).dump(), it.value().dump()));
    max_id = std::max(max_id, it.value().get<int64_t>());
  }
  t.vocab.assign(size_t(max_id + 1), std::string());
  t.used.assign(size_t(max_id + 1), 0);
  t.ids.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = it.value().get<int32_t>();
    if (t.used[id])
      bad(t.origin, fmt::format("model.vocab: id {} is given to both {} and {}", id,
                                json(t.vocab[id]).dump(), json(it.key()).dump()));
    t.vocab[id] = it.key();
    t.used[id] = 1;
    t.ids.emplace(it.key(), id);
  }

  const json& merges = field(m, "merges", t.origin, "model");
  if (!merges.is_array()) bad(t.origin, "model.merges is not an array");
  t.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& e = merges[r];
    std::string a, b;
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else if (e.is_string()) {  // the pre-0.20 "a b" form
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos)
        bad(t.origin, fmt::format("model.merges[{}] {} has no space", r, e.dump()));
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else {
      bad(t.origin, fmt::format("model.merges[{}] is neither [\"a\", \"b\"] nor \"a b\"", r));
    }
    const int32_t ia = t.find_id(a), ib = t.find_id(b);
    if (ia < 0 || ib < 0)
      bad(t.origin, fmt::format("model.merges[{}]: token {} is not in the vocabulary", r,
                                json(ia < 0 ? a : b).dump()));
    t.merges.emplace_back(ia, ib);
  }
}

void parse_added_tokens(Tokenizer::Impl& t, const json& list) {
  if (list.is_null()) return;
  if (!list.is_array()) bad(t.origin, "\"added_tokens\" is not an array");
  for (const json& a : list) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string())
      bad(t.origin,
          fmt::format("added token {} lacks an integer \"id\" or a string \"content\"", a.dump()));
    AddedToken tok{a["content"].get<std::string>(), a["id"].get<int32_t>(),
                   a.value("special", false),       a.value("lstrip", false),
                   a.value("rstrip", false),        a.value("single_word", false),
                   a.value("normalized", false)};
    if (tok.id < 0) bad(t.origin, fmt::format("added token {} has a negative id", a.dump()));
    if (tok.content.empty()) bad(t.origin, fmt::format("added token {} is empty", tok.id));
    if (size_t(tok.id) >= t.vocab.size()) {
      t.vocab.resize(size_t(tok.id) + 1);
      t.used.resize(size_t(tok.id) + 1, 0);
    }
    if (t.used[tok.id] && t.vocab[tok.id] != tok.content)
      bad(t.origin, fmt::format("added token {} has id {}, which the vocabulary gives to {}",
                                json(tok.content).dump(), tok.id, json(t.vocab[tok.id]).dump()));
    t.vocab[tok.id] = tok.content;
    if (!t.used[tok.id]) t.used[tok.id] = 2;
    t.ids[tok.content] = tok.id;  // as transformers.js: added tokens join the lookup table
    t.added.push_back(tok);
  }
}

}  // namespace

Tokenizer Tokenizer::from_json(const json& j, const std::string& origin) {
  auto t = std::make_shared<Impl>();
  t->origin = origin;
  if (!j.is_object()) bad(origin, "not a tokenizer.json (the top level is not a JSON object)");
  try {
    parse_model(*t, field(j, "model", origin, "tokenizer.json"));
    parse_added_tokens(*t, j.value("added_tokens", json()));
    t->normalizer_json = j.value("normalizer", json());
    t->pre_tokenizer_json = j.value("pre_tokenizer", json());
    t->post_processor_json = j.value("post_processor", json());
    t->decoder_json = j.value("decoder", json());
    parse_normalizer(*t, t->normalizer_json);
    parse_pre_tokenizer(*t, t->pre_tokenizer_json);
    parse_decoder(*t, t->decoder_json);
  } catch (const json::exception& e) {
    bad(origin, fmt::format("unexpected JSON structure: {}", e.what()));
  }
  t->extra = {{"version", j.value("version", json("1.0"))},
              {"truncation", j.value("truncation", json())},
              {"padding", j.value("padding", json())}};

  // Derived tables.
  std::vector<int32_t> merged(t->merges.size());
  for (size_t r = 0; r < t->merges.size(); ++r) {
    const auto [a, b] = t->merges[r];
    merged[r] = t->find_id(t->vocab[a] + t->vocab[b]);
    if (merged[r] < 0)
      bad(origin, fmt::format("model.merges[{}]: {} + {} is not in the vocabulary", r,
                              json(t->vocab[a]).dump(), json(t->vocab[b]).dump()));
  }
  t->merge_table.build(t->merges, merged);
  for (size_t id = 0; id < t->vocab.size(); ++id) {
    const std::string& s = t->vocab[id];
    uint32_t cp;
    if (t->used[id] && !s.empty() && utf8_len(s, 0, &cp) == s.size())
      t->char_ids.emplace(cp, int32_t(id));  // first id wins, as the id map does
  }
  for (int b = 0; b < 256; ++b) t->byte_ids[b] = t->find_id(fmt::format("<0x{:02X}>", b));
  t->unk_id = t->unk_token.empty() ? -1 : t->find_id(t->unk_token);
  t->added_flag.assign(t->vocab.size(), 0);
  for (size_t i = 0; i < t->added.size(); ++i) {
    t->added_flag[t->added[i].id] = 1;
    t->add_to_trie(t->added[i].content, int32_t(i));
  }
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::load(const std::string& path) {
  const std::string text = read_text_file(path, "tokenizer file");
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: not valid JSON ({}); expected a Hugging Face tokenizer.json", path, e.what());
  }
  return from_json(j, path);
}

// ---- encode ----

void Tokenizer::Impl::pieces_of_section(std::string_view section,
                                        const std::function<void(std::string_view)>& fn) const {
  if (section.empty()) return;
  std::string s(section);
  for (const auto& [from, to] : normalizer) replace_all(s, from, to);
  if (s.empty()) return;
  if (!split) return fn(s);
  // Split on a literal pattern (HF SplitDelimiterBehavior); empty pieces are dropped.
  const std::string& p = split_pattern;
  std::vector<std::pair<size_t, size_t>> parts;  // [begin, end) of each output piece
  size_t i = 0, pending = std::string::npos;     // pending: start of a MergedWithNext match
  size_t last_match_end = std::string::npos;
  for (size_t j; (j = s.find(p, i)) != std::string::npos; i = j + p.size()) {
    const size_t gap_begin = pending != std::string::npos ? pending : i;
    switch (split_behavior) {
      case SplitBehavior::Removed:
        parts.emplace_back(i, j);
        break;
      case SplitBehavior::Isolated:
        parts.emplace_back(i, j), parts.emplace_back(j, j + p.size());
        break;
      case SplitBehavior::MergedWithPrevious:
        parts.emplace_back(i, j + p.size());
        break;
      case SplitBehavior::MergedWithNext:
        parts.emplace_back(gap_begin, j);
        pending = j;
        break;
      case SplitBehavior::Contiguous:
        parts.emplace_back(i, j);
        if (last_match_end == j && !parts.empty()) {
          parts.pop_back();  // the empty gap
          parts.back().second = j + p.size();
        } else {
          parts.emplace_back(j, j + p.size());
        }
        break;
    }
    last_match_end = j + p.size();
  }
  parts.emplace_back(pending != std::string::npos ? pending : i, s.size());
  for (const auto& [b, e] : parts)
    if (e > b) fn(std::string_view(s).substr(b, e - b));
}

void Tokenizer::Impl::walk(std::string_view text,
                           const std::function<void(std::string_view)>& piece,
                           const std::function<void(int32_t)>& added_id) const {
  // Sections between added tokens; lstrip/rstrip trim whitespace next to the token.
  std::string_view pending;  // text before the current position, not yet emitted
  size_t start = 0;
  bool strip_next = false;
  for (size_t i = 0; i < text.size();) {
    const int32_t m = first_byte[static_cast<uint8_t>(text[i])] ? match_added(text, i) : -1;
    if (m < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = added[m];
    pending = text.substr(start, i - start);
    if (strip_next) pending = trim_start(pending);
    if (tok.lstrip) pending = trim_end(pending);
    pieces_of_section(pending, piece);
    if (added_id) added_id(tok.id);
    strip_next = tok.rstrip;
    i += tok.content.size();
    start = i;
  }
  pending = text.substr(start);
  if (strip_next) pending = trim_start(pending);
  pieces_of_section(pending, piece);
}

void Tokenizer::Impl::for_each_piece(std::string_view text,
                                     const std::function<void(std::string_view)>& fn) const {
  walk(text, fn, {});
}

void Tokenizer::Impl::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    uint32_t begin, len;  // bytes of the piece; len 0 = merged away
  };
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Candidate> heap;
  sym.clear();
  heap.clear();
  if (ignore_merges) {
    const int32_t id = find_id(piece);
    if (id >= 0) return out.push_back(id);
  }
  for (size_t i = 0; i < piece.size();) {
    uint32_t cp = 0;
    size_t n = utf8_len(piece, i, &cp);
    int32_t id = -1;
    if (n == 0) {
      n = 1;  // an invalid byte: a symbol of its own, never in the vocabulary
    } else {
      auto it = char_ids.find(cp);
      if (it != char_ids.end()) id = it->second;
    }
    const int32_t k = int32_t(sym.size());
    sym.push_back({id, k - 1, k + 1, uint32_t(i), uint32_t(n)});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  auto consider = [&](int32_t pos) {
    const int32_t nx = sym[pos].next;
    if (nx < 0 || sym[pos].id < 0 || sym[nx].id < 0) return;
    const MergeTable::Value v = merge_table.find(sym[pos].id, sym[nx].id);
    if (v.rank < 0) return;
    heap.push_back({v.rank, pos, v.id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < int32_t(sym.size()); ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = sym[c.pos];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // Stale when either side changed since: the concatenation only grows, so the merged id
    // identifies the pair.
    if (left.id < 0 || right.id < 0 || merge_table.find(left.id, right.id).id != c.id) continue;
    left.id = c.id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  bool last_unk = false;
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const Symbol& s = sym[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      last_unk = false;
      continue;
    }
    bool bytes_ok = byte_fallback;
    for (uint32_t b = 0; bytes_ok && b < s.len; ++b)
      bytes_ok = byte_ids[static_cast<uint8_t>(piece[s.begin + b])] >= 0;
    if (bytes_ok) {
      for (uint32_t b = 0; b < s.len; ++b)
        out.push_back(byte_ids[static_cast<uint8_t>(piece[s.begin + b])]);
      last_unk = false;
    } else {
      if (unk_id < 0)
        fail(
            "{}: the text holds a character outside the vocabulary and there is neither byte "
            "fallback nor an unk token",
            origin);
      if (!(fuse_unk && last_unk)) out.push_back(unk_id);
      last_unk = true;
    }
  }
}

void Tokenizer::Impl::encode(std::string_view text, std::vector<int32_t>& out) const {
  walk(
      text, [&](std::string_view piece) { bpe(piece, out); },
      [&](int32_t id) { out.push_back(id); });
}

void Tokenizer::for_each_piece(std::string_view text,
                               const std::function<void(std::string_view)>& piece) const {
  impl_->for_each_piece(text, piece);
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  impl_->encode(text, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  impl_->encode(text, out);
  return out;
}

// ---- decode ----

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const Impl& t = *impl_;
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || size_t(id) >= t.vocab.size() || !t.used[id])
      fail("token id {} (position {}) is not in the tokenizer's vocabulary of {}", id, i,
           t.vocab.size());
    toks.push_back(t.vocab[id]);
  }
  if (t.decoder.empty()) {  // HF joins with spaces when there is no decoder
    std::string s;
    for (size_t i = 0; i < toks.size(); ++i) s += (i ? " " : "") + toks[i];
    return s;
  }
  for (const DecodeStep& step : t.decoder) {
    switch (step.kind) {
      case DecodeKind::Replace:
        for (std::string& s : toks) replace_all(s, step.from, step.to);
        break;
      case DecodeKind::Fuse: {
        std::string all;
        for (const std::string& s : toks) all += s;
        toks.assign(1, std::move(all));
        break;
      }
      case DecodeKind::Strip:
        for (std::string& s : toks) {
          const std::string& c = step.from;
          if (c.empty()) continue;
          size_t b = 0, e = s.size();
          for (int k = 0; k < step.start && s.compare(b, c.size(), c) == 0 && b + c.size() <= e;
               ++k)
            b += c.size();
          for (int k = 0;
               k < step.stop && e >= b + c.size() && s.compare(e - c.size(), c.size(), c) == 0; ++k)
            e -= c.size();
          s = s.substr(b, e - b);
        }
        break;
      case DecodeKind::ByteFallback: {
        // A run of <0xNN> tokens becomes its bytes when they are valid UTF-8, else one U+FFFD
        // per byte (HF tokenizers' ByteFallback decoder).
        std::vector<std::string> next;
        std::string bytes;
        size_t run = 0;
        auto flush = [&] {
          if (run == 0) return;
          if (valid_utf8(bytes)) {
            next.push_back(bytes);
          } else {
            for (size_t k = 0; k < run; ++k) next.emplace_back("\xEF\xBF\xBD");
          }
          bytes.clear();
          run = 0;
        };
        for (std::string& s : toks) {
          unsigned v = 0;
          if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' &&
              std::sscanf(s.c_str() + 3, "%2x", &v) == 1 && std::isxdigit(uint8_t(s[3])) &&
              std::isxdigit(uint8_t(s[4]))) {
            bytes.push_back(char(v));
            ++run;
          } else {
            flush();
            next.push_back(std::move(s));
          }
        }
        flush();
        toks.swap(next);
        break;
      }
    }
  }
  std::string out;
  for (const std::string& s : toks) out += s;
  return out;
}

// ---- accessors ----

int64_t Tokenizer::vocab_size() const {
  return int64_t(impl_->vocab.size());
}
int32_t Tokenizer::bos_id() const {
  return impl_->find_id("<bos>");
}
int32_t Tokenizer::eos_id() const {
  return impl_->find_id("<eos>");
}
int32_t Tokenizer::pad_id() const {
  return impl_->find_id("<pad>");
}
std::string_view Tokenizer::token(int32_t id) const {
  ZAYA_ASSERT(id >= 0 && id < vocab_size(), "token id {} out of range [0, {})", id, vocab_size());
  return impl_->vocab[id];
}
int32_t Tokenizer::token_id(std::string_view tok) const {
  return impl_->find_id(tok);
}
bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->added_flag.size() && impl_->added_flag[id];
}

// ---- save ----

json Tokenizer::to_json() const {
  const Impl& t = *impl_;
  json added = json::array();
  for (const AddedToken& a : t.added)
    added.push_back({{"id", a.id},
                     {"content", a.content},
                     {"single_word", a.single_word},
                     {"lstrip", a.lstrip},
                     {"rstrip", a.rstrip},
                     {"normalized", a.normalized},
                     {"special", a.special}});
  // The model vocabulary: added tokens that were never model tokens stay out of it (Gemma 3's
  // <image_soft_token>).
  json vocab = json::object();
  for (size_t id = 0; id < t.vocab.size(); ++id)
    if (t.used[id] == 1) vocab[t.vocab[id]] = id;
  json merges = json::array();
  for (const auto& [a, b] : t.merges) merges.push_back({t.vocab[a], t.vocab[b]});
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", t.unk_token.empty() ? json() : json(t.unk_token)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", t.fuse_unk},
                {"byte_fallback", t.byte_fallback},
                {"ignore_merges", t.ignore_merges},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  json j = t.extra;
  j["added_tokens"] = std::move(added);
  j["normalizer"] = t.normalizer_json;
  j["pre_tokenizer"] = t.pre_tokenizer_json;
  j["post_processor"] = t.post_processor_json;
  j["decoder"] = t.decoder_json;
  j["model"] = std::move(model);
  return j;
}

void Tokenizer::save(const std::string& path) const {
  // The vocabulary is written in id order (as HF does; json objects sort their keys).
  const Impl& t = *impl_;
  json j = to_json();
  const std::string mark = "\u0001zaya-vocab\u0001";
  j["model"]["vocab"] = mark;
  std::string text = j.dump(2) + "\n";
  std::string vocab = "{";
  bool first = true;
  for (size_t id = 0; id < t.vocab.size(); ++id) {
    if (t.used[id] != 1) continue;
    vocab += first ? "\n      " : ",\n      ";
    vocab += json(t.vocab[id]).dump();
    vocab += ": " + std::to_string(id);
    first = false;
  }
  vocab += "\n    }";
  const std::string quoted_mark = json(mark).dump();
  const size_t at = text.find(quoted_mark);
  ZAYA_ASSERT(at != std::string::npos, "vocab placeholder lost");
  text.replace(at, quoted_mark.size(), vocab);
  write_file(path, text);
}

}  // namespace zaya
