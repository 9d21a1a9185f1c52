// The engine: greedy generation equals greedy from full recomputation (model_forward over the whole
// sequence at every step); requests decoded together in one batch give what they give alone;
// sampling depends only on each request's seed; validation, cancellation and zero-token requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "infer/engine.h"
#include "infer/infer_model.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"

namespace zaya {
namespace {

std::string case_dir(const char* name) {
  return std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
}

// Greedy by recomputing the whole sequence each step (no cache).
std::vector<int32_t> greedy_by_recomputation(const Model& m, std::vector<int32_t> ids, int64_t n) {
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> out;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t T = int64_t(ids.size());
    Activations a(m.config(), 1, T, Device::Cpu, /*keep_logits=*/true);
    model_forward(m, a, ids.data());
    const float* last = a.logits.ptr<float>() + (T - 1) * V;
    const int32_t next = int32_t(std::max_element(last, last + V) - last);  // first max
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

struct Collected {
  std::vector<int32_t> ids;
  FinishReason reason = FinishReason::None;
  int events = 0, done = 0;
};

// Submits every request, runs the engine until all are done, returns what each produced.
std::vector<Collected> run_all(Engine& engine, const std::vector<GenerationRequest>& reqs) {
  std::vector<Collected> got(reqs.size());
  for (size_t k = 0; k < reqs.size(); ++k)
    engine.submit(reqs[k], [&got, k](const GenerationEvent& ev) {
      got[k].ids.insert(got[k].ids.end(), ev.ids.begin(), ev.ids.end());
      ++got[k].events;
      if (ev.done) ++got[k].done, got[k].reason = ev.finish_reason;
    });
  auto all_done = [&] {
    return std::all_of(got.begin(), got.end(), [](const Collected& c) { return c.done > 0; });
  };
  for (int guard = 0; !all_done() && guard < 100000; ++guard) engine.step();
  for (const Collected& c : got) EXPECT_EQ(c.done, 1);
  return got;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int64_t n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_new_tokens = n;
  r.sampling.ignore_eos = true;
  return r;
}

TEST(Engine, GreedyEqualsGreedyFromFullRecomputation) {
  for (const char* name : {"tiny_a", "odd_d", "skip_e"}) {
    const Model m = Model::load_dir(case_dir(name));
    const InferModel im = InferModel::from_model(m);
    Engine engine(im, nullptr, {4, 0, 3});  // prefill in chunks of 3
    const std::vector<std::vector<int32_t>> prompts = {{5}, {7, 3}, {1, 2, 3, 4, 5, 6, 7}};
    std::vector<GenerationRequest> reqs;
    for (const auto& p : prompts) reqs.push_back(greedy(p, 8));
    const auto got = run_all(engine, reqs);
    for (size_t k = 0; k < prompts.size(); ++k) {
      EXPECT_EQ(got[k].ids, greedy_by_recomputation(m, prompts[k], 8)) << name << " prompt " << k;
      EXPECT_EQ(got[k].reason, FinishReason::Length);
    }
  }
}

TEST(Engine, BatchingDoesNotChangeSampledOutput) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  std::vector<GenerationRequest> reqs;
  for (int k = 0; k < 5; ++k) {
    GenerationRequest r;
    r.prompt = {int32_t(3 + k), int32_t(10 + k)};
    r.sampling.temperature = 0.9;
    r.sampling.top_k = 20;
    r.sampling.seed = 100 + uint64_t(k);
    r.sampling.max_new_tokens = 6 + k;
    r.sampling.ignore_eos = true;
    reqs.push_back(r);
  }
  Engine together(im, nullptr, {8, 0, 512});
  const auto batched = run_all(together, reqs);
  for (size_t k = 0; k < reqs.size(); ++k) {
    Engine alone(im, nullptr, {1, 0, 512});
    const auto single = run_all(alone, {reqs[k]});
    EXPECT_EQ(batched[k].ids, single[0].ids) << "request " << k;
    EXPECT_EQ(int64_t(batched[k].ids.size()), reqs[k].sampling.max_new_tokens);
  }
  // A batch limit of 2 queues the rest; they join as others finish (continuous batching).
  Engine narrow(im, nullptr, {2, 0, 512});
  const auto queued = run_all(narrow, reqs);
  for (size_t k = 0; k < reqs.size(); ++k) EXPECT_EQ(queued[k].ids, batched[k].ids);
}

TEST(Engine, StopsAtEos) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  // Find what greedy produces, then declare its third token the EOS.
  Engine probe(im, nullptr);
  const auto free_run = run_all(probe, {greedy({4, 9}, 6)});
  const int32_t eos = free_run[0].ids[2];
  EXPECT_EQ(std::find(free_run[0].ids.begin(), free_run[0].ids.begin() + 2, eos),
            free_run[0].ids.begin() + 2)
      << "pick a prompt whose first tokens differ from the third";
  ZayaConfig c = m.config();
  c.eos_token_id = eos;
  Model m2(c);
  std::copy_n(m.params(), m.layout().total, m2.params());
  const InferModel im2 = InferModel::from_model(m2);
  Engine engine(im2, nullptr);
  GenerationRequest r = greedy({4, 9}, 6);
  r.sampling.ignore_eos = false;
  const auto got = run_all(engine, {r});
  EXPECT_EQ(got[0].reason, FinishReason::Stop);
  EXPECT_EQ(got[0].ids, std::vector<int32_t>(free_run[0].ids.begin(), free_run[0].ids.begin() + 2));
}

// EngineOptions::eos_ids (a generation_config.json's list) replace config.json's EOS: a sequence
// ends at any of them.
TEST(Engine, StopsAtAnyOfTheEosIds) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine probe(im, nullptr);
  const auto free_run = run_all(probe, {greedy({4, 9}, 6)});
  const std::vector<int32_t>& ids = free_run[0].ids;
  ASSERT_EQ(ids.size(), 6u);
  ASSERT_EQ(std::find(ids.begin(), ids.begin() + 2, ids[2]), ids.begin() + 2)
      << "pick a prompt whose first tokens differ from the third";
  EngineOptions o;
  o.eos_ids = {int32_t(m.config().vocab_size - 1), ids[2]};
  if (std::find(ids.begin(), ids.end(), o.eos_ids[0]) != ids.end()) o.eos_ids[0] = ids[2];
  Engine engine(im, nullptr, o);
  GenerationRequest r = greedy({4, 9}, 6);
  r.sampling.ignore_eos = false;
  const auto got = run_all(engine, {r});
  EXPECT_EQ(got[0].reason, FinishReason::Stop);
  EXPECT_EQ(got[0].ids, std::vector<int32_t>(ids.begin(), ids.begin() + 2));
  // config.json's EOS no longer ends it: an id that never comes up in its place runs to length.
  int32_t absent = 0;
  while (std::find(ids.begin(), ids.end(), absent) != ids.end()) ++absent;
  o.eos_ids = {absent};
  Engine other(im, nullptr, o);
  const auto full = run_all(other, {r});
  EXPECT_EQ(full[0].reason, FinishReason::Length);
  EXPECT_EQ(full[0].ids, ids);
}

