// The engine's chat additions: n choices from one prefill (the prompt counted once; choice 0 is
// the n = 1 request bit for bit; choices differ; same seed, same output; cancel ends them all;
// max_batch counts sequences and a request larger than it still runs), logprobs equal to a full
// forward's log_softmax, stop ids, LogitsProcessors (one per choice, masking, accept, a dead
// constraint ends its choice), and submit's checks of the new fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya {
namespace {

std::string case_dir(const char* name) {
  return std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
}

struct Choice {
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;
  FinishReason reason = FinishReason::None;
  int done = 0;
  int64_t completion_tokens = -1;
};

// Every event of one request, by choice index; `order` is the global order of (request, index)
// done events.
struct Collected {
  std::map<int, Choice> choices;
  bool finished(int n) const {
    if (int(choices.size()) != n) return false;
    for (const auto& [i, c] : choices)
      if (c.done == 0) return false;
    return true;
  }
};

EventFn collector(Collected& got) {
  return [&got](const GenerationEvent& ev) {
    Choice& c = got.choices[ev.index];
    EXPECT_EQ(c.done, 0) << "an event after choice " << ev.index << "'s done event";
    c.ids.insert(c.ids.end(), ev.ids.begin(), ev.ids.end());
    c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    if (ev.done) ++c.done, c.reason = ev.finish_reason, c.completion_tokens = ev.completion_tokens;
  };
}

std::vector<Collected> run_all(Engine& engine, const std::vector<GenerationRequest>& reqs) {
  std::vector<Collected> got(reqs.size());
  for (size_t k = 0; k < reqs.size(); ++k) engine.submit(reqs[k], collector(got[k]));
  auto all_done = [&] {
    for (size_t k = 0; k < reqs.size(); ++k)
      if (!got[k].finished(reqs[k].n)) return false;
    return true;
  };
  for (int guard = 0; !all_done() && guard < 100000; ++guard) engine.step();
  EXPECT_TRUE(all_done());
  for (const Collected& g : got)
    for (const auto& [i, c] : g.choices) EXPECT_EQ(c.done, 1) << "choice " << i;
  return got;
}

GenerationRequest sampled(std::vector<int32_t> prompt, int64_t n_tokens, uint64_t seed, int n = 1) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 1.0;
  r.sampling.seed = seed;
  r.sampling.max_new_tokens = n_tokens;
  r.sampling.ignore_eos = true;
  r.n = n;
  return r;
}

TEST(EngineChoices, NChoicesFromOnePrefill) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  const std::vector<int32_t> prompt = {3, 10, 5, 7, 2};
  const GenerationRequest three = sampled(prompt, 12, 42, 3);

  Engine engine(im, nullptr, {8, 0, 2});  // prefill in chunks of 2: three steps of prompt
  const auto got = run_all(engine, {three});
  ASSERT_EQ(got[0].choices.size(), 3u);
  for (const auto& [i, c] : got[0].choices) {
    EXPECT_EQ(c.ids.size(), 12u) << i;
    EXPECT_EQ(c.completion_tokens, 12) << i;
    EXPECT_EQ(c.reason, FinishReason::Length) << i;
  }
  // The prompt went through the model once; each choice decoded its 11 later tokens.
  EXPECT_EQ(engine.stats().prompt_tokens, int64_t(prompt.size()));
  EXPECT_EQ(engine.stats().decode_tokens, 3 * 11);
  // Different RNG streams: the choices differ from each other.
  const auto& c = got[0].choices;
  EXPECT_NE(c.at(0).ids, c.at(1).ids);
  EXPECT_NE(c.at(0).ids, c.at(2).ids);
  EXPECT_NE(c.at(1).ids, c.at(2).ids);

  // Choice 0 is the n = 1 request with the same seed, bit for bit.
  Engine alone(im, nullptr, {8, 0, 512});
  const auto one = run_all(alone, {sampled(prompt, 12, 42)});
  EXPECT_EQ(one[0].choices.at(0).ids, c.at(0).ids);

  // Same seed, same output: again on a fresh engine, and batched beside other requests.
  Engine again(im, nullptr, {8, 0, 512});
  const auto second =
      run_all(again, {sampled({1, 2}, 7, 9), three, sampled({8}, 4, 3, 2), sampled({4}, 20, 1)});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(second[1].choices.at(i).ids, c.at(i).ids) << i;
}

