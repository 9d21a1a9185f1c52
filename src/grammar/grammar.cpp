// The grammar builder (Expr → rules of byte-set and rule-reference elements), the UTF-8
// code-point classes, the Machine that steps parse states (machine.h) and the Matcher on it.
#include <algorithm>
#include <map>
#include <set>

#include "grammar/machine.h"

namespace zaya::grammar {

// ---- Expr helpers ----

Expr byte_set(const ByteSet& set) {
  Expr e;
  e.kind = Expr::Kind::Bytes;
  e.bytes = set;
  return e;
}

Expr byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s{};
  for (unsigned b = lo; b <= hi; ++b) s[b >> 6] |= uint64_t(1) << (b & 63);
  return byte_set(s);
}

Expr lit(std::string_view bytes) {
  Expr e;
  e.kind = Expr::Kind::Seq;
  for (char c : bytes) e.items.push_back(byte_range(uint8_t(c), uint8_t(c)));
  if (!bytes.empty()) e.literals.emplace_back(bytes);
  return e;
}

Expr seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Expr::Kind::Seq;
  e.items = std::move(items);
  return e;
}

Expr alt(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Expr::Kind::Alt;
  e.items = std::move(items);
  return e;
}

Expr repeat(Expr item, int min, int max) {
  ZAYA_ASSERT(min >= 0 && (max == -1 || max >= min), "repeat {{{}, {}}}", min, max);
  Expr e;
  e.kind = Expr::Kind::Repeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

Expr opt(Expr e) {
  return repeat(std::move(e), 0, 1);
}

Expr ref(int rule) {
  Expr e;
  e.kind = Expr::Kind::Ref;
  e.rule = rule;
  return e;
}

namespace {

// The trie of `s[lo, hi)` (sorted, unique) below the common prefix of length `depth`.
Expr trie(const std::vector<std::string>& s, size_t lo, size_t hi, size_t depth) {
  std::vector<Expr> alts;
  if (s[lo].size() == depth) {  // a string ends here (it sorts first)
    alts.push_back(lit(""));
    ++lo;
  }
  while (lo < hi) {
    const char c = s[lo][depth];
    size_t end = lo;
    while (end < hi && s[end][depth] == c) ++end;
    // The longest common run of the group, as one literal.
    size_t run = depth + 1;
    for (;;) {
      bool same = s[lo].size() > run;
      for (size_t k = lo; same && k < end; ++k) same = s[k].size() > run && s[k][run] == s[lo][run];
      if (!same) break;
      ++run;
    }
    Expr head = lit(std::string_view(s[lo]).substr(depth, run - depth));
    head.literals.clear();
    if (end - lo == 1 && s[lo].size() == run) {
      alts.push_back(std::move(head));
    } else {
      alts.push_back(seq({std::move(head), trie(s, lo, end, run)}));
    }
    lo = end;
  }
  return alt(std::move(alts));
}

}  // namespace

Expr one_of_literals(std::vector<std::string> strings) {
  std::sort(strings.begin(), strings.end());
  strings.erase(std::unique(strings.begin(), strings.end()), strings.end());
  if (strings.empty()) return alt({});
  Expr e = trie(strings, 0, strings.size(), 0);
  for (std::string& s : strings)
    if (!s.empty()) e.literals.push_back(std::move(s));
  return e;
}

// ---- UTF-8 classes ----

namespace {

using Range = std::pair<char32_t, char32_t>;

int utf8_len(char32_t c) {
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

void utf8_encode(char32_t c, uint8_t* out) {
  switch (utf8_len(c)) {
    case 1:
      out[0] = uint8_t(c);
      break;
    case 2:
      out[0] = uint8_t(0xC0 | (c >> 6));
      out[1] = uint8_t(0x80 | (c & 0x3F));
      break;
    case 3:
      out[0] = uint8_t(0xE0 | (c >> 12));
      out[1] = uint8_t(0x80 | ((c >> 6) & 0x3F));
      out[2] = uint8_t(0x80 | (c & 0x3F));
      break;
    default:
      out[0] = uint8_t(0xF0 | (c >> 18));
      out[1] = uint8_t(0x80 | ((c >> 12) & 0x3F));
      out[2] = uint8_t(0x80 | ((c >> 6) & 0x3F));
      out[3] = uint8_t(0x80 | (c & 0x3F));
  }
}

// The byte-range sequences that encode exactly the code points [lo, hi] (all of one UTF-8
// length): the range is split until each sequence position is one contiguous byte range (the
// method of Russ Cox's utf8 ranges, as in RE2 and Rust's regex).
void utf8_sequences(char32_t lo, char32_t hi,
                    std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  utf8_encode(lo, a);
  utf8_encode(hi, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

Expr chars(std::vector<Range> ranges, bool negated) {
  // Normalize: sorted, merged, within the Unicode scalar values.
  std::vector<Range> r;
  for (auto [lo, hi] : ranges) {
    if (lo > hi || lo > 0x10FFFF) continue;
    r.emplace_back(lo, std::min<char32_t>(hi, 0x10FFFF));
  }
  std::sort(r.begin(), r.end());
  std::vector<Range> merged;
  for (const Range& x : r) {
    if (!merged.empty() && x.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, x.second);
    else
      merged.push_back(x);
  }
  if (negated) {
    std::vector<Range> inv;
    char32_t next = 0;
    for (const Range& x : merged) {
      if (x.first > next) inv.emplace_back(next, x.first - 1);
      next = x.second + 1;
    }
    if (next <= 0x10FFFF) inv.emplace_back(next, 0x10FFFF);
    merged.swap(inv);
  }
  // Cut out the surrogates and split at the UTF-8 length boundaries.
  std::vector<Range> pieces;
  const char32_t cuts[] = {0x7F, 0x7FF, 0xFFFF};
  for (auto [lo, hi] : merged) {
    std::vector<Range> parts;
    if (lo < 0xD800 && hi >= 0xD800) {
      parts.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) parts.emplace_back(0xE000, hi);
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) parts.emplace_back(0xE000, hi);
    } else {
      parts.emplace_back(lo, hi);
    }
    for (auto [a, b] : parts) {
      for (char32_t cut : cuts) {
        if (a <= cut && b > cut) {
          pieces.emplace_back(a, cut);
          a = cut + 1;
        }
      }
      pieces.emplace_back(a, b);
    }
  }
  ByteSet ascii{};
  bool any_ascii = false;
  std::vector<Expr> alts;
  for (auto [lo, hi] : pieces) {
    if (hi < 0x80) {
      for (char32_t c = lo; c <= hi; ++c) ascii[c >> 6] |= uint64_t(1) << (c & 63);
      any_ascii = true;
      continue;
    }
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    utf8_sequences(lo, hi, seqs);
    for (const auto& s : seqs) {
      std::vector<Expr> items;
      for (auto [a, b] : s) items.push_back(byte_range(a, b));
      alts.push_back(seq(std::move(items)));
    }
  }
  if (any_ascii) alts.insert(alts.begin(), byte_set(ascii));
  return alt(std::move(alts));
}

// ---- builder ----

using Kind = Grammar::Impl::Kind;
using Elem = Grammar::Impl::Elem;

struct GrammarBuilder::State {
  struct Rule {
    std::string name;
    bool defined = false;
    std::vector<std::vector<Elem>> alts;
  };
  std::vector<Rule> rules;
  std::map<ByteSet, int32_t> set_ids;
  std::vector<ByteSet> sets;
  std::set<std::string> literals;
  size_t elements = 0;

  void count(size_t n) {
    elements += n;
    if (elements > kMaxElements)
      fail("grammar: more than {} elements (rule '{}'): the grammar is too large", kMaxElements,
           rules.empty() ? "" : rules.back().name);
  }

  int32_t set_id(const ByteSet& s) {
    auto [it, added] = set_ids.emplace(s, int32_t(sets.size()));
    if (added) sets.push_back(s);
    return it->second;
  }

  int32_t new_rule(std::string name) {
    rules.push_back({std::move(name), false, {}});
    return int32_t(rules.size() - 1);
  }

  int32_t aux(const std::string& base, std::vector<std::vector<Elem>> alts) {
    const int32_t r = new_rule(base + "_" + std::to_string(rules.size()));
    for (const auto& a : alts) count(a.size() + 1);
    rules[r].alts = std::move(alts);
    rules[r].defined = true;
    return r;
  }

  // `e` as one element: a byte set, a reference, or a reference to a new rule holding it.
  Elem single(const Expr& e, const std::string& base) {
    for (const std::string& l : e.literals) literals.insert(l);
    if (e.kind == Expr::Kind::Bytes) return {Kind::kBytes, set_id(e.bytes)};
    if (e.kind == Expr::Kind::Ref) return {Kind::kRef, e.rule};
    std::vector<std::vector<Elem>> alts;
    if (e.kind == Expr::Kind::Alt) {
      for (const Expr& item : e.items) compile(item, alts.emplace_back(), base);
    } else {
      compile(e, alts.emplace_back(), base);
    }
    return {Kind::kRef, aux(base, std::move(alts))};
  }

  void compile(const Expr& e, std::vector<Elem>& out, const std::string& base) {
    for (const std::string& l : e.literals) literals.insert(l);
    switch (e.kind) {
      case Expr::Kind::Bytes:
      case Expr::Kind::Ref:
        count(1);
        out.push_back(single(e, base));
        break;
      case Expr::Kind::Seq:
        for (const Expr& item : e.items) compile(item, out, base);
        break;
      case Expr::Kind::Alt:
        count(1);
        out.push_back(single(e, base));
        break;
      case Expr::Kind::Repeat: {
        const Elem c = single(e.items.at(0), base);
        count(size_t(e.min));
        out.insert(out.end(), size_t(e.min), c);
        if (e.max == -1) {
          const int32_t r = new_rule(base + "_" + std::to_string(rules.size()));
          rules[r].alts = {{c, {Kind::kRef, r}}, {}};
          rules[r].defined = true;
          count(5);
          out.push_back({Kind::kRef, r});
        } else if (e.max > e.min) {
          int32_t prev = aux(base, {{c}, {}});
          for (int k = e.min + 1; k < e.max; ++k) prev = aux(base, {{c, {Kind::kRef, prev}}, {}});
          count(1);
          out.push_back({Kind::kRef, prev});
        }
        break;
      }
    }
  }
};

GrammarBuilder::GrammarBuilder() : s_(std::make_unique<State>()) {}
GrammarBuilder::~GrammarBuilder() = default;
GrammarBuilder::GrammarBuilder(GrammarBuilder&&) noexcept = default;

int GrammarBuilder::declare(std::string name) {
  return s_->new_rule(std::move(name));
}

void GrammarBuilder::define(int rule, const Expr& e) {
  ZAYA_ASSERT(rule >= 0 && size_t(rule) < s_->rules.size(), "rule {} was never declared", rule);
  ZAYA_ASSERT(!s_->rules[rule].defined, "rule '{}' is defined twice", s_->rules[rule].name);
  const std::string base = s_->rules[rule].name;
  std::vector<std::vector<Elem>> alts;
  if (e.kind == Expr::Kind::Alt) {
    for (const std::string& l : e.literals) s_->literals.insert(l);
    for (const Expr& item : e.items) s_->compile(item, alts.emplace_back(), base);
  } else {
    s_->compile(e, alts.emplace_back(), base);
  }
  s_->count(alts.size());
  s_->rules[rule].alts = std::move(alts);
  s_->rules[rule].defined = true;
}

int GrammarBuilder::add(std::string name, const Expr& e) {
  const int r = declare(std::move(name));
  define(r, e);
  return r;
}

size_t GrammarBuilder::element_count() const {
  return s_->elements;
}

Grammar GrammarBuilder::build(int root) {
  State& s = *s_;
  const size_t n = s.rules.size();
  ZAYA_ASSERT(root >= 0 && size_t(root) < n, "root rule {} was never declared", root);
  for (const auto& r : s.rules)
    if (!r.defined) fail("grammar: rule '{}' is declared but never defined", r.name);
  // Nullable rules (a fixpoint), then the left-edge graph: r → t when some alternative of r can
  // reach a reference to t without consuming a byte. A cycle in it is left recursion.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& a : s.rules[r].alts) {
        bool all = true;
        for (const Elem& e : a) all = all && e.kind == Kind::kRef && nullable[e.arg];
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> edges(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& a : s.rules[r].alts)
      for (const Elem& e : a) {
        if (e.kind != Kind::kRef) break;
        edges[r].push_back(e.arg);
        if (!nullable[e.arg]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int32_t, size_t>> path{{int32_t(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == edges[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t t = edges[r][i++];
      if (color[t] == 1) fail("grammar: rule '{}' is left-recursive", s.rules[t].name);
      if (color[t] == 0) {
        color[t] = 1;
        path.push_back({t, 0});
      }
    }
  }
  auto g = std::make_shared<Grammar::Impl>();
  g->sets = s.sets;
  g->alts.resize(n);
  for (size_t r = 0; r < n; ++r) {
    g->names.push_back(s.rules[r].name);
    for (const auto& a : s.rules[r].alts) {
      g->alts[r].push_back(int32_t(g->elems.size()));
      g->elems.insert(g->elems.end(), a.begin(), a.end());
      g->elems.push_back({Kind::kEnd, 0});
    }
  }
  g->literals.assign(s.literals.begin(), s.literals.end());
  g->root = root;
  return Grammar(std::move(g));
}

size_t Grammar::rule_count() const {
  return impl_->alts.size();
}
size_t Grammar::element_count() const {
  return impl_->elems.size();
}
const std::vector<std::string>& Grammar::literals() const {
  return impl_->literals;
}

// ---- Machine ----

Machine::Machine(std::shared_ptr<const Grammar::Impl> g) : g_(std::move(g)) {}

int32_t Machine::intern_node(int32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
  auto [it, added] = node_ids_.emplace(key, int32_t(nodes_.size()));
  if (added) nodes_.push_back({pos, parent});
  return it->second;
}

int32_t Machine::intern_state(std::vector<int32_t>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacks)
    fail("grammar: more than {} parses are alive at once: the grammar is too ambiguous to follow",
         kMaxStacks);
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
  auto [it, added] = state_ids_.emplace(std::move(key), int32_t(spans_.size()));
  if (added) {
    spans_.emplace_back(uint32_t(pool_.size()), uint32_t(stacks.size()));
    pool_.insert(pool_.end(), stacks.begin(), stacks.end());
    if (spans_.size() <= size_t(kDenseStates)) trans_.resize(spans_.size() * 256, -2);
  }
  return it->second;
}

// Every stack whose top is a byte set, reached from element `pos` over `parent` without
// consuming a byte: references open their rule's alternatives, an alternative's end returns to
// the entry below. A reference that ends its alternative pushes no return entry.
void Machine::expand(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
  const Grammar::Impl& g = *g_;
  work_.clear();
  work_.emplace_back(pos, parent);
  size_t steps = 0;
  while (!work_.empty()) {
    auto [p, par] = work_.back();
    work_.pop_back();
    if (++steps > 16 * kMaxStacks)
      fail("grammar: more than {} parses are alive at once: the grammar is too ambiguous to follow",
           kMaxStacks);
    const Elem e = g.elems[p];
    switch (e.kind) {
      case Kind::kBytes:
        out.push_back(intern_node(p, par));
        break;
      case Kind::kRef: {
        const int32_t ret = g.elems[p + 1].kind == Kind::kEnd ? par : intern_node(p + 1, par);
        const auto& alts = g.alts[e.arg];
        for (auto it = alts.rbegin(); it != alts.rend(); ++it) work_.emplace_back(*it, ret);
        break;
      }
      case Kind::kEnd:
        if (par < 0) {
          out.push_back(kEmptyStack);
        } else {
          const Node nd = nodes_[par];
          work_.emplace_back(nd.pos, nd.parent);
        }
        break;
    }
  }
}

int32_t Machine::initial() {
  std::vector<int32_t> out;
  for (int32_t a : g_->alts[g_->root]) expand(a, -1, out);
  return intern_state(out);
}

int32_t Machine::import_stacks(const std::vector<int32_t>& packed) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < packed.size();) {
    const int32_t len = packed[i++];
    int32_t top = kEmptyStack;
    for (int32_t k = 0; k < len; ++k) top = intern_node(packed[i++], top);
    out.push_back(top);
  }
  return intern_state(out);
}

std::vector<int32_t> Machine::export_stacks(int32_t state) const {
  std::vector<int32_t> packed, chain;
  const auto [off, count] = spans_[state];
  for (uint32_t k = 0; k < count; ++k) {
    chain.clear();
    for (int32_t s = pool_[off + k]; s >= 0; s = nodes_[s].parent) chain.push_back(nodes_[s].pos);
    packed.push_back(int32_t(chain.size()));
    packed.insert(packed.end(), chain.rbegin(), chain.rend());
  }
  return packed;
}

int32_t Machine::compute_step(int32_t state, uint8_t byte) {
  const Grammar::Impl& g = *g_;
  std::vector<int32_t> next;
  const auto [off, count] = spans_[state];
  for (uint32_t k = 0; k < count; ++k) {
    const int32_t s = pool_[off + k];
    if (s < 0) continue;
    const Node nd = nodes_[s];
    if (has_byte(g.sets[g.elems[nd.pos].arg], byte)) expand(nd.pos + 1, nd.parent, next);
  }
  if (next.empty()) return kDead;
  return intern_state(next);
}

int32_t Machine::step(int32_t state, uint8_t byte) {
  if (state < kDenseStates) {
    const size_t at = size_t(state) * 256 + byte;
    if (trans_[at] != -2) return trans_[at];
    const int32_t next = compute_step(state, byte);
    trans_[at] = next;
    return next;
  }
  return compute_step(state, byte);
}

bool Machine::accepting(int32_t state) const {
  const auto [off, count] = spans_[state];
  return count > 0 && pool_[off] == kEmptyStack;  // sorted: -1 comes first
}

bool Machine::can_continue(int32_t state) const {
  const auto [off, count] = spans_[state];
  return count > 0 && pool_[off + count - 1] >= 0;
}

// ---- Matcher ----

Matcher::Matcher(const Grammar& g) : g_(g) {
  Machine m(g.impl());
  stacks_ = m.export_stacks(m.initial());
}

bool Matcher::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  Machine m(g_.impl());
  int32_t st = m.import_stacks(stacks_);
  for (char c : bytes) {
    st = m.step(st, uint8_t(c));
    if (st == Machine::kDead) return false;
  }
  stacks_ = m.export_stacks(st);
  return true;
}

bool Matcher::accepting() const {
  for (size_t i = 0; i < stacks_.size(); i += size_t(stacks_[i]) + 1)
    if (stacks_[i] == 0) return true;
  return false;
}

bool Matcher::can_continue() const {
  for (size_t i = 0; i < stacks_.size(); i += size_t(stacks_[i]) + 1)
    if (stacks_[i] > 0) return true;
  return false;
}

}  // namespace zaya::grammar
