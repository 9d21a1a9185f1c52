// eval/perplexity: the strided window plan scores every token exactly once with at least
// context − stride tokens before it; the strided loss equals a direct computation (one full
// forward when the stream fits one window; one forward per token over its own window's context
// when windows overlap), for any batching; the default context of a model directory.
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/rng.h"
#include "eval/perplexity.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"

using namespace zaya;
using zaya::test::expect_error;
using zaya::test::ScratchDir;

namespace {

Model tiny_model() {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(5, 0.05);
  return m;
}

std::vector<int32_t> random_stream(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[size_t(i)] = int32_t(splitmix64(seed * 1000003 + uint64_t(i)) % uint64_t(vocab));
  return ids;
}

// −log p(stream[j] | stream[b … j−1]): one forward over the context alone, only its last position
// scored.
double token_loss(const Model& m, const std::vector<int32_t>& stream, int64_t b, int64_t j) {
  const int64_t T = j - b;
  Activations a(m.config(), 1, T);
  std::vector<int32_t> targets(size_t(T), -1);
  targets.back() = stream[size_t(j)];
  return model_forward(m, a, stream.data() + b, targets.data());
}

}  // namespace

TEST(PlanWindows, SmallCasesPinned) {
  // 11 tokens (10 targets), context 4, stride 2: the last window ends at the last token.
  EXPECT_EQ(plan_windows(11, 4, 2),
            (std::vector<EvalWindow>{{0, 4, 0}, {2, 4, 2}, {4, 4, 2}, {6, 4, 2}}));
  // 10 tokens, context 4, stride 3: the last window moves back from 6 to 5.
  EXPECT_EQ(plan_windows(10, 4, 3), (std::vector<EvalWindow>{{0, 4, 0}, {3, 4, 1}, {5, 4, 2}}));
  // Fits one window: n − 1 inputs.
  EXPECT_EQ(plan_windows(5, 8, 4), (std::vector<EvalWindow>{{0, 4, 0}}));
  EXPECT_EQ(plan_windows(9, 8, 4), (std::vector<EvalWindow>{{0, 8, 0}}));
  EXPECT_EQ(plan_windows(2, 1, 1), (std::vector<EvalWindow>{{0, 1, 0}}));
}

TEST(PlanWindows, EveryTokenScoredOnceWithEnoughContext) {
  for (const int64_t n : {2, 3, 17, 18, 19, 100, 1001})
    for (const int64_t context : {1, 2, 16, 17, 64})
      for (const int64_t stride : {int64_t(1), context / 2, context - 1, context}) {
        if (stride < 1) continue;
        const auto plan = plan_windows(n, context, stride);
        std::vector<int> scored(size_t(n), 0);
        for (size_t k = 0; k < plan.size(); ++k) {
          const EvalWindow& w = plan[k];
          EXPECT_EQ(w.length, std::min(context, n - 1));
          EXPECT_GE(w.begin, 0);
          EXPECT_LE(w.begin + w.length, n - 1);  // its last target is a stream token
          EXPECT_LT(w.first_scored, w.length);   // every window scores something
          for (int64_t i = w.first_scored; i < w.length; ++i) {
            ++scored[size_t(w.begin + i + 1)];
            // A later window's scored tokens see at least context − stride tokens before them.
            if (k > 0) {
              EXPECT_GE(i + 1, context - stride + 1);
            }
          }
        }
        EXPECT_EQ(scored[0], 0);
        for (int64_t j = 1; j < n; ++j)
          ASSERT_EQ(scored[size_t(j)], 1)
              << "token " << j << " n " << n << " context " << context << " stride " << stride;
        if (n - 1 > context) {
          EXPECT_EQ(int64_t(plan.size()), 1 + (n - 1 - context + stride - 1) / stride);
        }
      }
}

TEST(PlanWindows, Errors) {
  expect_error([] { plan_windows(1, 8, 4); }, {"1 token(s)", "at least 2"});
  expect_error([] { plan_windows(10, 0, 1); }, {"context 0"});
  expect_error([] { plan_windows(10, 8, 0); }, {"stride 0"});
  expect_error([] { plan_windows(10, 8, 9); }, {"stride 9", "context 8"});
}