// Greedy choices are all the same, logprobs bit for bit: every state of the prefilled cache (K/V
// rows, conv state, previous input) was copied into each choice. They are the n = 1 output too
// (its logprobs only to rounding: the decoder's sums may round differently for a batch of 4 rows
// than for 1).
TEST(EngineChoices, GreedyChoicesAreIdentical) {
  for (const char* name : {"odd_d", "tiny_a"}) {
    const Model m = Model::load_dir(case_dir(name));
    const InferModel im = InferModel::from_model(m);
    GenerationRequest r = sampled({5, 6, 7}, 9, 1, 4);
    r.sampling.temperature = 0;
    r.sampling.top_logprobs = 0;
    Engine engine(im, nullptr);
    const auto got = run_all(engine, {r});
    const Choice& first = got[0].choices.at(0);
    ASSERT_EQ(first.logprobs.size(), 9u);
    for (int i = 1; i < 4; ++i) {
      const Choice& c = got[0].choices.at(i);
      EXPECT_EQ(c.ids, first.ids) << name << " " << i;
      ASSERT_EQ(c.logprobs.size(), first.logprobs.size());
      for (size_t j = 0; j < c.logprobs.size(); ++j)
        EXPECT_EQ(c.logprobs[j].logprob, first.logprobs[j].logprob) << name << " " << i << " " << j;
    }
    r.n = 1;
    Engine alone(im, nullptr);
    const Choice want = run_all(alone, {r})[0].choices.at(0);
    EXPECT_EQ(first.ids, want.ids) << name;
    for (size_t j = 0; j < want.logprobs.size(); ++j)
      EXPECT_NEAR(first.logprobs[j].logprob, want.logprobs[j].logprob, 1e-5) << name << " " << j;
  }
}

TEST(EngineChoices, CancelEndsEveryChoice) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine engine(im, nullptr);
  Collected running, queued;
  const uint64_t a = engine.submit(sampled({1, 2}, 1000, 7, 3), collector(running));
  for (int k = 0; k < 4; ++k) engine.step();
  const uint64_t b = engine.submit(sampled({1, 2}, 1000, 7, 2), collector(queued));
  engine.cancel(a);
  engine.cancel(b);  // never admitted: each of its choices still gets its done event
  engine.step();
  ASSERT_TRUE(running.finished(3));
  ASSERT_TRUE(queued.finished(2));
  for (const Collected* g : {&running, &queued})
    for (const auto& [i, c] : g->choices) {
      EXPECT_EQ(c.done, 1) << i;
      EXPECT_EQ(c.reason, FinishReason::Cancelled) << i;
      EXPECT_LT(c.ids.size(), 10u) << i;
    }
  EXPECT_FALSE(engine.step());  // nothing left
}

TEST(EngineChoices, ZeroTokensEndsEveryChoice) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine engine(im, nullptr);
  const auto got = run_all(engine, {sampled({1, 2}, 0, 7, 3)});
  ASSERT_EQ(got[0].choices.size(), 3u);
  for (const auto& [i, c] : got[0].choices) {
    EXPECT_TRUE(c.ids.empty());
    EXPECT_EQ(c.reason, FinishReason::Length);
  }
}

// max_batch counts sequences: with room for 4, a second n = 3 request waits until the first has
// finished; a request of more choices than max_batch runs alone and completes.
TEST(EngineChoices, MaxBatchCountsSequences) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  Engine engine(im, nullptr, {4, 0, 512});
  std::vector<std::string> log;  // "X0" … in the order events arrive
  auto logger = [&log](std::string name) {
    return [&log, name](const GenerationEvent& ev) {
      log.push_back(name + std::to_string(ev.index) + (ev.done ? "!" : ""));
    };
  };
  engine.submit(sampled({3}, 5, 1, 3), logger("X"));
  engine.submit(sampled({4}, 5, 2, 3), logger("Y"));
  for (int guard = 0; guard < 100 && engine.step(); ++guard) {
  }
  // Every X event comes before the first Y event.
  const auto first_y =
      std::find_if(log.begin(), log.end(), [](const std::string& s) { return s[0] == 'Y'; });
  ASSERT_NE(first_y, log.end());
  EXPECT_EQ(std::count_if(first_y, log.end(), [](const std::string& s) { return s[0] == 'X'; }), 0);
  EXPECT_EQ(std::count(log.begin(), log.end(), "Y2!"), 1);

  // n = 5 with max_batch 2, between two single requests: all complete, in order.
  Engine narrow(im, nullptr, {2, 0, 512});
  const GenerationRequest big = sampled({6, 1}, 6, 77, 5);
  const auto got =
      run_all(narrow, {sampled({2}, 10, 3), big, sampled({9}, 3, 4), sampled({5}, 3, 5)});
  ASSERT_EQ(got[1].choices.size(), 5u);
  for (const auto& [i, c] : got[1].choices) EXPECT_EQ(c.ids.size(), 6u) << i;
  Engine alone(im, nullptr);
  EXPECT_EQ(run_all(alone, {sampled({6, 1}, 6, 77)})[0].choices.at(0).ids,
            got[1].choices.at(0).ids);
}

