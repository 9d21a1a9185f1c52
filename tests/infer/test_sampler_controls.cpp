// The sampler's OpenAI controls against hand-computed logits: logit_bias added first, then the
// repetition penalty, then the frequency/presence penalties over the ids the sampler drew (never
// the prompt); a mask between process() and draw() (greedy picks the best allowed id, sampling
// never draws a masked one, a bias cannot lift a masked id); temperature applies to the biased
// logits; RNG streams; validate()'s messages for the new fields.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/assert.h"
#include "infer/sampler.h"

using namespace zaya;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

std::string message_of(const SamplingParams& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "(valid)";
}

}  // namespace

TEST(SamplerControls, LogitBiasIsAddedBeforeTheRepetitionPenalty) {
  SamplingParams p = greedy_params();
  p.logit_bias = {{2, 3.0f}, {0, -1.0f}, {0, -0.5f}};  // id 0 listed twice: both apply
  Sampler plain(p);
  std::vector<float> l = {1.0f, 2.0f, 0.5f, -1.0f};
  EXPECT_EQ(plain.sample(l, {}), 2);
  EXPECT_EQ(l, (std::vector<float>{-0.5f, 2.0f, 3.5f, -1.0f}));

  // With the CTRL penalty on id 2: (0.5 + 3) / 2 = 1.75 (bias first), not 0.5 / 2 + 3 = 3.25.
  p.repetition_penalty = 2.0;
  Sampler pen(p);
  l = {1.0f, 2.0f, 0.5f, -1.0f};
  EXPECT_EQ(pen.sample(l, std::vector<int32_t>{2}), 1);
  EXPECT_FLOAT_EQ(l[2], 1.75f);
  EXPECT_FLOAT_EQ(l[1], 2.0f);
}

TEST(SamplerControls, FrequencyAndPresencePenaltiesCountGeneratedIdsOnly) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  Sampler s(p);
  const std::vector<float> base = {3.0f, 2.5f, 0.0f, 1.0f};
  const std::vector<int32_t> prompt = {1, 1, 1, 3};  // never counted
  std::vector<int32_t> history = prompt;
  // Each step: the processed logits, by hand, and the greedy pick.
  const std::vector<std::vector<float>> want = {
      {3.0f, 2.5f, 0.0f, 1.0f},    // nothing generated yet: the prompt's ids are not penalised
      {2.25f, 2.5f, 0.0f, 1.0f},   // 0 once: 3 − 0.5 − 0.25
      {2.25f, 1.75f, 0.0f, 1.0f},  // 0 once, 1 once
      {1.75f, 1.75f, 0.0f, 1.0f},  // 0 twice: 3 − 2·0.5 − 0.25; the tie goes to id 0
      {1.25f, 1.75f, 0.0f, 1.0f},  // 0 three times
  };
  const std::vector<int32_t> picks = {0, 1, 0, 0, 1};
  for (size_t k = 0; k < want.size(); ++k) {
    std::vector<float> l = base;
    s.process(l, history);
    EXPECT_EQ(l, want[k]) << "step " << k;
    const int32_t id = s.draw(l);
    EXPECT_EQ(id, picks[k]) << "step " << k;
    history.push_back(id);
  }

  // Negative values reward repetition: 3 + 2 (frequency −2, once) + 1 (presence −1).
  p.frequency_penalty = -2;
  p.presence_penalty = -1;
  Sampler r(p);
  std::vector<float> l = base;
  EXPECT_EQ(r.sample(l, {}), 0);
  l = {3.0f, 5.5f, 0.0f, 1.0f};
  EXPECT_EQ(r.sample(l, {}), 0);
  EXPECT_FLOAT_EQ(l[0], 6.0f);
  EXPECT_FLOAT_EQ(l[1], 5.5f);
}

TEST(SamplerControls, PenaltiesOffLeaveLogitsUntouched) {
  Sampler s(greedy_params());
  for (int k = 0; k < 3; ++k) {
    std::vector<float> l = {0.25f, 1.0f, -2.0f};
    s.process(l, std::vector<int32_t>{1, 1});
    EXPECT_EQ(l, (std::vector<float>{0.25f, 1.0f, -2.0f}));
    EXPECT_EQ(s.draw(l), 1);
  }
}

TEST(SamplerControls, GreedyWithAMaskPicksTheBestAllowed) {
  const std::vector<float> base = {1.0f, 2.5f, 0.2f, -1.0f, 2.0f, 0.5f, -3.0f, 1.5f};
  SamplingParams p = greedy_params();
  p.logit_bias = {{1, 100.0f}};  // a bias cannot lift a masked id
  Sampler s(p);
  std::vector<float> l = base;
  s.process(l, {});
  l[1] = l[4] = -kInf;      // the mask: the two most likely are forbidden
  EXPECT_EQ(s.draw(l), 7);  // 1.5: the best of what is left
}

