// The prefix cache on a model with sliding-window sub-layers (prefix_cache.h): a restored
// snapshot holds, for a windowed sub-layer, the positions its next queries can see, at the rows a
// prefilled cache keeps them, so going on from it gives the prefilled cache's logits bit for bit;
// the engine's greedy outputs are the same with and without the cache over multi-turn prompts;
// and a windowed sub-layer's node keeps only the window's rows (W = 1: none).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "infer/prefix_cache.h"
#include "model/model.h"

namespace zaya {
namespace {

std::string case_dir(const char* name) {
  return std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
}

std::vector<int32_t> random_ids(uint64_t seed, int64_t n, int64_t V) {
  std::vector<int32_t> ids;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids.push_back(int32_t(3 + x % uint64_t(V - 3)));
  }
  return ids;
}

// A twin case's weights with window W on its first attention sub-layer and, unless mixed, on all.
Model windowed(const char* name, int64_t W, bool mixed) {
  const Model base = Model::load_dir(case_dir(name));
  ZayaConfig c = base.config();
  c.swa_layers.assign(size_t(c.num_layers()), 0);
  bool first = true;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i)) {
      if (!mixed || first) c.swa_layers[size_t(i)] = W;
      first = false;
    }
  Model m(c);
  std::copy_n(base.params(), base.layout().total, m.params());
  return m;
}

// Prefills ids[cache.length(), end) in chunks ending at multiples of `block` (and of `chunk`
// within one), capturing every boundary into pc when given; the logits of every chunk's last
// token are appended to `logits`.
void prefill(Decoder& dec, const ZayaConfig& c, SequenceCache& cache, std::span<const int32_t> ids,
             int64_t block, int64_t chunk, PrefixCache* pc, std::vector<float>* logits) {
  std::vector<float> row(static_cast<size_t>(c.vocab_size));
  for (int64_t fed = cache.length(); fed < int64_t(ids.size());) {
    const int64_t L = std::min({chunk, int64_t(ids.size()) - fed, block - fed % block});
    const DecodeItem item{&cache, ids.subspan(size_t(fed), size_t(L))};
    dec.forward({&item, 1}, Tensor(row.data(), {1, c.vocab_size}));
    if (logits) logits->insert(logits->end(), row.begin(), row.end());
    fed += L;
    if (pc && fed % block == 0) EXPECT_TRUE(pc->capture(ids, cache)) << "capture at " << fed;
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// The state a next step reads: each sub-layer's K/V of the positions its queries at length n can
// see (all, or the last keys − 1), the conv state and the previous input.
void expect_same_visible_state(const ZayaConfig& c, const SequenceCache& a, const SequenceCache& b,
                               const std::string& what) {
  ASSERT_EQ(a.length(), b.length()) << what;
  const int64_t n = a.length();
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.is_attention(i)) continue;
    const LayerCache &x = a.layer(i), &y = b.layer(i);
    const int64_t lo = x.keys > 0 ? std::max<int64_t>(0, n - (x.keys - 1)) : 0;
    if (lo < n) {
      EXPECT_TRUE(
          same_bytes(x.k.rows(lo - x.first, n - x.first), y.k.rows(lo - y.first, n - y.first)))
          << what << ": K of layer " << i;
      EXPECT_TRUE(
          same_bytes(x.v.rows(lo - x.first, n - x.first), y.v.rows(lo - y.first, n - y.first)))
          << what << ": V of layer " << i;
    }
    EXPECT_TRUE(same_bytes(x.conv_state, y.conv_state)) << what << ": conv state of layer " << i;
    EXPECT_TRUE(same_bytes(x.x_prev, y.x_prev)) << what << ": x_prev of layer " << i;
  }
}