// Logprobs are the model's own distribution: log_softmax of the raw logits, recomputed here by
// one forward of prompt + output through the Decoder with all_positions — even with a bias and a
// penalty that change what is drawn.
TEST(EngineChoices, LogprobsMatchAFullForward) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  const int64_t V = m.config().vocab_size;
  const std::vector<int32_t> prompt = {4, 9, 2};
  GenerationRequest r = sampled(prompt, 8, 5, 2);
  r.sampling.temperature = 0.8;
  r.sampling.top_logprobs = 5;
  r.sampling.frequency_penalty = 1.5;
  r.sampling.logit_bias = {{3, 4.0f}, {7, -2.0f}};
  Engine engine(im, nullptr);
  const auto got = run_all(engine, {r});
  for (const auto& [index, c] : got[0].choices) {
    ASSERT_EQ(c.logprobs.size(), c.ids.size()) << index;
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), c.ids.begin(), c.ids.end() - 1);
    const int64_t T = int64_t(seq.size());
    SequenceCache cache(m.config(), T);
    std::vector<float> logits(size_t(T * V));
    Decoder dec(im);
    DecodeItem item{&cache, seq};
    dec.forward({&item, 1}, Tensor(logits.data(), {T, V}), /*all_positions=*/true);
    for (size_t j = 0; j < c.ids.size(); ++j) {
      const float* row = logits.data() + (int64_t(prompt.size()) - 1 + int64_t(j)) * V;
      double mx = row[0], sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      std::vector<double> lp(static_cast<size_t>(V));
      for (int64_t v = 0; v < V; ++v) lp[size_t(v)] = double(row[v]) - mx - std::log(sum);
      const TokenLogprob& got_lp = c.logprobs[j];
      EXPECT_EQ(got_lp.id, c.ids[j]);
      EXPECT_NEAR(got_lp.logprob, lp[size_t(c.ids[j])], 1e-4) << index << " token " << j;
      ASSERT_EQ(got_lp.top.size(), 5u);
      std::vector<double> sorted = lp;
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      for (size_t t = 0; t < 5; ++t) {
        const auto [id, value] = got_lp.top[t];
        EXPECT_NEAR(value, lp[size_t(id)], 1e-4) << "top " << t;
        EXPECT_NEAR(value, sorted[t], 1e-4) << "top " << t;  // the t-th most likely
        if (t > 0) {
          EXPECT_GE(got_lp.top[t - 1].second, value);
        }
      }
    }
  }
  // Off (-1): no logprobs; 0: the chosen id's only.
  r.sampling.top_logprobs = -1;
  r.n = 1;
  EXPECT_TRUE(run_all(engine, {r})[0].choices.at(0).logprobs.empty());
  r.sampling.top_logprobs = 0;
  const auto zero = run_all(engine, {r});
  ASSERT_EQ(zero[0].choices.at(0).logprobs.size(), 8u);
  for (const TokenLogprob& t : zero[0].choices.at(0).logprobs) EXPECT_TRUE(t.top.empty());
  EXPECT_EQ(zero[0].choices.at(0).ids, got[0].choices.at(0).ids);  // logprobs change nothing
}

TEST(EngineChoices, StopIdsEndLikeEos) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  GenerationRequest r = sampled({4, 9}, 6, 0);
  r.sampling.temperature = 0;
  Engine engine(im, nullptr);
  const std::vector<int32_t> ids = run_all(engine, {r})[0].choices.at(0).ids;
  ASSERT_EQ(ids.size(), 6u);
  ASSERT_EQ(std::find(ids.begin(), ids.begin() + 2, ids[2]), ids.begin() + 2)
      << "pick a prompt whose first tokens differ from the third";
  r.sampling.stop_ids = {int32_t(m.config().vocab_size - 1), ids[2]};
  r.sampling.top_logprobs = 2;
  // ignore_eos is on: stop ids still end the choice, and are not part of the output.
  const auto got = run_all(engine, {r});
  const Choice& c = got[0].choices.at(0);
  EXPECT_EQ(c.reason, FinishReason::Stop);
  EXPECT_EQ(c.ids, std::vector<int32_t>(ids.begin(), ids.begin() + 2));
  EXPECT_EQ(c.logprobs.size(), 2u);
  EXPECT_EQ(c.completion_tokens, 3);  // the stop id was generated
}

