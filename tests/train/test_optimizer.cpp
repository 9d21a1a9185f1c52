// Optimizer pieces: AdamW and Muon single steps against scalar references, schedules, clipping,
// the non-finite skip, the balancing-bias update, grouping and state save/restore.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "model/model.h"
#include "ops/ops.h"
#include "test_util.h"
#include "train/balance.h"
#include "train/optimizer.h"
#include "train/schedule.h"

using namespace zaya;
using namespace zaya::test;

namespace {

Model tiny_model() {
  return Model::load_dir(std::string(ZAYA_TEST_FIXTURES) + "/model/tiny_a");
}

// Random gradients into every trainable tensor (buffers keep zero gradients).
void random_grads(Model& m, uint64_t seed, double scale = 0.1) {
  m.zero_grads();
  for (const ParamSpec& s : m.layout().specs) {
    if (!s.trainable()) continue;
    std::vector<float> g = randn<float>(size_t(s.numel()), seed++, scale);
    std::memcpy(m.grads() + s.offset, g.data(), g.size() * 4);
  }
}

// Routing counts with the given per-layer class counts (other layers: none).
RoutingCounts counts_of(const Model& m, const std::map<int64_t, std::vector<double>>& per_layer) {
  RoutingCounts c(m.config());
  for (const auto& [layer, k] : per_layer) {
    const std::span<double> dst = c.layer(layer);
    EXPECT_EQ(dst.size(), k.size());
    std::copy(k.begin(), k.end(), dst.begin());
  }
  return c;
}

std::vector<float> snapshot(const Model& m) {
  return std::vector<float>(m.params(), m.params() + m.layout().total);
}

}  // namespace

