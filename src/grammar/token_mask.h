// The grammar as a mask over a vocabulary: which token ids may come next.
//
// VocabIndex holds every id's bytes as the tokenizer decodes it alone — a byte-fallback token
// <0xNN> is its one byte, an ordinary piece its decoded text ("▁" → " ") — in a byte trie laid
// out in depth-first order. mask_logits walks that trie and the grammar together (machine.h): a
// branch whose prefix the grammar refuses is skipped whole, and the parse state after each byte
// is found by a cached (state, byte) transition, so the cost grows with the number of trie nodes
// the grammar allows, not with the vocabulary times the token length.
//
// Which ids are text:
//  - ordinary pieces and byte-fallback tokens: always, by their bytes;
//  - added tokens whose text is only whitespace (Gemma 3's "\n", "\n\n", tab runs): always, by
//    their text (the tokenizer writes newlines with them);
//  - other added tokens (control tokens: "<start_of_turn>", "<unused0>", ZAYA's
//    "<zyphra_tool_call>", …): only where their text is part of a literal of the grammar
//    (Grammar::literals), so a tool-call grammar lets the model write "<zyphra_tool_call>" as
//    the one control token it was trained on, and a JSON string never holds a control token;
//  - <bos>, <pad>, <unk>, unused ids, ids beyond the tokenizer's vocabulary: never.
// The caller's eos ids are governed by the parse alone: allowed exactly when the text so far is
// complete (Matcher::accepting()); when it is complete and nothing may follow, they are the only
// ids left.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "grammar/grammar.h"

namespace zaya {
class Tokenizer;
}

namespace zaya::grammar {

class VocabIndex {
 public:
  enum class TokenClass : uint8_t { Text, AddedText, Never };

  explicit VocabIndex(const Tokenizer& tok);  // built once per model
  int64_t vocab_size() const;
  const std::string& bytes(int32_t id) const;  // "" for a Never id
  TokenClass token_class(int32_t id) const;
  size_t trie_nodes() const;

  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

// logits[id] = -inf for every id whose bytes the matcher cannot take next; eos ids allowed only
// when accepting(); when accepting() and !can_continue() only eos ids remain. Ids the logits have
// beyond the vocabulary are masked. Thread-safe (each thread keeps its own parse-state cache for
// the last grammar it masked with).
void mask_logits(const VocabIndex& vocab, const Matcher& m, std::span<const int32_t> eos_ids,
                 std::span<float> logits);

}  // namespace zaya::grammar
