// The engine's size checks: max_new_tokens near INT64_MAX is rejected without
// overflowing prompt + max_new_tokens, and a model claiming a huge context is served with the
// context whose KV cache fits the budget — a request that asks for the whole context allocates
// only that (a max_position_embeddings of 2^62 once overflowed the cache size instead).
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

}  // namespace
}  // namespace zaya
