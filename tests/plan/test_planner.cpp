// The planner's formulas against hand-computed values (ring and hierarchical collectives, Young,
// Daly, goodput), the chosen checkpoint interval against Young's optimum, the plan's structure
// (no bucket alone, ZeRO-1 sharding the optimizer state, the step time's parts, the bucket padding
// and the bucket size suggested against it), and the refusal of bad cluster files and settings,
// each naming the file and the key or the setting.
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/assert.h"
#include "io/zaya_config.h"
#include "model/param_layout.h"
#include "test_util.h"
#include "train/optim_config.h"
#include "train/zero_plan.h"

namespace zaya {
namespace {

TEST(PlanFormulas, RingAndHierarchicalCollectives) {
  // 4 ranks, 1 GB at 1 GB/s: each sends 3/4 of it.
  EXPECT_DOUBLE_EQ(ring_seconds(1e9, 4, 1e9), 0.75);
  EXPECT_DOUBLE_EQ(ring_seconds(1e9, 1, 1e9), 0.0);
  // 2 nodes × 8 GPUs, 8 GB: 7/8 · 8 GB at 100 GB/s = 70 ms inside the node, then the node's
  // 1 GB share, 1/2 of it at 50 GB/s = 10 ms across.
  EXPECT_NEAR(hierarchical_seconds(8e9, 2, 8, 100e9, 50e9), 0.08, 1e-12);
  // One node: the ring inside it alone.
  EXPECT_DOUBLE_EQ(hierarchical_seconds(8e9, 1, 8, 100e9, 50e9), ring_seconds(8e9, 8, 100e9));
}

TEST(PlanFormulas, YoungDalyAndGoodput) {
  // δ = 60 s, M = 24 h.
  EXPECT_NEAR(young_interval(60, 86400), 3219.937887599697, 1e-6);
  EXPECT_NEAR(daly_interval(60, 86400), 3180.0621135984475, 1e-6);
  EXPECT_DOUBLE_EQ(daly_interval(200000, 86400), 86400);  // δ ≥ 2M: M
  // τ = 1 h, δ = 60 s, R = 10 min: 3600/3660 · (1 − (600 + 1830)/86400).
  EXPECT_NEAR(goodput(3600, 60, 600, 86400), 0.9559426229508197, 1e-12);
  EXPECT_DOUBLE_EQ(goodput(0, 60, 600, 86400), 0.0);
  EXPECT_DOUBLE_EQ(goodput(1e6, 60, 600, 86400), 0.0);  // a period longer than 2M: nothing
}

Cluster test_cluster(int64_t nodes, int64_t gpus) {
  Cluster c;
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.gpu_memory_gb = 80;
  c.bf16_tflops = 1000;
  c.fp32_tflops = 100;
  c.hbm_tbyte_per_s = 3;
  c.intra_node_gbyte_per_s = 400;
  c.network_gbit_per_s = 400;
  c.topology = nodes == 1 ? Topology::SingleNode : Topology::RailsOnly;
  c.storage_write_gbyte_per_s = 1;
  c.host_copy_gbyte_per_s = 10;
  return c;
}

PlanInput tiny_input(int64_t nodes, int64_t gpus) {
  PlanInput in;
  in.model = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  in.train.seq_len = 16;
  in.train.micro_batch = 2;
  in.train.grad_accum = 3;
  in.cluster = test_cluster(nodes, gpus);
  return in;
}

TEST(Planner, OneRankHasNoBucketAndSeveralShareTheOptimizerState) {
  const Plan one = make_plan(tiny_input(1, 1));
  const ParamLayout layout = make_param_layout(one.in.model);
  EXPECT_EQ(one.memory.weights, layout.total * 4);
  EXPECT_EQ(one.memory.gradients, layout.total * 4);
  EXPECT_EQ(one.memory.bucket, 0u);
  EXPECT_EQ(one.memory.shard, 0u);
  EXPECT_EQ(one.reduce_scatter_bytes, 0u);
  EXPECT_EQ(one.rs_exposed_s + one.ag_exposed_s, 0.0);
  EXPECT_EQ(one.global_rows, 6);
  const Plan four = make_plan(tiny_input(2, 2));
  EXPECT_EQ(four.ranks, 4);
  EXPECT_EQ(four.global_rows, 24);
  EXPECT_LT(four.memory.optimizer_state, one.memory.optimizer_state);
  // The bucket holds every parameter at least once (padding aside), as the collectives' buffers.
  EXPECT_GE(four.memory.bucket, layout.total * 4);
  EXPECT_EQ(four.reduce_scatter_bytes, four.memory.bucket);
  EXPECT_EQ(four.all_gather_bytes, four.memory.bucket);
  EXPECT_EQ(four.memory.shard * 4, four.memory.bucket);
  EXPECT_DOUBLE_EQ(four.ring_sent_per_rank, 0.75 * double(four.memory.bucket));
  EXPECT_EQ(four.algorithm, CollectiveAlgorithm::Hierarchical);
  EXPECT_EQ(one.algorithm, CollectiveAlgorithm::None);
  EXPECT_EQ(four.shard_bytes.size(), 4u);
}

TEST(Planner, StepTimeIsComputeAtTheMfuPlusOptimizerPlusExposedCommunication) {
  PlanInput in = tiny_input(1, 2);
  in.mfu = 0.5;
  const Plan p = make_plan(in);
  // fp32 GEMMs: the FP32 peak (100 TFLOP/s) at 50%; 2 × 3 × 16 tokens per rank.
  EXPECT_NEAR(p.compute_s, p.flops_per_token * 96 / (100e12 * 0.5), 1e-15);
  EXPECT_NEAR(p.step_s, p.compute_s + p.optimizer_s + p.rs_exposed_s + p.ag_exposed_s, 1e-15);
  EXPECT_NEAR(p.tokens_per_s, 2 * 96 / p.step_s, 1e-6);
  EXPECT_NEAR(p.days_per_trillion, 1e12 / p.tokens_per_s / 86400, 1e-9);
  // The ring on one node at 400 GB/s.
  EXPECT_NEAR(p.rs_s, ring_seconds(double(p.reduce_scatter_bytes), 2, 400e9), 1e-18);
  // bf16 GEMMs run at the BF16 peak, ten times faster here.
  in.train.precision = ops::MatmulPrecision::BF16;
  EXPECT_NEAR(make_plan(in).compute_s, p.compute_s / 10, 1e-15);
}

TEST(Planner, TheChosenCheckpointIntervalIsYoungsOptimum) {
  // Synchronous checkpoints: every save stalls the whole write. The storage rate makes it 60 s.
  PlanInput in = tiny_input(1, 2);
  in.train.async_checkpoint = false;
  in.mtbf_hours = 24;
  in.restart_minutes = 0;
  const double bytes = double(make_plan(in).total_bytes);
  in.cluster.storage_write_gbyte_per_s = bytes / 60 / 1e9;
  const Plan p = make_plan(in);
  EXPECT_NEAR(p.write_s, 60, 1e-9);
  EXPECT_NEAR(p.young_s, young_interval(60, 86400), 1e-6);
  const double tau = double(p.best_steps) * p.step_s;
  // The first-order optimum of τ/(τ+δ)·(1 − (τ+δ)/2M) is √(2δM) − δ plus O(δ²/M) corrections.
  EXPECT_NEAR(tau, young_interval(60, 86400) - 60, 0.02 * young_interval(60, 86400)) << tau;
  EXPECT_GE(p.best_goodput, goodput(p.young_s, 60, 0, 86400) - 1e-12);
  EXPECT_GE(p.best_goodput, goodput(p.daly_s, 60, 0, 86400) - 1e-12);
  EXPECT_NEAR(p.best_goodput, goodput(tau, 60, 0, 86400), 1e-12);
  // Asynchronous ones stall for the copy to the host only (once the interval outlasts the write).
  in.train.async_checkpoint = true;
  const Plan a = make_plan(in);
  EXPECT_NEAR(a.best_stall_s, a.snapshot_s, 1e-12);
  EXPECT_GT(a.best_goodput, p.best_goodput);
}

TEST(Planner, RefusesSettingsItCannotModel) {
  PlanInput in = tiny_input(1, 1);
  in.mfu = 1.5;
  test::expect_error([&] { make_plan(in); }, {"--mfu 1.5"});
  in.mfu = 0.4;
  in.mtbf_hours = 0;
  test::expect_error([&] { make_plan(in); }, {"--mtbf-hours"});
  in.mtbf_hours = 24;
  in.train.seq_len = 100000;
  test::expect_error([&] { make_plan(in); }, {"data.seq_len = 100000", "max_position_embeddings"});
}

TEST(Cluster, ParsesEveryKeyAndRefusesBadOnes) {
  const std::string good =
      "name = \"x\"\nnodes = 2\ngpus_per_node = 8\ngpu_memory_gb = 192\nbf16_tflops = 1307.4\n"
      "fp32_tflops = 163.4\nhbm_tbyte_per_s = 5.3\nintra_node_gbyte_per_s = 448\n"
      "network_gbit_per_s = 400\ntopology = \"rails-only\"\nstorage_write_gbyte_per_s = 100\n"
      "host_copy_gbyte_per_s = 50\n";
  const Cluster c = parse_cluster(good, "c.toml");
  EXPECT_EQ(c.name, "x");
  EXPECT_EQ(c.gpus(), 16);
  EXPECT_EQ(c.topology, Topology::RailsOnly);
  EXPECT_DOUBLE_EQ(c.network_gbit_per_s, 400);
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  test::expect_error([&] { parse_cluster(with("nodes = 2\n", ""), "c.toml"); },
                     {"c.toml: key 'nodes' is missing"});
  test::expect_error([&] { parse_cluster(with("nodes = 2", "nodes = 0"), "c.toml"); },
                     {"c.toml: key 'nodes' must be at least 1, got 0"});
  test::expect_error([&] { parse_cluster(with("= 5.3", "= -5.3"), "c.toml"); },
                     {"c.toml: key 'hbm_tbyte_per_s' must be a positive finite number"});
  test::expect_error([&] { parse_cluster(with("= 5.3", "= nan"), "c.toml"); },
                     {"c.toml: key 'hbm_tbyte_per_s'"});
  test::expect_error([&] { parse_cluster(good + "gpus = 3\n", "c.toml"); },
                     {"c.toml: unknown key 'gpus'"});
  test::expect_error([&] { parse_cluster(good + "[extra]\nx = 1\n", "c.toml"); },
                     {"c.toml: unknown key 'extra'"});
  test::expect_error([&] { parse_cluster(with("\"rails-only\"", "\"ring\""), "c.toml"); },
                     {"c.toml: key 'topology' must be single-node, rails-only or fat-tree"});
  test::expect_error([&] { parse_cluster(with("\"rails-only\"", "\"single-node\""), "c.toml"); },
                     {"c.toml: key 'topology' is single-node but key 'nodes' is 2"});
  test::expect_error([&] { parse_cluster(with("nodes = 2", "nodes = 100000"), "c.toml"); },
                     {"c.toml: keys 'nodes' × 'gpus_per_node'"});
  test::expect_error([&] { parse_cluster("nodes = ", "c.toml"); }, {"c.toml:", "invalid TOML"});
}

// Each ZeRO bucket is ranks × its largest rank's share: with many ranks and one layer a bucket,
// most of it is padding. The plan says how much and names the bucket size that pads at most a
// quarter (one bucket as the last resort), whose figures are make_zero_plan's own.
TEST(Planner, PaddedBucketsGetASuggestedSizeThatPadsLess) {
  PlanInput in = tiny_input(8, 8);
  in.train.optim.zero_bucket_mb = 0.0001;  // one layer a bucket
  const Plan p = make_plan(in);
  const ParamLayout layout = make_param_layout(in.model);
  const ZeroPlan z = make_zero_plan(layout, true, 64, zero_bucket_elements(in.train.optim));
  int64_t owned = 0;
  for (int64_t e : z.elements) owned += e;
  EXPECT_EQ(p.bucket_padding, uint64_t(z.bucket_elements() - owned) * 4);
  ASSERT_GT(4 * p.bucket_padding, p.memory.bucket);
  ASSERT_GE(p.suggested_bucket_mb, 0);
  const ZeroPlan s = make_zero_plan(
      layout, true, 64,
      p.suggested_bucket_mb == 0 ? 0 : int64_t(p.suggested_bucket_mb * (1 << 20) / 4));
  int64_t s_owned = 0;
  for (int64_t e : s.elements) s_owned += e;
  EXPECT_EQ(p.suggested_bucket, uint64_t(s.bucket_elements()) * 4);
  EXPECT_EQ(p.suggested_padding, uint64_t(s.bucket_elements() - s_owned) * 4);
  EXPECT_LT(p.suggested_padding, p.bucket_padding);
  EXPECT_NE(plan_text(p).find("zero padding"), std::string::npos);
  // Few ranks, one bucket: little padding, no suggestion; one bucket is never told to be one.
  PlanInput two = tiny_input(1, 2);
  two.train.optim.zero_bucket_mb = 0;
  EXPECT_LT(make_plan(two).suggested_bucket_mb, 0);
  in.train.optim.zero_bucket_mb = 0;
  EXPECT_LT(make_plan(in).suggested_bucket_mb, 0);
}

}  // namespace
}  // namespace zaya