TEST(AdamW, ThreeStepsMatchTheScalarReference) {
  const int64_t n = 37;
  std::vector<float> w = randn<float>(n, 1), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> wr(w.begin(), w.end()), mr(n, 0.0), vr(n, 0.0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  for (int64_t t = 1; t <= 3; ++t) {
    const std::vector<float> g = randn<float>(n, 10 + uint64_t(t));
    std::vector<float> gm = g;
    ops::adamw_update(Tensor(w.data(), {n}), Tensor(gm.data(), {n}), Tensor(m.data(), {n}),
                      Tensor(v.data(), {n}), ops::AdamWParams{lr, b1, b2, eps, wd, t});
    for (int64_t i = 0; i < n; ++i) {  // torch.optim.AdamW
      wr[i] *= 1 - lr * wd;
      mr[i] = b1 * mr[i] + (1 - b1) * g[i];
      vr[i] = b2 * vr[i] + (1 - b2) * double(g[i]) * g[i];
      const double mh = mr[i] / (1 - std::pow(b1, t)), vh = vr[i] / (1 - std::pow(b2, t));
      wr[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
  expect_close(w, wr, kOpAbs, kOpRel, "adamw weights");
  expect_close(m, mr, 1e-7, 1e-6, "adamw m");
}

// Steps are 0-based in lr(k); the comments use the step line's s = k + 1 of S, warm-up W.
TEST(Schedule, WarmupCosineWsdConstant) {
  Schedule s{ScheduleKind::Cosine, 10, 110, 1.0, 0.1, 0.2};
  EXPECT_DOUBLE_EQ(s.lr(0), 0.1);  // s = 1: linear warm-up, peak/W
  EXPECT_DOUBLE_EQ(s.lr(4), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(9), 1.0);  // s = W: the peak, once
  EXPECT_NEAR(s.lr(10), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 100)), 1e-15);  // s = W + 1
  EXPECT_LT(s.lr(10), 1.0);
  EXPECT_NEAR(s.lr(59), 0.55, 1e-12);  // s = 60, halfway: (peak + floor)/2
  EXPECT_DOUBLE_EQ(s.lr(109), 0.1);    // s = S: the floor on the last step
  EXPECT_DOUBLE_EQ(s.lr(1000), 0.1);   // and beyond
  for (int64_t t = 9; t < 109; ++t) EXPECT_GT(s.lr(t), s.lr(t + 1));

  Schedule w{ScheduleKind::Wsd, 10, 110, 1.0, 0.0, 0.2};  // decay over the last D = 22 steps
  EXPECT_DOUBLE_EQ(w.lr(0), 0.1);                         // s = 1
  EXPECT_DOUBLE_EQ(w.lr(9), 1.0);                         // s = W
  EXPECT_DOUBLE_EQ(w.lr(10), 1.0);                        // s = W + 1: stable
  EXPECT_DOUBLE_EQ(w.lr(87), 1.0);                        // s = S − D = 88: the last at the peak
  EXPECT_NEAR(w.lr(88), 1.0 - 1.0 / 22, 1e-15);           // s = 89: decay begins
  EXPECT_NEAR(w.lr(98), 0.5, 1e-12);                      // s = 99: halfway
  EXPECT_DOUBLE_EQ(w.lr(109), 0.0);                       // s = S: the floor
  EXPECT_DOUBLE_EQ(w.lr(200), 0.0);

  Schedule c{ScheduleKind::Constant, 4, 100, 2.0, 0.0, 0.0};
  EXPECT_DOUBLE_EQ(c.lr(1), 1.0);
  EXPECT_DOUBLE_EQ(c.lr(3), 2.0);
  EXPECT_DOUBLE_EQ(c.lr(1000), 2.0);
}

// A reported case: lr 0.02 → 0.002, warm-up 3, 10 steps. The peak is reached once
// (step 3) and the last step runs at min_lr; WSD's short decay also ends at the floor.
TEST(Schedule, PeakOnceAndTheFloorOnTheLastStep) {
  for (ScheduleKind kind : {ScheduleKind::Cosine, ScheduleKind::Wsd}) {
    const Schedule s{kind, 3, 10, 0.02, 0.002, 1.0};  // WSD: decays over every step after W
    EXPECT_NEAR(s.lr(0), 0.02 / 3, 1e-17);
    EXPECT_NEAR(s.lr(1), 0.04 / 3, 1e-17);
    EXPECT_DOUBLE_EQ(s.lr(2), 0.02);
    EXPECT_LT(s.lr(3), 0.02) << "step W + 1 must be below the peak";
    EXPECT_DOUBLE_EQ(s.lr(9), 0.002);
    for (int64_t k = 2; k < 9; ++k) EXPECT_GT(s.lr(k), s.lr(k + 1)) << k;
  }
  // WSD with a decay shorter than the run: stable, then linear over the last D = 2 steps.
  const Schedule w{ScheduleKind::Wsd, 3, 10, 0.02, 0.002, 0.2};
  EXPECT_DOUBLE_EQ(w.lr(7), 0.02);  // s = 8 = S − D
  EXPECT_NEAR(w.lr(8), 0.011, 1e-15);
  EXPECT_DOUBLE_EQ(w.lr(9), 0.002);
}

// The one gradient clipping, seen through the optimizer: with AdamW and an ε far above √v̂ the
// first update is −lr·ĝ/ε, linear in the (clipped) gradient ĝ, so it shows the factor applied.
TEST(GradClip, TheOptimizerClipsToTheMaxNormAndReturnsThePreClipNorm) {
  for (double max_norm : {0.5, 1e6, 0.0}) {
    Model m = tiny_model();
    random_grads(m, 1);
    double want = 0;
    for (const ParamSpec& s : m.layout().specs)
      if (s.trainable())
        for (int64_t i = 0; i < s.numel(); ++i)
          want += double(m.grads()[s.offset + i]) * m.grads()[s.offset + i];
    want = std::sqrt(want);
    ASSERT_GT(want, 0.5);
    OptimConfig cfg;
    cfg.use_muon = false;
    cfg.weight_decay = 0;
    cfg.adam_eps = 1e3;  // ≫ |g| ≈ 0.1: Δw = −lr·ĝ/(|ĝ| + ε) ≈ −lr·ĝ/ε within 1e-4
    cfg.grad_clip = max_norm;
    Optimizer opt(m, cfg);
    const std::vector<float> w0 = snapshot(m);
    const double lr = 1e3;
    EXPECT_NEAR(opt.step(m, lr), want, 1e-12 * want);  // the pre-clip norm
    const double factor = max_norm > 0 && want > max_norm ? max_norm / want : 1.0;
    double moved = 0;  // ‖Δw‖·ε/lr = ‖ĝ‖
    for (const ParamSpec& s : m.layout().specs)
      if (s.trainable())
        for (int64_t i = 0; i < s.numel(); ++i) {
          const double d =
              (double(m.params()[s.offset + i]) - w0[s.offset + i]) * cfg.adam_eps / lr;
          moved += d * d;
        }
    EXPECT_NEAR(std::sqrt(moved), want * factor, 2e-3 * want * factor) << "max_norm " << max_norm;
  }
}

TEST(Optimizer, NonFiniteGradientSkipsTheStep) {
  Model m = tiny_model();
  Optimizer opt(m, OptimConfig{});
  random_grads(m, 2);
  ASSERT_TRUE(std::isfinite(opt.step(m, 1e-3)));
  ASSERT_EQ(opt.steps(), 1);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    random_grads(m, 3);
    m.grads()[m.layout().at("model.final_norm.weight").offset] = bad;
    const std::vector<float> before = snapshot(m);
    std::vector<std::vector<float>> state;
    for (auto& [name, t] : opt.state_tensors())
      state.emplace_back(t.ptr<float>(), t.ptr<float>() + t.numel());
    const double norm = opt.step(m, 1e-3);
    EXPECT_FALSE(std::isfinite(norm));  // the caller's signal: skip and count
    EXPECT_EQ(opt.steps(), 1);
    EXPECT_EQ(before, snapshot(m));
    size_t k = 0;
    for (auto& [name, t] : opt.state_tensors())
      EXPECT_EQ(0, std::memcmp(state[k++].data(), t.data, t.nbytes())) << name;
  }
}

TEST(Optimizer, FirstStepOfEachGroup) {
  Model m = tiny_model();
  OptimConfig cfg;
  cfg.grad_clip = 0;
  Optimizer opt(m, cfg);
  random_grads(m, 4);
  const std::vector<float> w0 = snapshot(m);
  const double lr = 0.01;
  opt.step(m, lr);
  auto check_adam = [&](const std::string& name, bool decay) {
    const ParamSpec& s = m.layout().at(name);
    for (int64_t i = 0; i < s.numel(); ++i) {
      const double g = m.grads()[s.offset + i], w = w0[s.offset + i];
      // first Adam step: m̂ = g, v̂ = g² → Δ = lr·g/(|g| + ε)
      const double want =
          w * (1 - lr * (decay ? cfg.weight_decay : 0)) - lr * g / (std::fabs(g) + 1e-8);
      ASSERT_NEAR(m.params()[s.offset + i], want, 1e-6) << name << "[" << i << "]";
    }
  };
  check_adam("model.embed_tokens.weight", true);
  check_adam("model.final_norm.weight", false);
  check_adam("model.layers.0.self_attn.qkv.conv_qk.1.weight", false);
  for (const std::string name :
       {"model.layers.0.self_attn.o_proj.weight",
        "model.layers.1.zaya_block.experts.local_experts.2.linear_fc1.weight",
        "model.layers.3.zaya_block.router.down_proj.weight"}) {
    const ParamSpec& s = m.layout().at(name);
    const int64_t r = s.shape[0], c = s.shape[1];
    // buf = g; nesterov u = g + 0.95·g; O = NS(u)
    std::vector<float> u(size_t(r * c)), o(u.size());
    for (int64_t i = 0; i < r * c; ++i) u[i] = m.grads()[s.offset + i] * 1.95f;
    ops::newton_schulz(Tensor(o.data(), {r, c}), Tensor(u.data(), {r, c}), 5, false);
    const double scale = 0.2 * std::sqrt(double(std::max(r, c)));
    for (int64_t i = 0; i < r * c; ++i) {
      const double w = w0[s.offset + i];
      ASSERT_NEAR(m.params()[s.offset + i], w - lr * (scale * o[i] + cfg.weight_decay * w), 1e-6)
          << name << "[" << i << "]";
    }
  }
  // buffers untouched by step()
  for (const ParamSpec& s : m.layout().specs) {
    if (s.trainable()) continue;
    for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(m.params()[s.offset + i], w0[s.offset + i]);
  }
}

TEST(Optimizer, BalancingBiasUpdate) {
  Model m = tiny_model();
  Optimizer opt(m, OptimConfig{});
  const std::string name = "model.layers.1.zaya_block.router.balancing_biases";
  const ParamSpec& s = m.layout().at(name);
  ASSERT_EQ(s.numel(), 5);  // 4 real experts + skip
  const std::vector<float> b0(m.params() + s.offset, m.params() + s.offset + 5);
  // expert 0 over-used (10/20 > 1/4), 1 and 2 under-used, 3 exactly balanced, 4 tokens skipped
  opt.update_balancing_biases(m, counts_of(m, {{1, {10, 2, 2, 5, 1}}}));
  const float* b = m.params() + s.offset;
  // first AdamW step moves each bias by lr·sign(e) (up to ε)
  EXPECT_NEAR(b[0], b0[0] - 1e-3, 1e-7);
  EXPECT_NEAR(b[1], b0[1] + 1e-3, 1e-7);
  EXPECT_NEAR(b[2], b0[2] + 1e-3, 1e-7);
  EXPECT_NEAR(b[3], b0[3], 1e-9);  // e = 0.25 − 1/4 = 0
  EXPECT_EQ(b[4], b0[4]);          // the skip class stays as stored
  // layer 3 routed no token: unchanged
  const ParamSpec& s3 = m.layout().at("model.layers.3.zaya_block.router.balancing_biases");
  const Model fresh = tiny_model();
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(m.params()[s3.offset + i], fresh.params()[s3.offset + i]);
  // moments are F32 state, one per real expert; the update count is kept
  bool found = false;
  for (auto& [n, t] : opt.state_tensors()) {
    EXPECT_EQ(t.dtype, DType::F32) << n;
    if (n == name + ".adam_m") {
      found = true;
      EXPECT_EQ(t.numel(), 4);
      EXPECT_NEAR(t.ptr<float>()[0], 0.1 * (0.5 - 0.25), 1e-7);
    }
    if (n == "balance.steps") {
      EXPECT_EQ(t.ptr<float>()[1], 1.0f);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(opt.steps(), 0);  // the bias update is not an optimizer step
}

TEST(Optimizer, RoutingCountsCountChoicesPerLayer) {
  Model m = tiny_model();
  Activations a(m.config(), 1, 4);
  for (auto& l : a.layers)
    if (l.moe.choice.defined()) {
      int32_t* c = l.moe.choice.ptr<int32_t>();
      c[0] = 0, c[1] = 4, c[2] = 0, c[3] = 2;
    }
  RoutingCounts counts(m.config());
  EXPECT_EQ(counts.flat().size(), 10u);  // two MoE layers of 4 experts + skip
  counts.add(m.config(), a);
  counts.add(m.config(), a);  // summed over micro-batches
  for (int64_t i : {1, 3}) {
    const auto k = counts.layer(i);
    EXPECT_EQ(std::vector<double>(k.begin(), k.end()), (std::vector<double>{4, 0, 2, 0, 2}));
  }
  EXPECT_TRUE(counts.layer(0).empty());
  counts.clear();
  EXPECT_EQ(counts.layer(1)[0], 0.0);
}

TEST(Optimizer, StateRestoreContinuesBitwise) {
  for (bool use_muon : {true, false}) {
    Model a = tiny_model(), b = tiny_model();
    OptimConfig cfg;
    cfg.use_muon = use_muon;
    Optimizer oa(a, cfg);
    for (int k = 0; k < 2; ++k) {
      random_grads(a, 10 + k, 1.0);
      oa.step(a, 1e-2);
      oa.update_balancing_biases(a, counts_of(a, {{1, {3, 1, 0, 2, 4}}, {3, {1, 1, 1, 1, 0}}}));
    }
    // "checkpoint": weights + optimizer state + step count into a fresh model and optimizer
    std::memcpy(b.params(), a.params(), a.layout().total * 4);
    Optimizer ob(b, cfg);
    auto sa = oa.state_tensors(), sb = ob.state_tensors();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      ASSERT_EQ(sa[i].first, sb[i].first);
      std::memcpy(sb[i].second.data, sa[i].second.data, sa[i].second.nbytes());
    }
    ob.set_steps(oa.steps());
    random_grads(a, 20, 1.0);
    random_grads(b, 20, 1.0);
    oa.step(a, 1e-2);
    ob.step(b, 1e-2);
    oa.update_balancing_biases(a, counts_of(a, {{1, {3, 1, 0, 2, 4}}}));
    ob.update_balancing_biases(b, counts_of(b, {{1, {3, 1, 0, 2, 4}}}));
    EXPECT_EQ(snapshot(a), snapshot(b)) << "use_muon " << use_muon;
    EXPECT_GT(oa.state_bytes(), 0u);
  }
}