// Allows only the ids in `allowed` (empty: nothing, from the `dies_after`-th step on); records
// what it was told.
struct MaskProcessor : LogitsProcessor {
  std::vector<int32_t> allowed;
  size_t dies_after = SIZE_MAX;
  std::vector<int32_t>* accepted;
  MaskProcessor(std::vector<int32_t> a, size_t d, std::vector<int32_t>* acc)
      : allowed(std::move(a)), dies_after(d), accepted(acc) {}
  void apply(std::span<float> logits) override {
    const bool dead = accepted->size() >= dies_after;
    for (size_t i = 0; i < logits.size(); ++i)
      if (dead || std::find(allowed.begin(), allowed.end(), int32_t(i)) == allowed.end())
        logits[i] = -std::numeric_limits<float>::infinity();
  }
  void accept(int32_t id) override { accepted->push_back(id); }
};

TEST(EngineChoices, ProcessorsMaskEachChoice) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  const std::vector<int32_t> allowed = {7, 11, 13, 20};
  std::vector<std::vector<int32_t>> accepted(3);
  int made = 0;
  GenerationRequest r = sampled({2, 5}, 10, 8, 3);
  r.sampling.logit_bias = {{0, 100.0f}};  // the mask wins over any bias
  r.make_processor = [&]() -> std::unique_ptr<LogitsProcessor> {
    return std::make_unique<MaskProcessor>(allowed, SIZE_MAX, &accepted[size_t(made++)]);
  };
  Engine engine(im, nullptr);
  const auto got = run_all(engine, {r});
  EXPECT_EQ(made, 3);
  for (int i = 0; i < 3; ++i) {
    const Choice& c = got[0].choices.at(i);
    EXPECT_EQ(c.ids.size(), 10u);
    for (int32_t id : c.ids)
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), id), allowed.end());
    EXPECT_EQ(accepted[size_t(i)], c.ids) << i;  // accept saw exactly the drawn ids, per choice
  }
}

TEST(EngineChoices, ADeadProcessorEndsItsChoice) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  std::vector<std::vector<int32_t>> accepted(2);
  int made = 0;
  GenerationRequest r = sampled({2, 5}, 10, 8, 2);
  r.make_processor = [&]() -> std::unique_ptr<LogitsProcessor> {
    // Choice 0 dies after 3 tokens; choice 1 never (an empty allow-list would: everything else).
    const size_t dies = made == 0 ? 3 : SIZE_MAX;
    std::vector<int32_t> all(size_t(m.config().vocab_size));
    for (size_t i = 0; i < all.size(); ++i) all[i] = int32_t(i);
    return std::make_unique<MaskProcessor>(all, dies, &accepted[size_t(made++)]);
  };
  Engine engine(im, nullptr);
  const auto got = run_all(engine, {r});
  const Choice& dead = got[0].choices.at(0);
  EXPECT_EQ(dead.reason, FinishReason::Stop);
  EXPECT_EQ(dead.ids.size(), 3u);
  EXPECT_EQ(dead.completion_tokens, 3);
  const Choice& alive = got[0].choices.at(1);
  EXPECT_EQ(alive.reason, FinishReason::Length);
  EXPECT_EQ(alive.ids.size(), 10u);
  // Dead from the first step: nothing is drawn.
  r.n = 1;
  made = 0;
  r.make_processor = [&]() -> std::unique_ptr<LogitsProcessor> {
    return std::make_unique<MaskProcessor>(std::vector<int32_t>{}, 0, &accepted[0]);
  };
  const auto none = run_all(engine, {r});
  EXPECT_TRUE(none[0].choices.at(0).ids.empty());
  EXPECT_EQ(none[0].choices.at(0).reason, FinishReason::Stop);
}

TEST(EngineChoices, SubmitChecksTheNewFields) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel im = InferModel::from_model(m);
  const int64_t V = m.config().vocab_size;
  Engine engine(im, nullptr);
  auto noop = [](const GenerationEvent&) {};
  GenerationRequest r = sampled({1}, 4, 0);
  r.n = 0;
  test::expect_error([&] { engine.submit(r, noop); }, {"n (the number of choices)", "got 0"});
  r.n = 9;
  test::expect_error([&] { engine.submit(r, noop); }, {"[1, 8]", "got 9"});
  r.n = 1;
  r.sampling.logit_bias = {{int32_t(V), 1.0f}};
  test::expect_error([&] { engine.submit(r, noop); },
                     {"logit_bias token id " + std::to_string(V), "outside the vocabulary"});
  r.sampling.logit_bias = {};
  r.sampling.stop_ids = {int32_t(V + 5)};
  test::expect_error([&] { engine.submit(r, noop); }, {"stop token id", "outside the vocabulary"});
  r.sampling.stop_ids = {};
  r.sampling.presence_penalty = 2.5;
  test::expect_error([&] { engine.submit(r, noop); }, {"presence_penalty"});
}

}  // namespace
}  // namespace zaya
