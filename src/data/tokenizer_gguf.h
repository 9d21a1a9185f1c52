// The tokenizer a GGUF file carries, as the Hugging Face tokenizer.json zaya's Tokenizer reads
// (docs/quantization.md, "Running a GGUF").
//
// Contract:
//   - zaya.tokenizer_json (a string: the exact tokenizer.json, which zaya writes into its own
//     GGUF files) is used as it is.
//   - Else the GGML vocabulary — tokenizer.ggml.tokens (strings, index = id), token_type (i32)
//     and merges ("a b" strings, rank = index) — is rebuilt into Gemma 3's tokenizer.json layout
//     when it is a BPE vocabulary of that kind: raw UTF-8 tokens with "▁" for a space and <0xNN>
//     byte tokens, as the ZAYA1 converters write Gemma 3's (tokenizer.ggml.model "gemma4"; a
//     "llama" or "gpt2" file of the same shape is read the same way). The result: a BPE model
//     with byte_fallback and <unk>, the normalizer Replace " " → "▁", the Split pre-tokenizer and
//     the decoder Replace "▁" → " ", ByteFallback, Fuse. Token types: NORMAL (1) and BYTE (6) are
//     vocabulary; CONTROL (3) and UNKNOWN (2) special added tokens; USER_DEFINED (4) added tokens
//     (the converters write their "▁" as spaces: turned back); UNUSED (5) "[PADn]" fillers, which
//     the converters add to reach the model's vocabulary size, are left out (their ids stay
//     unused), other UNUSED tokens kept as special added tokens. A merge splits at its first
//     space after the first byte.
//   - Else there is no tokenizer zaya can read (no tokens, a SentencePiece vocabulary without
//     merges, byte-level GPT-2 tokens): the reason names the key.
// A vocabulary that is there but inconsistent (a merge of unknown tokens, a type array of another
// length, duplicate tokens) is a zaya::Error naming the file and the key.
//
// Writing (zaya quantize): the inverse — a tokenizer.json of exactly that kind (BPE with
// byte_fallback, that normalizer, pre-tokenizer and decoder, added tokens without flags) becomes
// the GGML arrays, as the ZAYA1 converters write Gemma 3's, so llama.cpp-style readers find a
// vocabulary and zaya rebuilds from the arrays alone a tokenizer that encodes and decodes as the
// tokenizer.json did. A tokenizer.json the arrays cannot say exactly gives no arrays (the reason
// says which part), never approximate ones.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"
#include "io/gguf.h"

namespace zaya {

// GGML's token types (tokenizer.ggml.token_type).
enum class GgufTokenType : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6
};

// A GGML vocabulary as the file holds it.
struct GgufVocab {
  std::string model;                // tokenizer.ggml.model ("gemma4", "llama", "gpt2", ...)
  std::vector<std::string> tokens;  // id → text
  std::vector<int32_t> types;       // id → GgufTokenType (empty: every token normal)
  std::vector<std::string> merges;  // "a b", by rank
};

// The tokenizer.json of `v` as the contract says; throws zaya::Error naming `origin` when `v` is
// not a vocabulary of that kind or is inconsistent.
nlohmann::json tokenizer_json_from_vocab(const GgufVocab& v, const std::string& origin);

// The vocabulary of `f` (empty tokens when it has none); throws zaya::Error naming the file and
// the key when one of the arrays has the wrong type or length.
GgufVocab read_gguf_vocab(const GgufFile& f);

struct GgufTokenizer {
  std::optional<Tokenizer> tok;  // none: the file has no tokenizer zaya can read
  std::string origin;            // "F.gguf (zaya.tokenizer_json)" or "F.gguf (tokenizer.ggml.*)"
  std::string why_not;           // when !tok: what the file lacks, naming the key
};

// The tokenizer of `f`, as the contract says.
GgufTokenizer gguf_tokenizer(const GgufFile& f);

// The GGML vocabulary of tokenizer.json `tok` (the inverse of tokenizer_json_from_vocab): model
// "gemma4"; the tokens by id ("<0xNN>" BYTE, other vocabulary NORMAL, special added tokens
// CONTROL — the model's unk_token UNKNOWN —, other added tokens USER_DEFINED with their "▁"
// written as spaces), ids the tokenizer leaves free up to `vocab_size` (the model's) filled with
// "[PADn]" UNUSED tokens; the merges as "a b". Nullopt, with the reason in *why_not, when the
// arrays would not rebuild `tok` exactly (see the top of this file). Never throws on any JSON.
std::optional<GgufVocab> vocab_from_tokenizer_json(const nlohmann::json& tok, int64_t vocab_size,
                                                   std::string* why_not);

// Whether tokenizer.json `tok`'s post-processor puts a special token first (`first`; else last)
// in a single sequence — a TemplateProcessing, alone or in a Sequence: what add_bos_token /
// add_eos_token say when no tokenizer_config.json does.
bool post_processor_adds(const nlohmann::json& tok, bool first);

// The special tokens written beside the arrays (tokenizer.ggml.*_token_id: ids outside the
// vocabulary are left out) and the add_bos_token / add_eos_token flags.
struct GgmlSpecialIds {
  int64_t bos = -1, eos = -1, eot = -1, pad = -1;  // -1: not written
  bool add_bos = false, add_eos = false;
};

// The tokenizer.ggml.* metadata of `v` (a vocab_from_tokenizer_json result; its strings are
// moved, so a 262k-token vocabulary and its half a million merges are held once): model, tokens,
// scores (0: the merges rank a BPE vocabulary), token_type, merges, add_space_prefix (false:
// nothing is put before the text), the ids of `s` and of the UNKNOWN token (unknown_token_id),
// the two add flags.
std::vector<std::pair<std::string, GgufValue>> ggml_tokenizer_keys(GgufVocab&& v,
                                                                   const GgmlSpecialIds& s);

}  // namespace zaya
