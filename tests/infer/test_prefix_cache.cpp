// The prefix cache: a restored snapshot is bit for bit the cache that prefilling the same ids
// leaves (K/V rows, conv states, previous inputs); greedy outputs of the engine with the cache
// equal those without it over multi-turn prompts that share prefixes, at lengths around block
// boundaries, with n choices too; lookups verify ids (a forced hash collision cannot return
// another prefix); the LRU stays within its bytes and evicts least recently used leaves first; and
// a two-turn chat re-sending a long history runs ≥ 10x fewer prefill tokens before its first token
// with the cache (asserted) — the wall-time ratio is printed, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "infer/prefix_cache.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya {
namespace {

std::string case_dir(const char* name) {
  return std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
}

// n ids in [3, V) from a seeded generator.
std::vector<int32_t> random_ids(uint64_t seed, int64_t n, int64_t V) {
  std::vector<int32_t> ids;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids.push_back(int32_t(3 + x % uint64_t(V - 3)));
  }
  return ids;
}

// Prefills `ids` into `cache` in chunks that end at multiples of `block` (and of `chunk` within a
// block), capturing every boundary into `pc` when given.
void prefill(Decoder& dec, const ZayaConfig& c, SequenceCache& cache, std::span<const int32_t> ids,
             int64_t block, int64_t chunk, PrefixCache* pc) {
  std::vector<float> logits(size_t(c.vocab_size));
  int64_t fed = cache.length();
  while (fed < int64_t(ids.size())) {
    const int64_t L = std::min({chunk, int64_t(ids.size()) - fed, block - fed % block});
    const DecodeItem item{&cache, ids.subspan(size_t(fed), size_t(L))};
    dec.forward({&item, 1}, Tensor(logits.data(), {1, c.vocab_size}));
    fed += L;
    if (pc && fed % block == 0) {
      EXPECT_TRUE(pc->capture(ids, cache)) << "capture at " << fed;
    }
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

void expect_same_state(const ZayaConfig& c, const SequenceCache& a, const SequenceCache& b) {
  ASSERT_EQ(a.length(), b.length());
  const int64_t n = a.length();
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.is_attention(i)) continue;
    const LayerCache &x = a.layer(i), &y = b.layer(i);
    EXPECT_TRUE(same_bytes(x.k.rows(0, n), y.k.rows(0, n))) << "K of layer " << i;
    EXPECT_TRUE(same_bytes(x.v.rows(0, n), y.v.rows(0, n))) << "V of layer " << i;
    EXPECT_TRUE(same_bytes(x.conv_state, y.conv_state)) << "conv state of layer " << i;
    EXPECT_TRUE(same_bytes(x.x_prev, y.x_prev)) << "x_prev of layer " << i;
  }
}

TEST(PrefixCache, RestoreEqualsPrefill) {
  for (const char* name : {"tiny_a", "odd_d", "skip_e"}) {
    const Model m = Model::load_dir(case_dir(name));
    const InferModel im = InferModel::from_model(m);
    const ZayaConfig& c = im.config();
    Decoder dec(im);
    const int64_t B = 8;
    PrefixCache pc(c, {int64_t(1) << 24, B, {}});
    const std::vector<int32_t> ids = random_ids(1, 37, c.vocab_size);
    SequenceCache full(c, 64);
    prefill(dec, c, full, ids, B, 5, &pc);
    EXPECT_EQ(pc.stats().entries, 4) << name;  // boundaries 8, 16, 24, 32
    for (int64_t P : {9, 16, 17, 33, 37}) {
      // The prompt ids[0, P) resumes at the last boundary below P.
      const std::span<const int32_t> prompt(ids.data(), size_t(P));
      const int64_t want = (P - 1) / B * B;
      EXPECT_EQ(pc.lookup(prompt), want) << name << " P " << P;
      SequenceCache restored(c, 64), direct(c, 64);
      EXPECT_EQ(pc.restore(prompt, restored), want);
      prefill(dec, c, direct, prompt.subspan(0, size_t(want)), B, 5, nullptr);
      expect_same_state(c, restored, direct);
      // And going on from there gives the bits of the whole prefill.
      prefill(dec, c, restored, prompt, B, 5, nullptr);
      prefill(dec, c, direct, prompt, B, 5, nullptr);
      expect_same_state(c, restored, direct);
    }
    // Nothing shorter than one block plus a token resumes; another prompt misses.
    EXPECT_EQ(pc.lookup(std::span<const int32_t>(ids.data(), 8)), 0);
    EXPECT_EQ(pc.lookup(random_ids(2, 30, c.vocab_size)), 0);
  }
}

struct Out {
  std::vector<std::vector<int32_t>> choices;
  int done = 0;
};