TEST(SamplerControls, SamplingNeverDrawsAMaskedId) {
  const std::vector<float> base = {1.0f, 2.5f, 0.2f, -1.0f, 2.0f, 0.5f, -3.0f, 1.5f};
  for (double t : {0.7, 1.0, 3.0}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 11;
    p.logit_bias = {{4, 50.0f}};
    Sampler s(p);
    std::vector<int> counts(base.size(), 0);
    for (int i = 0; i < 4000; ++i) {
      std::vector<float> l = base;
      s.process(l, {});
      for (int32_t banned : {1, 3, 4}) l[size_t(banned)] = -kInf;
      counts[size_t(s.draw(l))]++;
    }
    EXPECT_EQ(counts[1] + counts[3] + counts[4], 0) << "t " << t;
    EXPECT_GT(counts[7], 0) << "t " << t;  // the allowed ids are still drawn
    EXPECT_GT(counts[0], 0) << "t " << t;
  }
}

// Temperature divides the biased logits: draws follow softmax((l + b) / t) (a chi-square over
// 200000 draws; 99.99th percentile for 3 degrees of freedom is about 21).
TEST(SamplerControls, TemperatureAppliesToTheBiasedLogits) {
  const std::vector<float> l0 = {1.0f, 2.0f, 0.0f, -1.0f};
  const std::vector<float> bias = {0.0f, -1.5f, 1.0f, 0.5f};
  const double t = 0.8;
  SamplingParams p;
  p.temperature = t;
  p.seed = 5;
  for (int32_t i = 0; i < 4; ++i)
    if (bias[size_t(i)] != 0) p.logit_bias.emplace_back(i, bias[size_t(i)]);
  Sampler s(p);
  const int n = 200000;
  std::vector<double> counts(4, 0), want(4, 0);
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = l0;
    counts[size_t(s.sample(l, {}))]++;
  }
  double z = 0;
  for (size_t i = 0; i < 4; ++i) z += want[i] = std::exp((l0[i] + bias[i]) / t);
  double chi2 = 0;
  for (size_t i = 0; i < 4; ++i) {
    const double e = want[i] / z * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 25.0);
}

TEST(SamplerControls, StreamZeroIsTheDefaultAndStreamsDiffer) {
  SamplingParams p;
  p.seed = 3;
  const std::vector<float> base = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
  auto draws = [&](Sampler s) {
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) {
      std::vector<float> l = base;
      out.push_back(s.sample(l, {}));
    }
    return out;
  };
  EXPECT_EQ(draws(Sampler(p)), draws(Sampler(p, 0)));
  EXPECT_NE(draws(Sampler(p, 0)), draws(Sampler(p, 1)));
  EXPECT_NE(draws(Sampler(p, 1)), draws(Sampler(p, 2)));
}

TEST(SamplerControls, ValidateNamesTheNewFields) {
  auto field = [](auto edit) {
    SamplingParams p;
    edit(p);
    auto inv = p.check();
    return inv ? inv->field : std::string("(valid)");
  };
  EXPECT_EQ(field([](SamplingParams& p) {
              p.frequency_penalty = 2;
              p.presence_penalty = -2;
              p.logit_bias = {{5, -100.0f}, {0, 100.0f}};
              p.stop_ids = {0, 7};
              p.top_logprobs = 20;
            }),
            "(valid)");
  EXPECT_EQ(field([](SamplingParams& p) { p.frequency_penalty = 2.5; }), "frequency_penalty");
  EXPECT_EQ(field([](SamplingParams& p) { p.frequency_penalty = NAN; }), "frequency_penalty");
  EXPECT_EQ(field([](SamplingParams& p) { p.presence_penalty = -2.01; }), "presence_penalty");
  EXPECT_EQ(field([](SamplingParams& p) { p.logit_bias = {{1, 100.5f}}; }), "logit_bias");
  EXPECT_EQ(field([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }), "logit_bias");
  EXPECT_EQ(field([](SamplingParams& p) { p.logit_bias = {{1, NAN}}; }), "logit_bias");
  EXPECT_EQ(field([](SamplingParams& p) { p.stop_ids = {-3}; }), "stop_ids");
  EXPECT_EQ(field([](SamplingParams& p) { p.top_logprobs = 21; }), "top_logprobs");
  EXPECT_EQ(field([](SamplingParams& p) { p.top_logprobs = -2; }), "top_logprobs");
  SamplingParams p;
  p.presence_penalty = 3;
  EXPECT_NE(message_of(p).find("presence_penalty must be in [-2, 2]"), std::string::npos)
      << message_of(p);
  p = {};
  p.logit_bias = {{9, -101.0f}};
  EXPECT_NE(message_of(p).find("logit_bias for token id 9 must be in [-100, 100]"),
            std::string::npos)
      << message_of(p);
  p = {};
  p.top_logprobs = 40;
  EXPECT_NE(message_of(p).find("top_logprobs must be in [0, 20]"), std::string::npos)
      << message_of(p);
}
