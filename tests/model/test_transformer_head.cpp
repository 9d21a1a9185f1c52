// Training's forward (model_forward_and_head_backward: the LM head's backward in the same pass,
// ops::lm_head_xent_forward_backward) against model_forward + model_backward alone: the same loss
// and every gradient within f32 rounding, over two micro-batches accumulated into the same
// gradients (as Trainer::train_step does), with row blocks of the head that do not divide the
// tokens; the same bits on 1 and 2 threads; kept logits unchanged; the trainer's form with the loss
// sum in a tensor the same bits; a backward with another grad scale refused.
#include <omp.h>

#include <cmath>
#include <vector>

#include "model/activations.h"
#include "model/random_micro_batch.h"
#include "model/transformer.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr int64_t kB = 3, kT = 100;  // N = 300 tokens: the head's blocks of 256 rows and a partial

Model tiny_model() {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(7, 0.05);
  return m;
}

// Micro-batch k's ids and targets (one target in seven ignored).
void micro_batch(int64_t k, int64_t V, std::vector<int32_t>& ids, std::vector<int32_t>& targets) {
  random_micro_batch(uint64_t(101 + k), kB * kT, V, 7, 3, ids, targets);
}

struct Grads {
  double loss = 0;
  std::vector<float> g;
};

// Two micro-batches into one zeroed gradient, the mean loss; fused: the trainer's path.
Grads train_two_micro_batches(Model& m, bool fused, int threads = 0) {
  const int keep = omp_get_max_threads();
  if (threads) omp_set_num_threads(threads);
  Activations a(m.config(), kB, kT);
  const double scale = 1.0 / double(2 * kB * kT);
  std::vector<int32_t> ids, targets;
  Grads r;
  m.zero_grads();
  for (int64_t k = 0; k < 2; ++k) {
    micro_batch(k, m.config().vocab_size, ids, targets);
    r.loss += (fused ? model_forward_and_head_backward(m, a, ids.data(), targets.data(), scale)
                     : model_forward(m, a, ids.data(), targets.data())) /
              2;
    EXPECT_EQ(a.head_grad_done, fused);
    model_backward(m, a, scale);
    EXPECT_FALSE(a.head_grad_done);
  }
  if (threads) omp_set_num_threads(keep);
  r.g.assign(m.grads(), m.grads() + m.layout().total);
  return r;
}

}  // namespace

TEST(HeadGradInForward, SameGradientsAsForwardThenBackward) {
  Model m = tiny_model();
  const Grads two = train_two_micro_batches(m, false);
  const Grads one = train_two_micro_batches(m, true);
  EXPECT_NEAR(one.loss, two.loss, 1e-6 * std::fabs(two.loss));
  int checked = 0;
  for (const ParamSpec& s : m.layout().specs) {
    if (!s.trainable()) continue;
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < s.numel(); ++i) {
      const double a = one.g[size_t(s.offset + i)], b = two.g[size_t(s.offset + i)];
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    // f32 rounding of the head (two-pass softmax, one logits product) carried through backward.
    EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-12) << s.name;
    ++checked;
  }
  EXPECT_GT(checked, 10);
  // Not equal bit for bit: the test would not see the fused path if the trainer did not use it.
  EXPECT_NE(one.g, two.g);
}

TEST(HeadGradInForward, SameBitsOnOneAndTwoThreads) {
  Model m = tiny_model();
  const Grads a = train_two_micro_batches(m, true, 1);
  const Grads b = train_two_micro_batches(m, true, 2);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.g, b.g);
}

TEST(HeadGradInForward, KeptLogitsAreUnchanged) {
  Model m = tiny_model();
  m.zero_grads();
  Activations plain(m.config(), kB, kT, Device::Cpu, true),
      fused(m.config(), kB, kT, Device::Cpu, true);
  std::vector<int32_t> ids, targets;
  micro_batch(0, m.config().vocab_size, ids, targets);
  model_forward(m, plain, ids.data(), targets.data());
  model_forward_and_head_backward(m, fused, ids.data(), targets.data(), 0.5);
  const int64_t n = plain.logits.numel();
  const std::vector<float> lp(plain.logits.ptr<float>(), plain.logits.ptr<float>() + n);
  const std::vector<float> lf(fused.logits.ptr<float>(), fused.logits.ptr<float>() + n);
  EXPECT_EQ(lp, lf);
}

// The trainer's form (loss sum left in a tensor, copies issued asynchronously) is the same pass:
// on the CPU the same gradient bits, and the sum over the scored positions is the mean's numerator.
TEST(HeadGradInForward, LossTensorFormIsTheSamePass) {
  Model m = tiny_model();
  const Grads mean_form = train_two_micro_batches(m, true);
  Activations a(m.config(), kB, kT);
  const double scale = 1.0 / double(2 * kB * kT);
  std::vector<int32_t> ids, targets;
  std::vector<double> sums(2, -1.0);
  double loss = 0;
  m.zero_grads();
  for (int64_t k = 0; k < 2; ++k) {
    micro_batch(k, m.config().vocab_size, ids, targets);
    model_forward_and_head_backward(m, a, ids.data(), targets.data(), scale,
                                    Tensor(&sums[size_t(k)], {1}));
    const int64_t scored = ops::count_scored(Tensor(targets.data(), {kB * kT}));
    EXPECT_LT(scored, kB * kT);  // some targets are ignored: the divisor is not B·T
    loss += sums[size_t(k)] / double(scored) / 2;
    model_backward(m, a, scale);
  }
  EXPECT_EQ(loss, mean_form.loss);
  EXPECT_EQ(std::vector<float>(m.grads(), m.grads() + m.layout().total), mean_form.g);
}

TEST(HeadGradInForwardDeathTest, BackwardWithAnotherScaleAsserts) {
  Model m = tiny_model();
  m.zero_grads();
  Activations a(m.config(), kB, kT);
  std::vector<int32_t> ids, targets;
  micro_batch(0, m.config().vocab_size, ids, targets);
  model_forward_and_head_backward(m, a, ids.data(), targets.data(), 0.5);
  EXPECT_DEATH(model_backward(m, a, 0.25), "grad_scale");
}