// Runs one request to its end; each choice's ids.
Out run_one(Engine& engine, const std::vector<int32_t>& prompt, int64_t n_tokens, int n = 1) {
  GenerationRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_new_tokens = n_tokens;
  r.sampling.ignore_eos = true;
  r.n = n;
  Out out;
  out.choices.resize(size_t(n));
  engine.submit(r, [&](const GenerationEvent& ev) {
    auto& ids = out.choices[size_t(ev.index)];
    ids.insert(ids.end(), ev.ids.begin(), ev.ids.end());
    out.done += ev.done ? 1 : 0;
  });
  for (int guard = 0; out.done < n && guard < 100000; ++guard) engine.step();
  EXPECT_EQ(out.done, n);
  return out;
}

TEST(PrefixCache, GreedyOutputsAreTheSameWithAndWithoutTheCache) {
  for (const char* name : {"tiny_a", "odd_d", "skip_e"}) {
    const Model m = Model::load_dir(case_dir(name));
    const InferModel im = InferModel::from_model(m);
    const int64_t V = im.config().vocab_size;
    EngineOptions with{4, 0, 5};
    with.prefix_block = 8;
    with.prefix_cache_bytes = int64_t(1) << 24;
    EngineOptions without = with;
    without.prefix_cache_bytes = 0;
    Engine cached(im, nullptr, with), plain(im, nullptr, without);
    // Three conversations of four turns: each turn re-sends the history, the reply and a new
    // message; the first prompts' lengths sit around block boundaries.
    for (int64_t first : {7, 8, 9, 15, 16, 17, 24}) {
      std::vector<int32_t> history = random_ids(uint64_t(first), first, V);
      for (int turn = 0; turn < 4; ++turn) {
        const int n = turn == 2 ? 3 : 1;  // one turn asks for several choices
        const Out a = run_one(cached, history, 6, n), b = run_one(plain, history, 6, n);
        ASSERT_EQ(a.choices, b.choices) << name << " first " << first << " turn " << turn;
        history.insert(history.end(), a.choices[0].begin(), a.choices[0].end());
        const std::vector<int32_t> msg = random_ids(uint64_t(100 * first + turn), 3 + turn, V);
        history.insert(history.end(), msg.begin(), msg.end());
      }
    }
    const EngineStats s = cached.stats(), p = plain.stats();
    EXPECT_GT(s.prefix.hits, 0) << name;
    EXPECT_GT(s.prompt_tokens_cached, 0) << name;
    EXPECT_EQ(s.prompt_tokens + s.prompt_tokens_cached, p.prompt_tokens) << name;
    EXPECT_EQ(p.prefix.hits + p.prefix.misses + p.prefix.entries, 0) << name;
  }
}

// A cache of length L with every value of K, V and the states set to `mark`, for the bookkeeping
// tests (no model run).
struct Marked {
  SequenceCache cache;
  Marked(const ZayaConfig& c, int64_t L, float mark) : cache(c, L) {
    for (int64_t i = 0; i < c.num_layers(); ++i) {
      if (!c.is_attention(i)) continue;
      LayerCache& l = cache.layer(i);
      for (const Tensor* t : {&l.k, &l.v, &l.conv_state, &l.x_prev}) {
        float* p = t->ptr<float>();
        std::fill(p, p + t->numel(), mark);
      }
    }
    cache.advance(L);
  }
};

ZayaConfig tiny_config() {
  return load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
}

// Captures every block boundary of `ids` (whose length is a multiple of block).
void capture_all(PrefixCache& pc, const ZayaConfig& c, const std::vector<int32_t>& ids,
                 float mark) {
  for (int64_t L = pc.block(); L <= int64_t(ids.size()); L += pc.block()) {
    Marked m(c, L, mark);
    pc.capture(ids, m.cache);
  }
}

TEST(PrefixCache, AHashCollisionNeverReturnsAnotherPrefix) {
  const ZayaConfig c = tiny_config();
  const int64_t B = 4;
  // Every block hashes to the same value: only the ids and the parent can tell them apart.
  PrefixCache pc(
      c, {int64_t(1) << 24, B, [](uint64_t, std::span<const int32_t>) { return uint64_t(42); }});
  const std::vector<int32_t> x = {5, 6, 7, 8}, y = {9, 10, 11, 12}, z = {13, 14, 15, 16};
  auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  capture_all(pc, c, cat({x, y}), 1.0f);
  EXPECT_EQ(pc.lookup(cat({x, y, {1}})), 8);
  EXPECT_EQ(pc.lookup(cat({z, y, {1}})), 0);  // y is cached, but after x
  EXPECT_EQ(pc.lookup(cat({y, x, {1}})), 0);
  EXPECT_EQ(pc.lookup(cat({x, z, {1}})), 4);
  capture_all(pc, c, cat({z}), 2.0f);
  EXPECT_EQ(pc.lookup(cat({z, y, {1}})), 4);  // z alone; y under z is not
  // Restoring z gives z's state, not x's (same hash).
  SequenceCache r(c, 16);
  EXPECT_EQ(pc.restore(cat({z, y}), r), 4);
  EXPECT_EQ(r.layer(0).k.ptr<float>()[0], 2.0f);
  EXPECT_EQ(r.layer(0).conv_state.ptr<float>()[0], 2.0f);
}

