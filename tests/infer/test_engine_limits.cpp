// The engine's size checks: max_new_tokens near INT64_MAX is rejected without
// overflowing prompt + max_new_tokens, and a model claiming a huge context is served with the
// context whose KV cache fits the budget — a request that asks for the whole context allocates
// only that (a max_position_embeddings of 2^62 once overflowed the cache size instead); with
// sliding-window sub-layers the bound is the cache's real size (SequenceCache::kv_bytes): a model
// whose sub-layers are all windowed keeps any context, a mixed one the context its full
// sub-layers fit.
#include <gtest/gtest.h>

#include <climits>

#include "core/assert.h"
#include "infer/cache.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {
namespace {

ZayaConfig tiny() {
  return load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
}

TEST(EngineLimits, MaxNewTokensNearInt64MaxIsRejected) {
  Model m(tiny());
  m.init_random(3);
  const InferModel im = InferModel::from_model(m);
  Engine e(im, nullptr);
  for (int64_t want : {INT64_MAX, INT64_MAX - 1, int64_t(1) << 62}) {
    GenerationRequest r;
    r.prompt = {2, 3, 4};
    r.sampling.max_new_tokens = want;
    try {
      e.submit(r, [](const GenerationEvent&) {});
      ADD_FAILURE() << "accepted " << want;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("exceeds the context of 2048 tokens"),
                std::string::npos)
          << err.what();
    }
  }
}

TEST(EngineLimits, AHugeClaimedContextIsLoweredToTheCacheBudget) {
  ZayaConfig c = tiny();
  c.max_position_embeddings = int64_t(1) << 31;  // the config limit
  Model m(c);
  m.init_random(3);
  const InferModel im = InferModel::from_model(m);
  const int64_t per_token = SequenceCache::bytes_per_token(c);
  EngineOptions o;
  o.max_cache_bytes = 1 << 20;
  Engine e(im, nullptr, o);
  EXPECT_EQ(e.max_context(), (int64_t(1) << 20) / per_token);
  // The whole remaining context (what a chat request without max_tokens asks for) runs.
  GenerationRequest r;
  r.prompt = {2, 3, 4};
  r.sampling.max_new_tokens = e.max_context() - 3;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  int64_t got = 0;
  bool done = false;
  e.submit(r, [&](const GenerationEvent& ev) {
    got += int64_t(ev.ids.size());
    done = done || ev.done;
  });
  for (int i = 0; i < 3; ++i) e.step();  // a few steps: it was admitted and its cache allocated
  EXPECT_GT(got, 0);
  // The default budget (half the physical memory) keeps a small model's full context.
  Engine full(im, nullptr);
  EXPECT_GT(full.max_context(), 1 << 20);
}

// tiny.json's attention sub-layers windowed (all, or every other one).
ZayaConfig with_windows(int64_t W, bool all) {
  ZayaConfig c = tiny();
  c.max_position_embeddings = int64_t(1) << 31;
  c.swa_layers.assign(size_t(c.num_layers()), 0);
  int64_t k = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i) && (all || k++ % 2 == 0)) c.swa_layers[size_t(i)] = W;
  return c;
}

TEST(EngineLimits, WindowedSubLayersCountWhatTheyHold) {
  EngineOptions o;
  o.max_cache_bytes = 1 << 20;
  {  // every attention sub-layer windowed: the cache is bounded, the context is not lowered
    const ZayaConfig c = with_windows(16, true);
    ASSERT_EQ(SequenceCache::bytes_per_token(c), 0);
    ASSERT_LE(SequenceCache::window_bytes(c), o.max_cache_bytes);
    Model m(c);
    m.init_random(3);
    const InferModel im = InferModel::from_model(m);
    Engine e(im, nullptr, o);
    EXPECT_EQ(e.max_context(), c.max_position_embeddings);
  }
  {  // mixed: the largest context whose real cache fits, more than all-full layers would allow
    const ZayaConfig c = with_windows(16, false);
    const int64_t per_token = SequenceCache::bytes_per_token(c);
    ASSERT_GT(per_token, 0);
    ASSERT_GT(SequenceCache::window_bytes(c), 0);
    Model m(c);
    m.init_random(3);
    const InferModel im = InferModel::from_model(m);
    Engine e(im, nullptr, o);
    const int64_t T = e.max_context();
    EXPECT_LE(SequenceCache::kv_bytes(c, T), o.max_cache_bytes);
    EXPECT_GT(SequenceCache::kv_bytes(c, T + 1), o.max_cache_bytes);
    EXPECT_EQ(T, (o.max_cache_bytes - SequenceCache::window_bytes(c)) / per_token);
    EXPECT_GT(T, o.max_cache_bytes / SequenceCache::bytes_per_token(tiny()));
  }
}

}  // namespace
}  // namespace zaya
