// The vocabulary trie and the masking walk (token_mask.h).
#include "grammar/token_mask.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "data/tokenizer.h"
#include "grammar/machine.h"

namespace zaya::grammar {

struct VocabIndex::Impl {
  std::vector<std::string> bytes;  // per id
  std::vector<TokenClass> cls;     // per id
  std::vector<int32_t> added;      // the AddedText ids
  // The trie of the Text ids, in depth-first order; node 0 is the root (the empty prefix).
  std::vector<uint8_t> byte;     // the byte on the edge into the node
  std::vector<int32_t> depth;    // its length
  std::vector<int32_t> end;      // one past its subtree
  std::vector<int32_t> tok_off;  // the ids ending at node i: ids[tok_off[i], tok_off[i + 1])
  std::vector<int32_t> ids;
  int32_t max_depth = 0;
};

namespace {

bool all_whitespace(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  });
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

VocabIndex::VocabIndex(const Tokenizer& tok) {
  auto v = std::make_shared<Impl>();
  const int64_t n = tok.vocab_size();
  v->bytes.resize(size_t(n));
  v->cls.assign(size_t(n), TokenClass::Never);
  const int32_t never[] = {tok.bos_id(), tok.pad_id(), tok.token_id("<unk>")};
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view t = tok.token(id);
    if (t.empty() || std::find(std::begin(never), std::end(never), id) != std::end(never)) continue;
    std::string b;
    if (tok.is_added(id)) {
      b = std::string(t);
      v->cls[id] = all_whitespace(b) ? TokenClass::Text : TokenClass::AddedText;
    } else {
      if (t.size() == 6 && t.substr(0, 3) == "<0x" && t[5] == '>' && hex(t[3]) >= 0 &&
          hex(t[4]) >= 0) {
        b.assign(1, char(hex(t[3]) * 16 + hex(t[4])));
      } else {
        const int32_t one[] = {id};
        b = tok.decode(one);
      }
      if (b.empty()) continue;
      v->cls[id] = TokenClass::Text;
    }
    v->bytes[id] = std::move(b);
    if (v->cls[id] == TokenClass::AddedText) v->added.push_back(id);
  }
  // The trie: the Text ids sorted by their bytes give its depth-first order directly.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n; ++id)
    if (v->cls[id] == TokenClass::Text) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return v->bytes[a] != v->bytes[b] ? v->bytes[a] < v->bytes[b] : a < b;
  });
  v->byte.push_back(0);
  v->depth.push_back(0);
  v->end.push_back(0);
  std::vector<int32_t> path{0};  // path[d]: the node at depth d on the current branch
  std::vector<std::pair<int32_t, int32_t>> node_ids;  // (node, id)
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = v->bytes[id];
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    common = std::min(common, path.size() - 1);
    while (path.size() > common + 1) {
      v->end[path.back()] = int32_t(v->byte.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(int32_t(v->byte.size()));
      v->byte.push_back(uint8_t(s[d]));
      v->depth.push_back(int32_t(d + 1));
      v->end.push_back(0);
    }
    v->max_depth = std::max(v->max_depth, int32_t(s.size()));
    node_ids.emplace_back(path.back(), id);
    prev = &s;
  }
  while (!path.empty()) {
    v->end[path.back()] = int32_t(v->byte.size());
    path.pop_back();
  }
  v->tok_off.assign(v->byte.size() + 1, 0);
  for (auto [node, id] : node_ids) ++v->tok_off[node + 1];
  std::partial_sum(v->tok_off.begin(), v->tok_off.end(), v->tok_off.begin());
  v->ids.resize(node_ids.size());
  std::vector<int32_t> fill(v->tok_off.begin(), v->tok_off.end() - 1);
  for (auto [node, id] : node_ids) v->ids[fill[node]++] = id;
  impl_ = std::move(v);
}

int64_t VocabIndex::vocab_size() const {
  return int64_t(impl_->bytes.size());
}
const std::string& VocabIndex::bytes(int32_t id) const {
  return impl_->bytes.at(size_t(id));
}
VocabIndex::TokenClass VocabIndex::token_class(int32_t id) const {
  return impl_->cls.at(size_t(id));
}
size_t VocabIndex::trie_nodes() const {
  return impl_->byte.size();
}

namespace {

// Per thread: the Machine of the last grammar masked with (its interned states and cached
// transitions carry over from one token to the next), and which added tokens that grammar's
// literals admit.
struct MaskCache {
  std::shared_ptr<const Grammar::Impl> grammar;
  std::shared_ptr<const VocabIndex::Impl> vocab;
  std::unique_ptr<Machine> machine;
  std::vector<int32_t> added;  // AddedText ids whose text is part of a literal
};

MaskCache& cache_for(const VocabIndex& vocab, const Matcher& m) {
  thread_local MaskCache c;
  const auto& g = m.grammar().impl();
  const bool stale = c.machine && (c.machine->node_count() > (size_t(4) << 20) ||
                                   c.machine->state_count() > (size_t(1) << 18));
  if (c.grammar != g || c.vocab != vocab.impl() || !c.machine || stale) {
    c.grammar = g;
    c.vocab = vocab.impl();
    c.machine = std::make_unique<Machine>(g);
    c.added.clear();
    for (int32_t id : vocab.impl()->added) {
      const std::string& t = vocab.impl()->bytes[id];
      for (const std::string& l : g->literals)
        if (l.find(t) != std::string::npos) {
          c.added.push_back(id);
          break;
        }
    }
  }
  return c;
}

}  // namespace

void mask_logits(const VocabIndex& vocab, const Matcher& matcher, std::span<const int32_t> eos_ids,
                 std::span<float> logits) {
  const VocabIndex::Impl& v = *vocab.impl();
  MaskCache& c = cache_for(vocab, matcher);
  Machine& m = *c.machine;
  const int32_t root = m.import_stacks(matcher.stacks());
  const bool accepting = m.accepting(root);
  const bool can_continue = m.can_continue(root);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  auto is_eos = [&](size_t id) {
    return std::find(eos_ids.begin(), eos_ids.end(), int32_t(id)) != eos_ids.end();
  };
  if (!can_continue) {
    for (size_t id = 0; id < n; ++id)
      if (!(accepting && is_eos(id))) logits[id] = kNegInf;
    return;
  }
  std::vector<uint8_t> allowed(n, 0);
  std::vector<int32_t> states(size_t(v.max_depth) + 1);
  states[0] = root;
  const int32_t nodes = int32_t(v.byte.size());
  for (int32_t i = 1; i < nodes;) {
    const int32_t d = v.depth[i];
    const int32_t s = m.step(states[d - 1], v.byte[i]);
    if (s == Machine::kDead) {
      i = v.end[i];
      continue;
    }
    states[d] = s;
    for (int32_t k = v.tok_off[i]; k < v.tok_off[i + 1]; ++k)
      if (size_t(v.ids[k]) < n) allowed[v.ids[k]] = 1;
    ++i;
  }
  for (int32_t id : c.added) {
    if (size_t(id) >= n) continue;
    int32_t s = root;
    for (char b : v.bytes[id])
      if ((s = m.step(s, uint8_t(b))) == Machine::kDead) break;
    if (s != Machine::kDead) allowed[id] = 1;
  }
  for (int32_t id : eos_ids)
    if (id >= 0 && size_t(id) < n) allowed[id] = accepting;
  for (size_t id = 0; id < n; ++id)
    if (!allowed[id]) logits[id] = kNegInf;
}

}  // namespace zaya::grammar
