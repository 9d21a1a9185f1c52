// Context-free grammars over bytes, and the Matcher that follows a text through one.
//
// A Grammar is a set of rules; a rule is a list of alternatives; an alternative is a sequence of
// elements, each either a set of bytes (one byte of the text) or a reference to a rule. Literals,
// UTF-8 code-point classes (negated or not), optional parts and bounded or unbounded repetition
// are built from those by the Expr helpers below, in the spirit of llama.cpp's GBNF: a code-point
// class becomes the alternatives of its UTF-8 byte sequences, so the Matcher only ever sees bytes
// and a token that ends inside a multi-byte character is judged by its bytes alone.
//
// The Matcher is a set of pushdown stacks, one per live parse (as llama.cpp's): each stack's top
// is the byte set the next byte must be in, the entries below it are where to return when the
// current rule ends; an empty stack is a finished parse. A reference that ends an alternative does
// not push a return entry, so a right-recursive repetition (`R ::= x R | ""`) keeps the stacks
// flat. Identical stacks are merged; a grammar so ambiguous that more than kMaxStacks parses stay
// alive at once makes accept() throw zaya::Error (the grammar is at fault, not the text). Left
// recursion would loop: GrammarBuilder::build refuses it.
//
// Grammar is immutable once built and shared by its copies; a Matcher is a small value (its
// stacks packed in one vector) meant to be copied and restored freely: token_mask.h walks the
// vocabulary with it.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/assert.h"

namespace zaya::grammar {

// More live parses than this at once: the grammar is too ambiguous to follow (accept throws).
inline constexpr size_t kMaxStacks = 4096;
// A grammar larger than this many elements is refused by GrammarBuilder::build.
inline constexpr size_t kMaxElements = size_t(4) << 20;

using ByteSet = std::array<uint64_t, 4>;  // bit b of word b/64: byte b is in the set

// A piece of a rule's right-hand side, built with the functions below.
struct Expr {
  enum class Kind { Bytes, Seq, Alt, Repeat, Ref };
  Kind kind = Kind::Seq;
  ByteSet bytes{};                    // Bytes
  std::vector<Expr> items;            // Seq, Alt; Repeat: the one repeated item
  int min = 0, max = -1;              // Repeat: max -1 = unbounded
  int rule = -1;                      // Ref
  std::vector<std::string> literals;  // lit(), one_of_literals(): their texts (Grammar::literals)
};

Expr lit(std::string_view bytes);         // exactly these bytes ("" matches empty)
Expr byte_set(const ByteSet& set);        // one byte of the set
Expr byte_range(uint8_t lo, uint8_t hi);  // one byte in [lo, hi]
// One UTF-8 encoded code point in one of the inclusive ranges (or, negated, in none of them);
// surrogates (U+D800..U+DFFF) and values above U+10FFFF are never matched.
Expr chars(std::vector<std::pair<char32_t, char32_t>> ranges, bool negated = false);
Expr seq(std::vector<Expr> items);
Expr alt(std::vector<Expr> items);  // no items: matches nothing
Expr opt(Expr e);
Expr repeat(Expr e, int min, int max = -1);  // max -1: unbounded
Expr ref(int rule);
// One of the strings, as a trie (shared prefixes are one path, so the alternatives cost no
// extra parse stacks); the strings are recorded as literals.
Expr one_of_literals(std::vector<std::string> strings);

class Grammar {
 public:
  struct Impl;
  size_t rule_count() const;
  size_t element_count() const;
  // Every text written with lit()/one_of_literals(): token_mask.h lets an added token of the
  // vocabulary (a control token such as "<zyphra_tool_call>") stand for its text only where its
  // text is part of one of these.
  const std::vector<std::string>& literals() const;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }

 private:
  friend class GrammarBuilder;
  explicit Grammar(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

class GrammarBuilder {
 public:
  GrammarBuilder();
  ~GrammarBuilder();
  GrammarBuilder(GrammarBuilder&&) noexcept;
  // A new rule, defined later by define() (so rules can refer to each other and to themselves).
  int declare(std::string name);
  void define(int rule, const Expr& e);  // e's top-level Alt items become the rule's alternatives
  int add(std::string name, const Expr& e);  // declare + define
  size_t element_count() const;
  // The grammar whose text is `root`. Throws zaya::Error naming the rule when a rule is declared
  // but never defined, or is left-recursive, or when the grammar exceeds kMaxElements.
  Grammar build(int root);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

class Matcher {
 public:
  explicit Matcher(const Grammar& g);
  // Takes the bytes when the grammar allows them all (true); otherwise leaves the state as it
  // was and returns false. Throws zaya::Error when more than kMaxStacks parses are alive.
  bool accept(std::string_view bytes);
  bool accepting() const;     // the text so far is a complete sentence of the grammar
  bool can_continue() const;  // some byte may still follow
  const Grammar& grammar() const { return g_; }
  // The packed stacks: for each stack, its length then its element positions bottom to top.
  const std::vector<int32_t>& stacks() const { return stacks_; }

 private:
  Grammar g_;
  std::vector<int32_t> stacks_;
};

}  // namespace zaya::grammar