TEST(PrefixCache, TheLruStaysWithinItsBytesAndEvictsLeastRecentlyUsedLeaves) {
  const ZayaConfig c = tiny_config();
  const int64_t B = 4;
  const int64_t node = PrefixCache(c, {1, B, {}}).node_bytes();
  PrefixCache pc(c, {4 * node + node / 2, B, {}});  // room for four blocks
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = {9, 10, 11, 12, 13, 14, 15, 16},
                             d = {17, 18, 19, 20, 21, 22, 23, 24};
  auto plus1 = [](std::vector<int32_t> v) {
    v.push_back(0);
    return v;
  };
  capture_all(pc, c, a, 1.0f);
  capture_all(pc, c, b, 2.0f);
  EXPECT_EQ(pc.stats().entries, 4);
  SequenceCache r(c, 16);
  EXPECT_EQ(pc.restore(plus1(a), r), 8);  // a is now the more recently used
  // One more block evicts b's leaf (b2), then b1 (now a leaf), never a's blocks.
  capture_all(pc, c, {d.begin(), d.begin() + 4}, 3.0f);
  EXPECT_EQ(pc.lookup(plus1(b)), 4);
  EXPECT_EQ(pc.lookup(plus1(a)), 8);
  capture_all(pc, c, d, 3.0f);
  EXPECT_EQ(pc.lookup(plus1(b)), 0);
  EXPECT_EQ(pc.lookup(plus1(a)), 8);
  EXPECT_EQ(pc.lookup(plus1(d)), 8);
  EXPECT_EQ(pc.stats().evictions, 2);
  // Many more chains: the bytes never pass the bound, the newest chain is whole.
  for (int k = 0; k < 200; ++k) {
    std::vector<int32_t> ids = random_ids(uint64_t(k + 10), 12, c.vocab_size);
    capture_all(pc, c, ids, float(k));
    ASSERT_LE(pc.stats().bytes, 4 * node + node / 2);
    ASSERT_EQ(pc.stats().bytes, pc.stats().entries * node);
    EXPECT_EQ(pc.lookup(plus1(ids)), 12);
  }
  // A chain longer than the bound keeps its first four blocks (a block is never stored without
  // its parent, and a parent is never evicted for its own child).
  PrefixCache small(c, {4 * node + node / 2, B, {}});
  const std::vector<int32_t> longer = random_ids(7, 40, c.vocab_size);
  capture_all(small, c, longer, 1.0f);
  EXPECT_EQ(small.lookup(plus1(longer)), 16);
  // Disabled: nothing is kept.
  PrefixCache off(c, {0, B, {}});
  capture_all(off, c, a, 1.0f);
  EXPECT_EQ(off.stats().entries, 0);
  EXPECT_EQ(off.lookup(plus1(a)), 0);
}

// The second turn of a chat re-sends a long history: with the cache it resumes at the history's
// last block boundary and prefills only the rest.
TEST(PrefixCache, ASecondTurnReachesItsFirstTokenTenTimesSooner) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  const int64_t V = im.config().vocab_size;
  const std::vector<int32_t> history = random_ids(3, 1000, V);
  struct Turn2 {
    int64_t prefill_tokens = 0;
    double seconds = 0;
  };
  auto second_turn = [&](int64_t cache_bytes) {
    EngineOptions o{4, 0, 512};
    o.prefix_block = 64;
    o.prefix_cache_bytes = cache_bytes;
    Engine engine(im, nullptr, o);
    std::vector<int32_t> prompt = history;
    const Out first = run_one(engine, prompt, 12);
    prompt.insert(prompt.end(), first.choices[0].begin(), first.choices[0].end());
    const std::vector<int32_t> msg = random_ids(4, 20, V);
    prompt.insert(prompt.end(), msg.begin(), msg.end());
    const int64_t before = engine.stats().prompt_tokens;
    GenerationRequest r;
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.sampling.max_new_tokens = 1;
    bool done = false;
    const auto t0 = std::chrono::steady_clock::now();
    engine.submit(r, [&](const GenerationEvent& ev) { done = done || ev.done; });
    while (!done) engine.step();
    Turn2 t;
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.prefill_tokens = engine.stats().prompt_tokens - before;
    return t;
  };
  const Turn2 without = second_turn(0), with = second_turn(int64_t(64) << 20);
  EXPECT_EQ(without.prefill_tokens, 1000 + 12 + 20);
  const double token_ratio = double(without.prefill_tokens) / double(with.prefill_tokens);
  std::printf(
      "second turn: %lld prefill tokens without the cache, %lld with (%.1fx); first token after "
      "%.2f ms without, %.2f ms with (%.1fx wall)\n",
      (long long)without.prefill_tokens, (long long)with.prefill_tokens, token_ratio,
      without.seconds * 1e3, with.seconds * 1e3, without.seconds / with.seconds);
  EXPECT_GE(token_ratio, 10.0);
}

}  // namespace
}  // namespace zaya
