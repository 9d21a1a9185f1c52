// Activations stored in bf16 (ActivationStorage::BF16, train.activations; model/activations.h):
// which tensors become bf16 copies and what they cost, and that the model is exactly the f32 model
// with those tensors rounded to bf16 between its forward and backward: the same loss bits, and
// the gradients of an f32 run whose stashed tensors were rounded in place after the forward, bit
// for bit. Also: two micro-batches in a row (the working area reused), and the gradients' distance
// from the unrounded run's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/activations.h"
#include "model/random_micro_batch.h"
#include "model/transformer.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr int64_t kB = 2, kT = 48;

Model tiny_model() {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(11, 0.05);
  return m;
}

// The tensors model/activations.h keeps as bf16 copies, named here independently of the carving.
std::vector<Tensor> expected_stashed(const LayerActs& l, bool attention) {
  if (attention) {
    const AttentionActs& t = l.attn;
    return {l.x, t.u, t.y, t.z, t.q, t.k, t.qr, t.kr, t.p, t.v, t.att};
  }
  return {l.x, l.moe.f, l.moe.gu, l.moe.act};
}

void round_to_bf16_in_place(const Tensor& t) {
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
}

// Micro-batch k (one target in nine ignored).
void micro_batch(int64_t k, int64_t V, std::vector<int32_t>& ids, std::vector<int32_t>& targets) {
  random_micro_batch(uint64_t(31 + k), kB * kT, V, 9, 4, ids, targets);
}

struct Passes {
  std::vector<double> losses;
  std::vector<float> grads;
};

// Two micro-batches accumulated as the trainer does; `round_f32` rounds an F32 run's stashed
// tensors in place between each forward and its backward.
Passes two_micro_batches(Model& m, ActivationStorage storage, bool round_f32 = false) {
  const ZayaConfig& c = m.config();
  Activations a(c, kB, kT, Device::Cpu, false, storage);
  std::vector<int32_t> ids, targets;
  Passes r;
  m.zero_grads();
  for (int64_t k = 0; k < 2; ++k) {
    micro_batch(k, c.vocab_size, ids, targets);
    r.losses.push_back(model_forward_and_head_backward(m, a, ids.data(), targets.data(), 0.01));
    if (round_f32)
      for (int64_t i = 0; i < c.num_layers(); ++i)
        for (const Tensor& t : expected_stashed(a.layers[size_t(i)], c.is_attention(i)))
          round_to_bf16_in_place(t);
    model_backward(m, a, 0.01);
  }
  r.grads.assign(m.grads(), m.grads() + m.layout().total);
  return r;
}

}  // namespace

TEST(ActivationStorage, Bf16KeepsTheSubLayersOwnTensorsAsBf16Copies) {
  const ZayaConfig c = tiny_model().config();
  Activations f32(c, kB, kT), bf16(c, kB, kT, Device::Cpu, false, ActivationStorage::BF16);
  EXPECT_EQ(f32.storage(), ActivationStorage::F32);
  EXPECT_EQ(bf16.storage(), ActivationStorage::BF16);
  EXPECT_STREQ(activation_storage_name(bf16.storage()), "bf16");
  EXPECT_EQ(f32.bytes(), Activations::bytes_needed(c, kB, kT));
  EXPECT_EQ(bf16.bytes(), Activations::bytes_needed(c, kB, kT, false, ActivationStorage::BF16));

  size_t stashed_f32_bytes = 0, largest_layer = 0;
  std::set<const void*> work_starts;
  bool saw_attention = false, saw_moe = false;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerActs& l = bf16.layers[size_t(i)];
    const bool attention = c.is_attention(i);
    (attention ? saw_attention : saw_moe) = true;
    EXPECT_TRUE(f32.layers[size_t(i)].stashed.empty());
    const std::vector<Tensor> want = expected_stashed(l, attention);
    ASSERT_EQ(l.stashed.size(), want.size()) << "layer " << i;
    size_t layer_bytes = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      const StashedTensor& s = l.stashed[k];
      EXPECT_EQ(s.work.data, want[k].data) << "layer " << i << " tensor " << k;
      EXPECT_EQ(s.work.dtype, DType::F32);
      EXPECT_EQ(s.stored.dtype, DType::BF16);
      EXPECT_EQ(s.stored.shape, s.work.shape);
      layer_bytes += s.work.nbytes();
    }
    work_starts.insert(l.stashed.front().work.data);
    stashed_f32_bytes += layer_bytes;
    largest_layer = std::max(largest_layer, layer_bytes);
    // What other sub-layers read stays f32 and the sub-layer's own.
    EXPECT_EQ(l.h.dtype, DType::F32);
    EXPECT_EQ(l.o.dtype, DType::F32);
    if (!attention) {
      EXPECT_EQ(l.moe.r.dtype, DType::F32);
    }
  }
  EXPECT_TRUE(saw_attention && saw_moe);
  EXPECT_EQ(work_starts.size(), 1u) << "every sub-layer's working tensors share one area";
  // bf16 copies (half) plus one working area of the largest sub-layer (alignment aside).
  const double saved = double(f32.bytes()) - double(bf16.bytes());
  const double want_saved = double(stashed_f32_bytes) / 2 - double(largest_layer);
  EXPECT_NEAR(saved, want_saved, 64.0 * 16 * double(c.num_layers())) << f32.bytes();
  EXPECT_GT(saved, 0);
}

TEST(ActivationStorage, Bf16IsTheF32ModelWithItsStashedTensorsRounded) {
  Model m = tiny_model();
  const Passes plain = two_micro_batches(m, ActivationStorage::F32);
  const Passes rounded = two_micro_batches(m, ActivationStorage::F32, /*round_f32=*/true);
  const Passes bf16 = two_micro_batches(m, ActivationStorage::BF16);
  // The forward reads the working tensors before they are rounded: the loss is the same bits.
  EXPECT_EQ(bf16.losses, plain.losses);
  // The backward sees exactly the rounded tensors, in both micro-batches.
  EXPECT_EQ(bf16.grads, rounded.grads);
  // … which moved the gradients off the f32 ones, by about bf16's rounding.
  EXPECT_NE(bf16.grads, plain.grads);
  EXPECT_LE(rel_l2(bf16.grads.data(), plain.grads.data(), plain.grads.size()), 1e-2);
  // Deterministic.
  EXPECT_EQ(two_micro_batches(m, ActivationStorage::BF16).grads, bf16.grads);
}

// What it saves at ZAYA1-base's shapes (the arena of `zaya bench step --device gpu`'s micro-batch).
TEST(ActivationStorage, Bf16ArenaOfZaya1Base) {
  const ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/zaya1-base.json");
  const int64_t B = 2, T = 4096;
  const double f32 = double(Activations::bytes_needed(c, B, T));
  const double bf16 = double(Activations::bytes_needed(c, B, T, false, ActivationStorage::BF16));
  const double per_token = 1024.0 * double(B * T);
  std::printf(
      "zaya1-base (%lld sub-layers), B %lld x T %lld: activations fp32 %.1f KiB/token, "
      "bf16 %.1f KiB/token (%.1f%% less)\n",
      static_cast<long long>(c.num_layers()), static_cast<long long>(B), static_cast<long long>(T),
      f32 / per_token, bf16 / per_token, 100 * (1 - bf16 / f32));
  EXPECT_LT(bf16, 0.75 * f32);
}