TEST(PrefixCacheWindow, RestoreThenPrefillEqualsPrefill) {
  for (const char* name : {"tiny_a", "odd_d"}) {
    for (int64_t W : {1, 3, 6, 13, 40}) {  // below, around and above the block of 8
      for (bool mixed : {false, true}) {
        const Model m = windowed(name, W, mixed);
        const InferModel im = InferModel::from_model(m);
        const ZayaConfig& c = im.config();
        Decoder dec(im);
        const int64_t B = 8;
        PrefixCache pc(c, {int64_t(1) << 24, B, {}});
        const std::vector<int32_t> ids = random_ids(uint64_t(W), 45, c.vocab_size);
        SequenceCache full(c, 64);
        prefill(dec, c, full, ids, B, 5, &pc, nullptr);
        const std::string what =
            std::string(name) + " W " + std::to_string(W) + (mixed ? " mixed" : "");
        EXPECT_EQ(pc.stats().entries, 5) << what;  // boundaries 8 … 40
        for (int64_t P : {9, 16, 17, 33, 45}) {
          const std::span<const int32_t> prompt(ids.data(), size_t(P));
          const int64_t at = (P - 1) / B * B;
          SequenceCache restored(c, 64), direct(c, 64);
          ASSERT_EQ(pc.restore(prompt, restored), at) << what;
          prefill(dec, c, direct, prompt.subspan(0, size_t(at)), B, 5, nullptr, nullptr);
          const std::string here = what + " P " + std::to_string(P);
          expect_same_visible_state(c, restored, direct, here + " restored");
          // Going on: the same logits, bit for bit, and the same state at the end.
          std::vector<float> a, b;
          prefill(dec, c, restored, prompt, B, 5, nullptr, &a);
          prefill(dec, c, direct, prompt, B, 5, nullptr, &b);
          EXPECT_TRUE(a == b) << here;
          expect_same_visible_state(c, restored, direct, here + " after");
        }
      }
    }
  }
}

TEST(PrefixCacheWindow, NodesKeepOnlyTheWindowsRows) {
  const Model full = Model::load_dir(case_dir("tiny_a"));
  const int64_t B = 16;
  const int64_t bytes_full = PrefixCache(full.config(), {1 << 20, B, {}}).node_bytes();
  const Model w1 = windowed("tiny_a", 1, false), w5 = windowed("tiny_a", 5, false);
  const Model big = windowed("tiny_a", 100, false);
  const ZayaConfig& c = full.config();
  int64_t A = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) A += c.is_attention(i) ? 1 : 0;
  const int64_t row = 2 * c.kv_heads() * c.head_dim() * int64_t(sizeof(float));
  EXPECT_EQ(PrefixCache(w1.config(), {1 << 20, B, {}}).node_bytes(), bytes_full - A * B * row);
  EXPECT_EQ(PrefixCache(w5.config(), {1 << 20, B, {}}).node_bytes(),
            bytes_full - A * (B - 4) * row);
  EXPECT_EQ(PrefixCache(big.config(), {1 << 20, B, {}}).node_bytes(), bytes_full);
}

struct Out {
  std::vector<int32_t> ids;
  bool done = false;
};

Out run_one(Engine& engine, const std::vector<int32_t>& prompt, int64_t n_tokens) {
  GenerationRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_new_tokens = n_tokens;
  r.sampling.ignore_eos = true;
  Out out;
  engine.submit(r, [&](const GenerationEvent& ev) {
    out.ids.insert(out.ids.end(), ev.ids.begin(), ev.ids.end());
    out.done = out.done || ev.done;
  });
  for (int guard = 0; !out.done && guard < 100000; ++guard) engine.step();
  EXPECT_TRUE(out.done);
  return out;
}

TEST(PrefixCacheWindow, GreedyOutputsAreTheSameWithAndWithoutTheCache) {
  for (int64_t W : {1, 5, 12}) {
    const Model m = windowed("tiny_a", W, true);
    const InferModel im = InferModel::from_model(m);
    const int64_t V = im.config().vocab_size;
    EngineOptions with{4, 0, 5};
    with.prefix_block = 8;
    with.prefix_cache_bytes = int64_t(1) << 24;
    EngineOptions without = with;
    without.prefix_cache_bytes = 0;
    Engine cached(im, nullptr, with), plain(im, nullptr, without);
    for (int64_t first : {7, 9, 16, 23}) {
      std::vector<int32_t> history = random_ids(uint64_t(first + W), first, V);
      for (int turn = 0; turn < 4; ++turn) {
        const Out a = run_one(cached, history, 6), b = run_one(plain, history, 6);
        ASSERT_EQ(a.ids, b.ids) << "W " << W << " first " << first << " turn " << turn;
        history.insert(history.end(), a.ids.begin(), a.ids.end());
        const std::vector<int32_t> msg = random_ids(uint64_t(100 * first + turn), 3 + turn, V);
        history.insert(history.end(), msg.begin(), msg.end());
      }
    }
    EXPECT_GT(cached.stats().prefix.hits, 0) << "W " << W;
    EXPECT_GT(cached.stats().prompt_tokens_cached, 0) << "W " << W;
  }
}

}  // namespace
}  // namespace zaya
