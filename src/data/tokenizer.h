// A Hugging Face tokenizer.json of the BPE kind, reproducing the Gemma 3 tokenizer (ZAYA1's)
// id for id. Pipeline of encode (the transformers.js / HF tokenizers order):
//   1. added tokens (special or not) are cut out of the raw text first, leftmost-longest;
//   2. each stretch between them is normalized (Replace rules: Gemma 3 maps " " to "▁"),
//   3. pre-tokenized (Split on a string: a no-op for Gemma 3 once spaces became "▁"),
//   4. BPE on code points: lowest-rank adjacent pair first, leftmost among equal ranks; symbols
//      not in the vocabulary become byte tokens <0xNN> (byte_fallback) or <unk>.
// Invalid UTF-8 bytes are byte-fallback symbols, so encode never fails. decode follows the
// tokenizer.json decoder (Gemma 3: "▁"→" ", ByteFallback, Fuse); special tokens are rendered as
// their text, and a run of byte tokens that is not valid UTF-8 gives one U+FFFD per byte (as HF
// tokenizers does). The object is immutable once loaded, so copies share it and any number of
// threads may encode at once.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

class Tokenizer {
 public:
  // Reads tokenizer.json; throws zaya::Error naming the file on a missing file, malformed JSON,
  // an unsupported model/normalizer/pre-tokenizer/decoder or an inconsistent vocabulary.
  static Tokenizer load(const std::string& path);
  // The same from parsed JSON; `origin` names it in error messages.
  static Tokenizer from_json(const nlohmann::json& j, const std::string& origin);

  std::vector<int32_t> encode(std::string_view text) const;             // no BOS
  void encode(std::string_view text, std::vector<int32_t>& out) const;  // appends to out
  std::string decode(std::span<const int32_t> ids) const;  // throws zaya::Error on a bad id

  int64_t vocab_size() const;  // 1 + the largest id (model vocabulary and added tokens)
  int32_t bos_id() const;      // "<bos>"; -1 if absent
  int32_t eos_id() const;      // "<eos>"; -1 if absent
  int32_t pad_id() const;      // "<pad>"; -1 if absent

  std::string_view token(int32_t id) const;      // the token's text ("" for an unused id)
  int32_t token_id(std::string_view tok) const;  // -1 if not in the vocabulary
  bool is_added(int32_t id) const;               // an added token (cut out before BPE)

  // Steps 1–3 of encode: calls `piece` for every normalized, pre-tokenized stretch that BPE would
  // see (added tokens skipped). bpe_train counts its words with this.
  void for_each_piece(std::string_view text,
                      const std::function<void(std::string_view)>& piece) const;

  nlohmann::json to_json() const;            // tokenizer.json, HF layout
  void save(const std::string& path) const;  // writes to_json() atomically (temp + rename)

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace zaya
