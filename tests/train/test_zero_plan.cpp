// The ZeRO-1 ownership plan (train/zero_plan.h) on one process: every trainable element owned
// exactly once, Muon matrices whole, chunks padded for odd sizes, state and Newton–Schulz work
// balanced, deterministic; and the optimizer's shard state tiles the global state across ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "train/zero_plan.h"

namespace zaya {
namespace {

ParamLayout tiny_layout() {
  return make_param_layout(load_config(std::string(ZAYA_TEST_DATA) + "/configs/tiny.json"));
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

void check_plan(const ParamLayout& l, bool use_muon, int world) {
  SCOPED_TRACE(testing::Message() << "world " << world << " muon " << use_muon);
  const ZeroPlan p = make_zero_plan(l, use_muon, world);
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
  // Per rank: contiguous in the chunk, within it, and the bookkeeping adds up.
  int64_t max_elements = 0;
  for (int r = 0; r < world; ++r) {
    int64_t off = 0, state = 0;
    for (const ZeroSegment& z : p.owned_by(r)) {
      EXPECT_EQ(z.rank, r);
      EXPECT_EQ(z.shard_offset, off);
      off += z.length;
      state += z.muon ? z.length : 2 * z.length;
    }
    EXPECT_EQ(off, p.elements[size_t(r)]);
    EXPECT_EQ(state, p.state_floats[size_t(r)]);
    EXPECT_LE(off, p.chunk);
    max_elements = std::max(max_elements, off);
  }
  EXPECT_EQ(p.chunk, std::max<int64_t>(1, max_elements));  // padding only up to the largest rank
  // State balance: no rank above the even share by more than the largest Muon matrix (+1).
  int64_t largest_muon = 0, total_state = 0;
  for (const ParamSpec& s : l.specs)
    if (s.trainable() && is_muon_param(s, use_muon))
      largest_muon = std::max(largest_muon, s.numel());
  for (int64_t f : p.state_floats) total_state += f;
  for (int64_t f : p.state_floats)
    EXPECT_LE(f, (total_state + world - 1) / world + largest_muon + 1);
  // Newton–Schulz work: greedy largest-first is within the largest matrix of the even share.
  double total_cost = 0, largest_cost = 0;
  for (const ParamSpec& s : l.specs)
    if (s.trainable() && is_muon_param(s, use_muon)) {
      total_cost += muon_cost(s);
      largest_cost = std::max(largest_cost, muon_cost(s));
    }
  for (double c : p.muon_cost) EXPECT_LE(c, total_cost / world + largest_cost + 1e-9);
  // Deterministic.
  const ZeroPlan q = make_zero_plan(l, use_muon, world);
  ASSERT_EQ(q.segments.size(), p.segments.size());
  for (size_t i = 0; i < p.segments.size(); ++i) {
    EXPECT_EQ(q.segments[i].spec, p.segments[i].spec);
    EXPECT_EQ(q.segments[i].begin, p.segments[i].begin);
    EXPECT_EQ(q.segments[i].rank, p.segments[i].rank);
  }
}

TEST(ZeroPlan, CoversEverythingOnceBalancedAndPadded) {
  for (bool use_muon : {true, false})
    for (int world : {1, 2, 3, 4, 7}) {
      check_plan(odd_layout(), use_muon, world);
      check_plan(tiny_layout(), use_muon, world);
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
  Model m(load_config(std::string(ZAYA_TEST_DATA) + "/configs/tiny.json"));
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