// A stream that fits one window: the strided sum is the sum of the per-token losses of one
// forward over the whole stream (its last position predicts nothing).
TEST(StridedLoss, OneWindowIsOneFullForward) {
  const Model m = tiny_model();
  const int64_t n = 41;
  const auto stream = random_stream(n, m.config().vocab_size, 1);
  const PerplexityResult r = strided_loss(m, stream, 64, 32, 4);
  EXPECT_EQ(r.tokens, n - 1);
  EXPECT_EQ(r.windows, 1);
  Activations a(m.config(), 1, n);
  const double mean = model_forward(m, a, stream.data());  // positions 0 … n−2 scored
  EXPECT_NEAR(r.loss_sum, mean * double(n - 1), 1e-9 * double(n)) << r.loss_sum;
  EXPECT_NEAR(r.loss(), mean, 1e-12 + 1e-9);
  EXPECT_DOUBLE_EQ(r.perplexity(), std::exp(r.loss()));
}

// Overlapping windows: each token's loss is the one it gets from its own context (the window
// that scores it), computed directly one token at a time; batching changes nothing but rounding.
TEST(StridedLoss, OverlappingWindowsMatchPerTokenForwards) {
  const Model m = tiny_model();
  const int64_t n = 90, context = 16, stride = 5;
  const auto stream = random_stream(n, m.config().vocab_size, 2);
  double want = 0;
  // Independently of plan_windows: window k starts at min(k·stride, n−1−context); token j is
  // scored by the first window whose last target (begin + context) reaches it.
  for (int64_t j = 1; j < n; ++j) {
    int64_t b = 0;
    for (int64_t k = 0;; ++k) {
      b = std::min(k * stride, n - 1 - context);
      if (b + context >= j) break;
    }
    want += token_loss(m, stream, b, j);
  }
  int64_t calls = 0;
  for (const int64_t rows : {1, 3, 100}) {
    const PerplexityResult r =
        strided_loss(m, stream, context, stride, rows, [&](int64_t done, int64_t total) {
          ++calls;
          EXPECT_LE(done, total);
        });
    EXPECT_EQ(r.tokens, n - 1);
    EXPECT_EQ(r.windows, 1 + (n - 1 - context + stride - 1) / stride);
    EXPECT_NEAR(r.loss_sum, want, 1e-5 * want) << "rows " << rows;
  }
  EXPECT_GT(calls, 0);
  // Non-overlapping windows score tokens with less context: a different (here: any) sum.
  const PerplexityResult flat = strided_loss(m, stream, context, context, 8);
  EXPECT_EQ(flat.tokens, n - 1);
  EXPECT_NE(flat.loss_sum, want);
}

TEST(DefaultContext, TrainedLengthElseCappedPositions) {
  ScratchDir dir;
  ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  c.max_position_embeddings = 2048;
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "tokenizer_config.json", std::ios::binary) << text;
  };
  // No tokenizer_config.json: max_position_embeddings, capped.
  EXPECT_EQ(default_context(dir.path, c).context, 2048);
  c.max_position_embeddings = 32768;
  ContextChoice d = default_context(dir.path, c);
  EXPECT_EQ(d.context, kDefaultContextCap);
  EXPECT_NE(d.why.find("max_position_embeddings 32768, capped at 2048"), std::string::npos)
      << d.why;
  // The trained length the trainer records.
  write(R"({"model_max_length": 128, "tokenizer_class": "PreTrainedTokenizerFast"})");
  d = default_context(dir.path, c);
  EXPECT_EQ(d.context, 128);
  EXPECT_NE(d.why.find("model_max_length"), std::string::npos) << d.why;
  // Longer than the model allows: capped at max_position_embeddings.
  c.max_position_embeddings = 64;
  EXPECT_EQ(default_context(dir.path, c).context, 64);
  // Hugging Face's "no limit" sentinel is not a length.
  c.max_position_embeddings = 512;
  write(R"({"model_max_length": 1e30})");
  EXPECT_EQ(default_context(dir.path, c).context, 512);
  write("{not json");
  expect_error([&] { default_context(dir.path, c); }, {"tokenizer_config.json", "not valid JSON"});
}