TEST(Engine, RejectsBadRequests) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine engine(im, nullptr, {8, 64, 512});
  auto noop = [](const GenerationEvent&) {};
  test::expect_error([&] { engine.submit(greedy({}, 4), noop); }, {"empty"});
  test::expect_error(
      [&] {
        engine.submit(greedy({1, 100000}, 4), noop);
      },
      {"outside the vocabulary"});
  test::expect_error(
      [&] {
        engine.submit(greedy({1, 2}, 63), noop);
      },
      {"exceeds the context of 64"});
  GenerationRequest bad = greedy({1}, 4);
  bad.sampling.temperature = -1;
  test::expect_error([&] { engine.submit(bad, noop); }, {"temperature"});
  GenerationRequest stop = greedy({1}, 4);
  stop.sampling.stop = {"x"};
  test::expect_error([&] { engine.submit(stop, noop); }, {"tokenizer"});
  EXPECT_EQ(engine.max_context(), 64);
}

TEST(Engine, ZeroTokensAndCancellation) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine engine(im, nullptr);
  const auto zero = run_all(engine, {greedy({1, 2}, 0)});
  EXPECT_TRUE(zero[0].ids.empty());
  EXPECT_EQ(zero[0].reason, FinishReason::Length);

  Collected c;
  const uint64_t id = engine.submit(greedy({1, 2}, 1000), [&](const GenerationEvent& ev) {
    c.ids.insert(c.ids.end(), ev.ids.begin(), ev.ids.end());
    if (ev.done) ++c.done, c.reason = ev.finish_reason;
  });
  for (int k = 0; k < 3; ++k) engine.step();
  engine.cancel(id);
  for (int k = 0; k < 3; ++k) engine.step();
  EXPECT_EQ(c.done, 1);
  EXPECT_EQ(c.reason, FinishReason::Cancelled);
  EXPECT_LT(c.ids.size(), 10u);
}

// run() on its own thread serves requests submitted from other threads.
TEST(Engine, RunLoopServesConcurrentSubmitters) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine engine(im, nullptr);
  std::atomic<bool> stop{false};
  std::thread loop([&] { engine.run(stop); });
  std::vector<std::thread> clients;
  std::vector<std::vector<int32_t>> got(6);
  std::atomic<int> done{0};
  for (int k = 0; k < 6; ++k)
    clients.emplace_back([&, k] {
      engine.submit(greedy({int32_t(k + 1)}, 5), [&, k](const GenerationEvent& ev) {
        got[size_t(k)].insert(got[size_t(k)].end(), ev.ids.begin(), ev.ids.end());
        if (ev.done) ++done;
      });
    });
  for (auto& t : clients) t.join();
  for (int guard = 0; done < 6 && guard < 2000; ++guard)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  engine.wake();
  loop.join();
  EXPECT_EQ(done.load(), 6);
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(got[size_t(k)], greedy_by_recomputation(m, {int32_t(k + 1)}, 5)) << k;
}

}  // namespace
}  // namespace zaya
