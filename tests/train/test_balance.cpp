// Training semantics (docs/training.md), checked from outside the trainer:
// - the model reads seq_len tokens of each (seq_len + 1)-token window and the balancing biases
//   follow docs/model.md §10 over exactly rows·seq_len routed tokens: 10 Muon steps on a dataset
//   whose every step sees the same rows, each step's biases recomputed here from the weights the
//   step started from (a forward of our own over the same rows, counts, the AdamW formula in
//   double);
// - train.eval_batches = 0 switches evaluation off; an empty validation split is reported as such.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/checkpoint.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "io/safetensors.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/param_names.h"
#include "model/transformer.h"
#include "test_util.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSeqLen = 16;

// A few documents (byte tokens, ids < 256 < V = 512 of tiny.json), no validation split.
std::string make_small_dataset(const ScratchDir& dir) {
  fs::create_directories(dir / "docs");
  for (int d = 0; d < 3; ++d) {
    std::ofstream f(dir / ("docs/" + std::to_string(d) + ".txt"));
    for (int i = 0; i < 4; ++i) f << "the quick brown " << char('a' + (d * 5 + i) % 26) << " ";
  }
  return byte_shards(dir, 0);
}

TrainConfig balance_run(const ScratchDir& dir, const std::string& shards, int64_t rows) {
  TrainConfig c;
  c.model_config = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";
  c.dataset = shards;
  c.seq_len = kSeqLen;
  c.micro_batch = rows;  // every window in every step
  c.grad_accum = 1;
  c.steps = 10;
  c.optim.warmup = 2;
  c.optim.lr = 2e-2;
  c.optim.min_lr = 2e-3;
  c.optim.use_muon = true;
  c.optim.balance_lr = 2e-2;  // large enough that the biases steer the routing within 10 steps
  c.eval_batches = 0;
  c.log_every = 100;
  c.checkpoint_dir = dir / "ckpt";
  c.checkpoint_every = 1;
  c.keep_last = 0;
  c.async_checkpoint = false;
  return c;
}

}  // namespace

TEST(TrainingSemantics, BalancingBiasesFollowTheSpecOverRowsTimesSeqLenTokens) {
  ScratchDir dir;
  const std::string shards = make_small_dataset(dir);
  TokenLoader probe(shards, "train", kSeqLen + 1, 1234);
  const int64_t rows = probe.total_windows();
  ASSERT_GE(rows, 3);
  const TrainConfig cfg = balance_run(dir, shards, rows);
  const TrainSummary s = run_training(cfg, TrainOptions{.quiet = true});
  ASSERT_EQ(s.steps_done, 10);
  ASSERT_EQ(s.skipped, 0);
  EXPECT_EQ(s.val_status, "evaluation off (train.eval_batches = 0)");
  EXPECT_TRUE(std::isnan(s.first_val_loss));

  // The weights before step 1: the trainer's random init (same seed and std).
  Model m(load_config(cfg.model_config));
  m.init_random(uint64_t(cfg.seed), cfg.init_std);
  const ZayaConfig& c = m.config();
  TokenLoader data(shards, "train", kSeqLen + 1, uint64_t(cfg.seed));
  Activations a(c, rows, kSeqLen);
  std::vector<int32_t> inputs(size_t(rows * kSeqLen)), targets(inputs.size());

  // Adam moments of the real experts' biases, per MoE layer, kept in double here.
  std::map<int64_t, std::vector<double>> mom1, mom2;
  double biggest_move = 0;
  int64_t moe_layers = 0;
  for (int64_t step = 1; step <= 10; ++step) {
    data.next_batch(inputs.data(), targets.data(), rows);
    model_forward(m, a, inputs.data(), targets.data());
    const Model after =
        Model::load_dir(cfg.checkpoint_dir + "/" + checkpoint_dir_name(step) + "/model");
    moe_layers = 0;
    for (int64_t i = 0; i < c.num_layers(); ++i) {
      if (c.is_attention(i)) continue;
      ++moe_layers;
      const int64_t E = c.num_experts(i), K = c.router_classes(i);
      std::vector<int64_t> counts(size_t(K), 0);
      const int32_t* choice = a.layers[size_t(i)].moe.choice.ptr<int32_t>();
      for (int64_t t = 0; t < rows * kSeqLen; ++t) ++counts[size_t(choice[t])];
      int64_t routed = 0;
      for (int64_t k : counts) routed += k;
      ASSERT_EQ(routed, rows * kSeqLen);  // N_tok = rows·seq_len, the skip class included

      const std::string name = names::layer(i).biases;
      const Tensor before_t = m.param(name), after_t = after.param(name);
      const float* before = before_t.ptr<float>();
      const float* got = after_t.ptr<float>();
      auto& m1 = mom1[i];
      auto& m2 = mom2[i];
      m1.resize(size_t(E), 0.0), m2.resize(size_t(E), 0.0);
      const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
      for (int64_t e = 0; e < E; ++e) {
        const double g = double(counts[size_t(e)]) / double(rows * kSeqLen) - 1.0 / double(E);
        m1[size_t(e)] = b1 * m1[size_t(e)] + (1 - b1) * g;
        m2[size_t(e)] = b2 * m2[size_t(e)] + (1 - b2) * g * g;
        const double mh = m1[size_t(e)] / (1 - std::pow(b1, double(step)));
        const double vh = m2[size_t(e)] / (1 - std::pow(b2, double(step)));
        const double want = double(before[e]) - cfg.optim.balance_lr * mh / (std::sqrt(vh) + eps);
        EXPECT_NEAR(got[e], want, 2e-6) << "step " << step << " layer " << i << " expert " << e;
        biggest_move = std::max(biggest_move, std::fabs(double(got[e]) - double(before[e])));
      }
      EXPECT_EQ(got[E], -1.0f) << "the skip class's bias stays at −1";
    }
    std::copy(after.params(), after.params() + m.layout().total, m.params());
  }
  EXPECT_EQ(moe_layers, 2);
  EXPECT_GT(biggest_move, 1e-3) << "the biases never moved: the test would prove nothing";
}

TEST(TrainingSemantics, AnEmptyValidationSplitIsReportedAsSuch) {
  ScratchDir dir;
  const std::string shards = make_small_dataset(dir);
  TrainConfig cfg = balance_run(dir, shards, 2);
  cfg.steps = 2;
  cfg.eval_batches = 2;
  cfg.checkpoint_dir.clear();
  const TrainSummary s = run_training(cfg, TrainOptions{.quiet = true});
  EXPECT_EQ(s.val_status, "no validation split");
  EXPECT_TRUE(std::isnan(s.first_val_loss) && std::isnan(s.last_val_loss));
  EXPECT_TRUE(std::isfinite(s.last_loss));
}
