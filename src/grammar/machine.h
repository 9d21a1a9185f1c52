// Inside the grammar module: the compiled form of a Grammar and the Machine that steps parse
// states over bytes (grammar.h describes the model). Shared by the Matcher (grammar.cpp) and the
// vocabulary mask (token_mask.cpp), so both follow one definition of "the grammar allows this".
//
// A stack is the id of its top node; a node is (element position, id of the node below it), and
// nodes are interned, so equal stacks have equal ids and a stack costs one node per push. A parse
// state is the sorted set of its stack ids (-1: the empty stack, a finished parse), interned too,
// so the state after a byte is found again by id; step() caches each (state, byte) transition in
// a dense table (the first kDenseStates states) — walking a vocabulary, most bytes lead back to
// states already seen (inside a JSON string, every ordinary character leads to the same state).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace zaya::grammar {

struct Grammar::Impl {
  enum Kind : uint8_t { kBytes, kRef, kEnd };
  struct Elem {
    Kind kind;
    int32_t arg;  // kBytes: index into sets; kRef: rule
  };
  std::vector<Elem> elems;  // every alternative's elements, each alternative ended by kEnd
  std::vector<ByteSet> sets;
  std::vector<std::vector<int32_t>> alts;  // per rule: where its alternatives start in elems
  std::vector<std::string> names;          // per rule
  std::vector<std::string> literals;
  int32_t root = 0;
};

inline bool has_byte(const ByteSet& s, uint8_t b) {
  return (s[b >> 6] >> (b & 63)) & 1;
}

class Machine {
 public:
  static constexpr int32_t kDead = -1;        // step(): the byte is not allowed
  static constexpr int32_t kEmptyStack = -1;  // in a state: a finished parse
  static constexpr int32_t kDenseStates = 8192;

  explicit Machine(std::shared_ptr<const Grammar::Impl> g);
  const std::shared_ptr<const Grammar::Impl>& grammar() const { return g_; }

  int32_t initial();
  int32_t import_stacks(const std::vector<int32_t>& packed);  // Matcher::stacks() layout
  std::vector<int32_t> export_stacks(int32_t state) const;
  int32_t step(int32_t state, uint8_t byte);  // kDead when no stack takes the byte
  bool accepting(int32_t state) const;
  bool can_continue(int32_t state) const;
  size_t node_count() const { return nodes_.size(); }
  size_t state_count() const { return spans_.size(); }

 private:
  struct Node {
    int32_t pos, parent;
  };
  int32_t intern_node(int32_t pos, int32_t parent);
  int32_t intern_state(std::vector<int32_t>& stacks);  // sorts and dedups stacks
  void expand(int32_t pos, int32_t parent, std::vector<int32_t>& out);
  int32_t compute_step(int32_t state, uint8_t byte);

  std::shared_ptr<const Grammar::Impl> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<int32_t> pool_;                         // the states' stack ids, back to back
  std::vector<std::pair<uint32_t, uint32_t>> spans_;  // per state: offset and count in pool_
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<int32_t> trans_;  // kDenseStates × 256, -2 = not computed yet
  std::vector<std::pair<int32_t, int32_t>> work_;
  std::vector<int32_t> out_;
};

}  // namespace zaya::grammar
