// The ZeRO-1 ownership plan (train/zero_plan.h) on one process: every trainable element owned
// exactly once, Muon matrices whole, chunks padded for odd sizes, state and Newton–Schulz work
// balanced, deterministic; and the optimizer's shard state tiles the global state across ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "io/zaya_config.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "train/zero_plan.h"

namespace zaya {
namespace {

ParamLayout tiny_layout() {
  return make_param_layout(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
}

// A hand-made layout of odd sizes: Muon matrices, AdamW tensors and a buffer.
ParamLayout odd_layout() {
  ParamLayout l;
  auto add = [&](std::string name, std::vector<int64_t> shape, ParamKind kind) {
    ParamSpec s{std::move(name), std::move(shape), kind, ParamInit::Zero, -1, l.total};
    l.total += size_t(s.numel());
    l.index[s.name] = l.specs.size();
    l.specs.push_back(std::move(s));
  };
  add("emb", {31, 7}, ParamKind::Embedding);
  add("w1", {33, 7}, ParamKind::Matrix);
  add("norm", {1}, ParamKind::Vector);
  add("e0", {7, 31}, ParamKind::Expert);
  add("bias", {5}, ParamKind::Buffer);
  add("e1", {257, 1}, ParamKind::Expert);
  add("conv", {3, 1, 2}, ParamKind::Conv);
  add("w2", {13, 13}, ParamKind::Matrix);
  add("last", {7}, ParamKind::Vector);
  return l;
}

void check_plan(const ParamLayout& l, bool use_muon, int world, int64_t bucket_target = 0) {
  SCOPED_TRACE(testing::Message() << "world " << world << " muon " << use_muon << " bucket "
                                  << bucket_target);
  const ZeroPlan p = make_zero_plan(l, use_muon, world, bucket_target);
  ASSERT_EQ(p.world, world);
  ASSERT_EQ(p.first.size(), size_t(world) + 1);
  // Every trainable element exactly once, buffers never.
  std::vector<int> seen(l.total, 0);
  for (const ZeroSegment& z : p.segments) {
    const ParamSpec& s = l.specs[z.spec];
    ASSERT_TRUE(s.trainable()) << s.name;
    ASSERT_GT(z.length, 0) << s.name;
    ASSERT_LE(z.begin + z.length, s.numel()) << s.name;
    for (int64_t i = 0; i < z.length; ++i) ++seen[s.offset + size_t(z.begin + i)];
    EXPECT_EQ(z.muon, is_muon_param(s, use_muon)) << s.name;
    if (z.muon) {
      EXPECT_TRUE(z.begin == 0 && z.length == s.numel()) << s.name << " split";
    }
  }
  for (const ParamSpec& s : l.specs)
    for (int64_t i = 0; i < s.numel(); ++i)
      ASSERT_EQ(seen[s.offset + size_t(i)], s.trainable() ? 1 : 0) << s.name << "[" << i << "]";
  // Buckets: one after the other in the buffer and the shard, whole layers each, in the order the
  // backward finishes them (every tensor of a bucket is final by its ready_after, none of a later
  // bucket before it).
  const size_t B = p.buckets.size();
  ASSERT_GE(B, 1u);
  if (bucket_target == 0) {
    EXPECT_EQ(B, 1u);
  }
  int64_t shard_at = 0;
  for (size_t b = 0; b < B; ++b) {
    EXPECT_EQ(p.buckets[b].shard_offset, shard_at);
    EXPECT_EQ(p.buckets[b].offset, shard_at * world);
    EXPECT_GE(p.buckets[b].chunk, 1);
    shard_at += p.buckets[b].chunk;
    if (b > 0) {
      EXPECT_LT(p.buckets[b].ready_after, p.buckets[b - 1].ready_after);
    }
  }
  EXPECT_EQ(p.chunk, shard_at);
  for (const ZeroSegment& z : p.segments) {
    ASSERT_LT(z.bucket, B);
    const int64_t ready = gradient_ready_after(l, l.specs[z.spec]);
    EXPECT_GE(ready, p.buckets[z.bucket].ready_after) << l.specs[z.spec].name;
    if (z.bucket > 0) {
      EXPECT_LT(ready, p.buckets[z.bucket - 1].ready_after);
    }
  }
  // Per rank and bucket: contiguous in the rank's chunk of the bucket, within it, and the
  // bookkeeping adds up; each bucket padded only up to its largest rank.
  std::vector<int64_t> largest(B, 0), largest_muon_in(B, 0);
  for (int r = 0; r < world; ++r) {
    std::vector<int64_t> off(B, 0);
    int64_t state = 0, owned = 0;
    for (const ZeroSegment& z : p.owned_by(r)) {
      EXPECT_EQ(z.rank, r);
      EXPECT_EQ(z.shard_offset, p.buckets[z.bucket].shard_offset + off[z.bucket]);
      EXPECT_EQ(p.bucket_offset(z),
                p.buckets[z.bucket].offset + r * p.buckets[z.bucket].chunk + off[z.bucket]);
      off[z.bucket] += z.length;
      owned += z.length;
      state += z.muon ? z.length : 2 * z.length;
      if (z.muon) largest_muon_in[z.bucket] = std::max(largest_muon_in[z.bucket], z.length);
    }
    EXPECT_EQ(owned, p.elements[size_t(r)]);
    EXPECT_EQ(state, p.state_floats[size_t(r)]);
    for (size_t b = 0; b < B; ++b) {
      EXPECT_LE(off[b], p.buckets[b].chunk);
      largest[b] = std::max(largest[b], off[b]);
    }
  }
  for (size_t b = 0; b < B; ++b) EXPECT_EQ(p.buckets[b].chunk, std::max<int64_t>(1, largest[b]));
  // State balance: no rank above the even share by more than each bucket's largest Muon matrix
  // (+1) — each bucket is water-filled on its own.
  int64_t slack = 0, total_state = 0;
  for (size_t b = 0; b < B; ++b) slack += largest_muon_in[b] + 1;
  for (int64_t f : p.state_floats) total_state += f;
  for (int64_t f : p.state_floats) EXPECT_LE(f, (total_state + world - 1) / world + slack);
  // Newton–Schulz work: greedy largest-first is within the largest matrix of the even share.
  double total_cost = 0, largest_cost = 0;
  for (const ParamSpec& s : l.specs)
    if (s.trainable() && is_muon_param(s, use_muon)) {
      total_cost += muon_cost(s);
      largest_cost = std::max(largest_cost, muon_cost(s));
    }
  for (double c : p.muon_cost) EXPECT_LE(c, total_cost / world + largest_cost + 1e-9);
  // Deterministic.
  const ZeroPlan q = make_zero_plan(l, use_muon, world, bucket_target);
  ASSERT_EQ(q.segments.size(), p.segments.size());
  for (size_t i = 0; i < p.segments.size(); ++i) {
    EXPECT_EQ(q.segments[i].spec, p.segments[i].spec);
    EXPECT_EQ(q.segments[i].begin, p.segments[i].begin);
    EXPECT_EQ(q.segments[i].rank, p.segments[i].rank);
    EXPECT_EQ(q.segments[i].bucket, p.segments[i].bucket);
  }
}

TEST(ZeroPlan, CoversEverythingOnceBalancedAndPadded) {
  for (bool use_muon : {true, false})
    for (int world : {1, 2, 3, 4, 7}) {
      check_plan(odd_layout(), use_muon, world);
      check_plan(tiny_layout(), use_muon, world);
    }
}

// Buckets of about `target` elements, whole layers each (1: every layer its own bucket).
TEST(ZeroPlan, BucketsCoverEverythingOnceInBackwardOrder) {
  for (bool use_muon : {true, false})
    for (int world : {1, 2, 3, 7})
      for (int64_t target : {int64_t(1), int64_t(300), int64_t(5000)}) {
        check_plan(odd_layout(), use_muon, world, target);
        check_plan(tiny_layout(), use_muon, world, target);
      }
  const ParamLayout l = tiny_layout();
  const ZeroPlan p = make_zero_plan(l, true, 2, 1);
  int64_t layers = 0;
  for (const ParamSpec& s : l.specs) layers = std::max(layers, s.layer + 1);
  EXPECT_EQ(int64_t(p.buckets.size()), layers + 1);  // every layer, then the embedding
  EXPECT_EQ(p.buckets.front().ready_after, layers - 1);
  EXPECT_EQ(p.buckets.back().ready_after, -1);
  EXPECT_THROW(make_zero_plan(l, true, 2, -1), Error);
}

// model_backward's hook reports a layer when its gradients (and every later layer's) are final:
// what the ZeRO-1 overlap sends then is what the whole backward ends with, bit for bit.
TEST(ZeroPlan, GradientsAreFinalWhenTheBackwardReportsTheirLayer) {
  const ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  Model m(c);
  m.init_random(3);
  m.zero_grads();
  const int64_t B = 2, T = 9;
  Activations a(c, B, T);
  std::vector<int32_t> ids(size_t(B * T)), targets(size_t(B * T));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = int32_t((i * 37 + 5) % size_t(c.vocab_size));
    targets[i] = int32_t((i * 53 + 11) % size_t(c.vocab_size));
  }
  const double scale = 1.0 / double(B * T);
  model_forward_and_head_backward(m, a, ids.data(), targets.data(), scale);
  const ParamLayout& l = m.layout();
  std::vector<std::vector<float>> at_report(l.specs.size());
  std::vector<int64_t> reported;
  model_backward(m, a, scale, [&](int64_t layer) {
    reported.push_back(layer);
    for (size_t i = 0; i < l.specs.size(); ++i) {
      const ParamSpec& s = l.specs[i];
      if (!s.trainable() || gradient_ready_after(l, s) != layer) continue;
      const float* g = m.grads() + s.offset;
      at_report[i].assign(g, g + s.numel());
    }
  });
  std::vector<int64_t> want;
  for (int64_t i = c.num_layers() - 1; i >= -1; --i) want.push_back(i);
  EXPECT_EQ(reported, want);
  for (size_t i = 0; i < l.specs.size(); ++i) {
    const ParamSpec& s = l.specs[i];
    if (!s.trainable()) continue;
    ASSERT_EQ(int64_t(at_report[i].size()), s.numel()) << s.name << " never reported";
    EXPECT_EQ(std::memcmp(at_report[i].data(), m.grads() + s.offset, size_t(s.numel()) * 4), 0)
        << s.name << " changed after its layer was reported";
  }
}

TEST(ZeroPlan, OneRankOwnsEverythingWhole) {
  const ParamLayout l = tiny_layout();
  const ZeroPlan p = make_zero_plan(l, true, 1);
  int64_t trainable = 0;
  for (const ParamSpec& s : l.specs)
    if (s.trainable()) trainable += s.numel();
  EXPECT_EQ(p.chunk, trainable);  // no padding
  for (const ZeroSegment& z : p.segments)
    EXPECT_EQ(z.length, l.specs[z.spec].numel()) << l.specs[z.spec].name;
}

TEST(ZeroPlan, MuonMatricesAreSpreadByCost) {
  // Four equal experts and two ranks: two each, equal cost.
  const ParamLayout l = tiny_layout();
  const ZeroPlan p = make_zero_plan(l, true, 2);
  EXPECT_NEAR(p.muon_cost[0], p.muon_cost[1], 0.25 * p.muon_cost[0]);
  std::map<int, int> experts_per_rank;
  for (const ZeroSegment& z : p.segments)
    if (l.specs[z.spec].kind == ParamKind::Expert) ++experts_per_rank[z.rank];
  EXPECT_EQ(experts_per_rank[0], experts_per_rank[1]);
}

TEST(ZeroPlan, UnevenOddSizesAtThreeRanks) {
  const ParamLayout l = odd_layout();
  const ZeroPlan p = make_zero_plan(l, true, 3);
  EXPECT_EQ(p.bucket_elements(), 3 * p.chunk);
  int64_t owned = 0;
  for (int64_t e : p.elements) owned += e;
  EXPECT_EQ(owned, int64_t(l.total) - 5);  // everything but the buffer
  EXPECT_GT(p.bucket_elements(), owned);   // 1070 trainable elements: padded, not divided
  EXPECT_THROW(make_zero_plan(l, true, 0), Error);
}

// The slices each rank of a 3-rank plan would save tile the one-process global state exactly,
// and the global layout is the same at any rank count.
TEST(ZeroPlan, OptimizerStateOfOneRankListsTheGlobalLayout) {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(1);
  Optimizer one(m, OptimConfig{});
  const OptimizerShard s = one.state_to_save();
  ASSERT_EQ(s.slices.size(), s.layout.size());
  for (size_t i = 0; i < s.slices.size(); ++i) {
    EXPECT_EQ(s.slices[i].tensor, s.layout[i].first);  // layout order, every tensor whole
    EXPECT_EQ(s.slices[i].begin, 0);
  }
  EXPECT_EQ(one.state_bytes(), one.total_state_bytes());
}

}  // namespace
}  // namespace zaya
