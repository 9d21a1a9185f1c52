// The planner (planner.h): the byte figures from the trainer's own plan and writers' size
// functions, the times from the formulas of docs/plan.md.
#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "checkpoint/optimizer_shards.h"
#include "core/assert.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/activations.h"
#include "model/param_layout.h"
#include "train/zero_plan.h"

namespace zaya {

double ring_seconds(double bytes, int64_t n, double bytes_per_s) {
  if (n <= 1) return 0;
  return double(n - 1) / double(n) * bytes / bytes_per_s;
}

double hierarchical_seconds(double bytes, int64_t nodes, int64_t per_node, double intra_bytes_per_s,
                            double net_bytes_per_s) {
  return ring_seconds(bytes, per_node, intra_bytes_per_s) +
         ring_seconds(bytes / double(per_node), nodes, net_bytes_per_s);
}

double young_interval(double delta, double mtbf) {
  return std::sqrt(2 * delta * mtbf);
}

double daly_interval(double delta, double mtbf) {
  if (delta >= 2 * mtbf) return mtbf;
  const double x = delta / (2 * mtbf);
  return std::sqrt(2 * delta * mtbf) * (1 + std::sqrt(x) / 3 + x / 9) - delta;
}

double goodput(double tau, double delta, double restart, double mtbf) {
  if (tau <= 0) return 0;
  return tau / (tau + delta) * std::max(0.0, 1 - (restart + (tau + delta) / 2) / mtbf);
}

namespace {

constexpr uint64_t kF32 = sizeof(float);

// A data-less F32 view of `shape` (the size functions read shapes only).
Tensor shaped(const std::vector<int64_t>& shape) {
  Tensor t(static_cast<float*>(nullptr), {1});
  ZAYA_ASSERT(shape.size() <= t.shape.size(), "plan: a {}-d tensor", shape.size());
  t.ndim = int(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

// Rank r's optimizer shard as Optimizer::state_to_save lays it out (train/optimizer.h): the global
// layout, then its slices in layout order (rank 0 adds the replicated balancing state).
OptimizerShard shard_of(const ParamLayout& layout, const ZayaConfig& c, const ZeroPlan& plan,
                        bool use_muon, int rank, bool with_layout = true) {
  OptimizerShard out;
  for (const ParamSpec& s : layout.specs) {
    if (!with_layout) break;
    if (!s.trainable()) {
      const std::vector<int64_t> real{c.num_experts(s.layer)};
      out.layout.emplace_back(s.name + ".adam_m", real);
      out.layout.emplace_back(s.name + ".adam_v", real);
    } else if (is_muon_param(s, use_muon)) {
      out.layout.emplace_back(s.name + ".muon_momentum", s.shape);
    } else {
      out.layout.emplace_back(s.name + ".adam_m", s.shape);
      out.layout.emplace_back(s.name + ".adam_v", s.shape);
    }
  }
  if (with_layout) out.layout.emplace_back("balance.steps", std::vector<int64_t>{2});
  struct Piece {
    size_t spec;
    int64_t begin, n;
    bool muon, balance;
  };
  std::vector<Piece> pieces;
  for (const ZeroSegment& z : plan.owned_by(rank))
    pieces.push_back({z.spec, z.begin, z.length, z.muon, false});
  if (rank == 0)
    for (size_t i = 0; i < layout.specs.size(); ++i)
      if (!layout.specs[i].trainable())
        pieces.push_back({i, 0, c.num_experts(layout.specs[i].layer), false, true});
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.spec != b.spec ? a.spec < b.spec : a.begin < b.begin;
  });
  for (const Piece& p : pieces) {
    const ParamSpec& s = layout.specs[p.spec];
    const std::vector<int64_t> shape = p.balance ? std::vector<int64_t>{p.n} : s.shape;
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const Tensor view = shaped(p.n == numel ? shape : std::vector<int64_t>{p.n});
    if (p.muon) {
      out.slices.push_back({s.name + ".muon_momentum", p.begin, view});
    } else {
      out.slices.push_back({s.name + ".adam_m", p.begin, view});
      out.slices.push_back({s.name + ".adam_v", p.begin, view});
    }
  }
  if (rank == 0) out.slices.push_back({"balance.steps", 0, shaped({2})});
  return out;
}

// Rank r's Muon scratch (Optimizer: the largest batch of Muon pieces it updates at once — a
// layer's experts of one shape, adjacent in the parameters and in its shard — or one matrix) and
// its Newton–Schulz FLOPs per step (per matrix m ≤ n: steps × (4m²n + 2m³)).
void muon_work(const ParamLayout& layout, const ZeroPlan& plan, int rank, int64_t ns_steps,
               uint64_t& scratch_floats, double& flops) {
  scratch_floats = 0;
  flops = 0;
  const auto owned = plan.owned_by(rank);
  for (size_t i = 0; i < owned.size(); ++i) {
    if (!owned[i].muon) continue;
    const ParamSpec& s = layout.specs[owned[i].spec];
    size_t j = i + 1;
    if (s.kind == ParamKind::Expert)
      for (; j < owned.size(); ++j) {
        const ZeroSegment &a = owned[j - 1], &b = owned[j];
        const ParamSpec& t = layout.specs[b.spec];
        if (!b.muon || t.kind != ParamKind::Expert || t.layer != s.layer || t.shape != s.shape ||
            t.offset != layout.specs[a.spec].offset + size_t(a.length) ||
            b.shard_offset != a.shard_offset + a.length)
          break;
      }
    uint64_t n = 0;
    for (size_t k = i; k < j; ++k) {
      const ParamSpec& t = layout.specs[owned[k].spec];
      n += uint64_t(owned[k].length);
      const double m = double(std::min(t.shape[0], t.shape[1]));
      const double w = double(std::max(t.shape[0], t.shape[1]));
      flops += double(ns_steps) * (4 * m * m * w + 2 * m * m * m);
    }
    scratch_floats = std::max(scratch_floats, n);
    i = j - 1;
  }
}

std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) b /= 1024, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

std::string seconds_text(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} µs", s * 1e6);
  if (s < 1) return fmt::format("{:.1f} ms", s * 1e3);
  if (s < 120) return fmt::format("{:.2f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.2f} h", s / 3600);
}

// Elements the plan's ranks own in all (the bucket buffer's non-padding part).
int64_t trainable_elements(const ZeroPlan& plan) {
  int64_t n = 0;
  for (int64_t e : plan.elements) n += e;
  return n;
}

}  // namespace

Plan make_plan(const PlanInput& in) {
  Plan p;
  p.in = in;
  const TrainConfig& t = in.train;
  const Cluster& cl = in.cluster;
  const ZayaConfig& c = in.model;
  if (!(in.mfu > 0 && in.mfu <= 1)) fail("--mfu {}: must be in (0, 1]", in.mfu);
  if (!(in.mtbf_hours > 0) || !std::isfinite(in.mtbf_hours))
    fail("--mtbf-hours {}: must be a positive number", in.mtbf_hours);
  if (!(in.restart_minutes >= 0) || !std::isfinite(in.restart_minutes))
    fail("--restart-minutes {}: must be a number ≥ 0", in.restart_minutes);
  if (!(in.reserve_gb >= 0) || !std::isfinite(in.reserve_gb))
    fail("--reserve-gb {}: must be a number ≥ 0", in.reserve_gb);
  if (t.seq_len > c.max_position_embeddings)
    fail("data.seq_len = {} is longer than the model's context (max_position_embeddings = {})",
         t.seq_len, c.max_position_embeddings);

  p.ranks = cl.gpus();
  const int world = int(p.ranks);
  p.global_rows = t.micro_batch * t.grad_accum * p.ranks;
  p.tokens_per_step = p.global_rows * t.seq_len;
  p.facts = model_facts(c, t.seq_len);
  p.flops_per_token = 3 * (p.facts.flops_matmul_per_token + p.facts.flops_attention_per_token);

  // --- memory: the trainer's buffers ---
  const ParamLayout layout = make_param_layout(c);
  const ZeroPlan plan = make_zero_plan(layout, t.optim.use_muon, world,
                                       world == 1 ? 0 : zero_bucket_elements(t.optim));
  uint64_t balance_floats = 2;  // balance.steps
  for (const ParamSpec& s : layout.specs)
    if (!s.trainable()) balance_floats += 2 * uint64_t(c.num_experts(s.layer));
  p.memory.weights = layout.total * kF32;
  p.memory.gradients = layout.total * kF32;
  double muon_flops_max = 0, hbm_max = 0;
  for (int r = 0; r < world; ++r) {
    uint64_t scratch = 0;
    double flops = 0;
    muon_work(layout, plan, r, t.optim.muon_ns_steps, scratch, flops);
    p.memory.muon_scratch = std::max(p.memory.muon_scratch, scratch * kF32);
    p.memory.optimizer_state = std::max(
        p.memory.optimizer_state, (uint64_t(plan.state_floats[size_t(r)]) + balance_floats) * kF32);
    muon_flops_max = std::max(muon_flops_max, flops);
    hbm_max = std::max(hbm_max, 16.0 * double(plan.elements[size_t(r)]) +
                                    8.0 * double(plan.state_floats[size_t(r)]));
  }
  if (world > 1) {
    p.memory.bucket = uint64_t(plan.bucket_elements()) * kF32;
    p.memory.shard = uint64_t(plan.chunk) * kF32;
    hbm_max += 4.0 * double(p.memory.bucket);  // pack in, unpack out: each a read and a write
    p.bucket_padding = p.memory.bucket - uint64_t(trainable_elements(plan)) * kF32;
    // One bucket (0) pads least already: nothing to suggest then.
    if (4 * p.bucket_padding > p.memory.bucket && t.optim.zero_bucket_mb > 0) {
      // Doubling bucket sizes from the setting up to the model, then one bucket.
      const double total_mb = double(layout.total) * kF32 / double(1 << 20);
      for (double mb = std::max(t.optim.zero_bucket_mb, 1.0) * 2;; mb *= 2) {
        const bool one = mb >= total_mb;
        const ZeroPlan q =
            make_zero_plan(layout, t.optim.use_muon, world,
                           one ? 0 : std::max<int64_t>(1, int64_t(mb * double(1 << 20) / kF32)));
        const uint64_t bytes = uint64_t(q.bucket_elements()) * kF32;
        const uint64_t padding = bytes - uint64_t(trainable_elements(q)) * kF32;
        if (one || 4 * padding <= bytes) {
          p.suggested_bucket_mb = one ? 0 : mb;
          p.suggested_bucket = bytes;
          p.suggested_padding = padding;
          break;
        }
      }
    }
  }
  const bool bf16_storage =
      t.activations == ActivationsSetting::Bf16 ||
      (t.activations == ActivationsSetting::Auto && t.precision == ops::MatmulPrecision::BF16);
  p.memory.activations =
      Activations::bytes_needed(c, t.micro_batch, t.seq_len, false,
                                bf16_storage ? ActivationStorage::BF16 : ActivationStorage::F32);
  // The GPU LM head: row blocks of at most 1 GiB of logits (docs/training.md).
  const int64_t tokens_mb = t.micro_batch * t.seq_len;
  p.head_block_rows =
      std::min<int64_t>(tokens_mb, std::max<int64_t>(1, (int64_t(1) << 30) / (c.vocab_size * 4)));
  p.workspace =
      uint64_t(p.head_block_rows) * uint64_t(c.vocab_size) * kF32 + uint64_t(in.reserve_gb * 1e9);
  p.capacity = uint64_t(cl.gpu_memory_gb * 1e9);
  p.fits = p.memory.total() + p.workspace <= p.capacity;

  // --- the step ---
  const double peak =
      (t.precision == ops::MatmulPrecision::BF16 ? cl.bf16_tflops : cl.fp32_tflops) * 1e12;
  const double tokens_rank = double(t.micro_batch * t.grad_accum * t.seq_len);
  p.compute_s = p.flops_per_token * tokens_rank / (peak * in.mfu);
  p.muon_flops = muon_flops_max;
  const double ns_peak = (t.optim.muon_bf16 ? cl.bf16_tflops : cl.fp32_tflops) * 1e12;
  p.optimizer_s = muon_flops_max / (ns_peak * in.mfu) + hbm_max / (cl.hbm_tbyte_per_s * 1e12);

  // --- ZeRO-1 collectives ---
  if (world > 1) {
    p.buckets = int64_t(plan.buckets.size());
    p.reduce_scatter_bytes = p.all_gather_bytes = p.memory.bucket;
    p.embedding_bucket_bytes = uint64_t(plan.buckets.back().chunk) * uint64_t(world) * kF32;
    p.ring_sent_per_rank = double(world - 1) / world * double(p.memory.bucket);
    const double intra = cl.intra_node_gbyte_per_s * 1e9, net = cl.network_gbit_per_s * 1e9 / 8;
    auto time = [&](double bytes) {
      switch (cl.topology) {
        case Topology::SingleNode:
          return ring_seconds(bytes, world, intra);
        case Topology::RailsOnly:
          return hierarchical_seconds(bytes, cl.nodes, cl.gpus_per_node, intra, net);
        case Topology::FatTree:
          return std::min(ring_seconds(bytes, world, std::min(intra, net)),
                          hierarchical_seconds(bytes, cl.nodes, cl.gpus_per_node, intra, net));
      }
      return 0.0;
    };
    const double b = double(p.memory.bucket);
    const bool flat = cl.topology == Topology::SingleNode || cl.nodes == 1 ||
                      (cl.topology == Topology::FatTree &&
                       ring_seconds(b, world, std::min(intra, net)) <=
                           hierarchical_seconds(b, cl.nodes, cl.gpus_per_node, intra, net));
    p.algorithm = flat ? CollectiveAlgorithm::Ring : CollectiveAlgorithm::Hierarchical;
    p.rs_s = time(b);
    p.ag_s = time(b);
    // Overlap (docs/zero1.md): the reduce-scatters ride on the last micro-batch's backward (2/3
    // of its compute), except the embedding's bucket, which starts after it; the all-gathers
    // ride on the update and the next first forward (1/3 of a micro-batch).
    const double forward_mb = p.compute_s / double(t.grad_accum) / 3;
    p.rs_exposed_s = std::max(time(double(p.embedding_bucket_bytes)), p.rs_s - 2 * forward_mb);
    p.ag_exposed_s = std::max(0.0, p.ag_s - p.optimizer_s - forward_mb);
  }
  p.step_s = p.compute_s + p.optimizer_s + p.rs_exposed_s + p.ag_exposed_s;
  p.tokens_per_s = double(p.tokens_per_step) / p.step_s;
  p.days_per_trillion = 1e12 / p.tokens_per_s / 86400;

  // --- checkpoints: the files, as the writers size them ---
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : layout.specs) tensors.emplace_back(s.name, shaped(s.shape));
  uint64_t model_bytes = 0;
  if (c.semantics == Semantics::Original) {
    // save_model_dir: consecutive tensors, a new file past kDefaultMaxShardBytes.
    std::vector<std::vector<std::pair<std::string, Tensor>>> files(1);
    uint64_t in_file = 0;
    for (const auto& nt : tensors) {
      const uint64_t b = nt.second.nbytes();
      if (in_file > 0 && in_file + b > kDefaultMaxShardBytes) files.emplace_back(), in_file = 0;
      files.back().push_back(nt);
      in_file += b;
    }
    for (size_t k = 0; k < files.size(); ++k) {
      const std::string name = files.size() == 1 ? std::string("model.safetensors")
                                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors",
                                                               k + 1, files.size());
      p.model_files.emplace_back(name, safetensors_file_bytes(files[k], {{"format", "pt"}}));
      model_bytes += p.model_files.back().second;
    }
  } else {
    p.model_files_exact = false;  // native: stacked experts, other names; the data only
    p.model_files.emplace_back("model.safetensors (native layout: tensor data)",
                               layout.total * kF32);
    model_bytes = layout.total * kF32;
  }
  p.shard_bytes.resize(size_t(world));
  uint64_t shards_total = 0, largest_shard = 0;
  const OptimizerShardSizer sizer(shard_of(layout, c, plan, t.optim.use_muon, 0).layout);
  for (int r = 0; r < world; ++r) {
    p.shard_bytes[size_t(r)] =
        sizer.bytes(shard_of(layout, c, plan, t.optim.use_muon, r, false).slices, r, world);
    shards_total += p.shard_bytes[size_t(r)];
    if (r > 0) largest_shard = std::max(largest_shard, p.shard_bytes[size_t(r)]);
  }
  p.rank0_bytes = model_bytes + p.shard_bytes[0];
  p.largest_rank_bytes = std::max(p.rank0_bytes, largest_shard);
  p.total_bytes = model_bytes + shards_total;
  p.write_s = double(p.total_bytes) / (cl.storage_write_gbyte_per_s * 1e9);
  // The asynchronous snapshot: rank 0 copies the weights and its state, the others their state.
  const double snap = std::max(double(p.memory.weights + p.memory.optimizer_state),
                               double(p.memory.optimizer_state));
  p.snapshot_s = snap / (cl.host_copy_gbyte_per_s * 1e9);
  const double mtbf = in.mtbf_hours * 3600, restart = in.restart_minutes * 60;
  // A checkpoint's stall at an interval of tau seconds: async, the snapshot plus any wait for the
  // previous write still running; sync, the whole write.
  auto stall = [&](double tau) {
    return t.async_checkpoint ? p.snapshot_s + std::max(0.0, p.write_s - tau) : p.write_s;
  };
  p.interval_steps = checkpoint_interval(t);
  if (p.interval_steps <= 0) p.interval_steps = t.steps;  // 0: only at the end
  p.interval_stall_s = stall(double(p.interval_steps) * p.step_s);
  p.interval_goodput =
      goodput(double(p.interval_steps) * p.step_s, p.interval_stall_s, restart, mtbf);
  const double delta = t.async_checkpoint ? p.snapshot_s : p.write_s;
  p.young_s = young_interval(delta, mtbf);
  p.daly_s = daly_interval(delta, mtbf);
  // The best whole number of steps. Below the write time an asynchronous checkpoint waits for the
  // previous one (τ + δ constant: goodput grows with τ); above it, and for a synchronous one, δ is
  // constant and goodput unimodal in τ: its maximum by golden-section search, then the better of
  // the two step counts around it.
  const double lo = t.async_checkpoint ? p.write_s : 0.0;
  double a = lo, b = std::max(lo, 2 * mtbf);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 200 && b - a > 1e-9 * (1 + b); ++i) {
    const double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
    if (goodput(x1, delta, restart, mtbf) < goodput(x2, delta, restart, mtbf))
      a = x1;
    else
      b = x2;
  }
  const double k_best = (a + b) / 2 / p.step_s;
  for (double k : {std::floor(k_best), std::ceil(k_best)}) {
    const int64_t steps = std::max<int64_t>(1, int64_t(std::min(k, 1e15)));
    const double tau = double(steps) * p.step_s, g = goodput(tau, stall(tau), restart, mtbf);
    if (p.best_steps == 0 || g > p.best_goodput)
      p.best_goodput = g, p.best_steps = steps, p.best_stall_s = stall(tau);
  }
  return p;
}

nlohmann::ordered_json plan_json(const Plan& p) {
  using J = nlohmann::ordered_json;
  const TrainConfig& t = p.in.train;
  const Cluster& cl = p.in.cluster;
  J shards = J::array();
  for (uint64_t b : p.shard_bytes) shards.push_back(b);
  J model_files = J::array();
  for (const auto& [name, b] : p.model_files) model_files.push_back({{"file", name}, {"bytes", b}});
  return J{{"cluster",
            {{"name", cl.name},
             {"nodes", cl.nodes},
             {"gpus_per_node", cl.gpus_per_node},
             {"ranks", p.ranks},
             {"topology", std::string(enum_word(cl.topology))}}},
           {"run",
            {{"seq_len", t.seq_len},
             {"micro_batch", t.micro_batch},
             {"grad_accum", t.grad_accum},
             {"global_batch_rows", p.global_rows},
             {"tokens_per_step", p.tokens_per_step},
             {"precision", std::string(enum_word(t.precision))},
             {"optimizer", t.optim.use_muon ? "muon" : "adamw"},
             {"zero_bucket_mb", t.optim.zero_bucket_mb},
             {"checkpoint_async", t.async_checkpoint}}},
           {"assumptions",
            {{"mfu", p.in.mfu},
             {"mtbf_hours", p.in.mtbf_hours},
             {"restart_minutes", p.in.restart_minutes},
             {"reserve_gb", p.in.reserve_gb}}},
           {"model",
            {{"parameters", p.facts.params_total},
             {"active_parameters_without_embedding", p.facts.params_active_no_embedding},
             {"flops_per_token", p.flops_per_token}}},
           {"memory_per_gpu",
            {{"weights", p.memory.weights},
             {"gradients", p.memory.gradients},
             {"optimizer_state", p.memory.optimizer_state},
             {"zero_bucket", p.memory.bucket},
             {"zero_bucket_padding", p.bucket_padding},
             {"zero_shard", p.memory.shard},
             {"muon_scratch", p.memory.muon_scratch},
             {"activations", p.memory.activations},
             {"reported_total", p.memory.total()},
             {"workspace_estimate", p.workspace},
             {"total", p.memory.total() + p.workspace},
             {"capacity", p.capacity},
             {"fits", p.fits},
             {"weights_and_gradients_exceed_capacity",
              p.memory.weights + p.memory.gradients > p.capacity},
             {"suggested_zero_bucket_mb", p.suggested_bucket_mb >= 0
                                              ? nlohmann::ordered_json(p.suggested_bucket_mb)
                                              : nlohmann::ordered_json(nullptr)},
             {"suggested_zero_bucket", p.suggested_bucket},
             {"suggested_zero_bucket_padding", p.suggested_padding}}},
           {"collectives_per_step",
            {{"buckets", p.buckets},
             {"reduce_scatter_bytes", p.reduce_scatter_bytes},
             {"all_gather_bytes", p.all_gather_bytes},
             {"ring_bytes_sent_per_rank", p.ring_sent_per_rank},
             {"algorithm", std::string(enum_word(p.algorithm))},
             {"reduce_scatter_s", p.rs_s},
             {"all_gather_s", p.ag_s},
             {"reduce_scatter_exposed_s", p.rs_exposed_s},
             {"all_gather_exposed_s", p.ag_exposed_s}}},
           {"step",
            {{"compute_s", p.compute_s},
             {"muon_flops", p.muon_flops},
             {"optimizer_s", p.optimizer_s},
             {"step_s", p.step_s},
             {"tokens_per_s", p.tokens_per_s},
             {"days_per_trillion_tokens", p.days_per_trillion}}},
           {"checkpoint",
            {{"model_files", model_files},
             {"model_files_exact", p.model_files_exact},
             {"optimizer_shard_bytes", shards},
             {"rank0_bytes", p.rank0_bytes},
             {"largest_rank_bytes", p.largest_rank_bytes},
             {"total_bytes", p.total_bytes},
             {"write_s", p.write_s},
             {"snapshot_s", p.snapshot_s},
             {"interval_steps", p.interval_steps},
             {"interval_stall_s", p.interval_stall_s},
             {"interval_goodput", p.interval_goodput},
             {"young_interval_s", p.young_s},
             {"daly_interval_s", p.daly_s},
             {"best_interval_steps", p.best_steps},
             {"best_stall_s", p.best_stall_s},
             {"best_goodput", p.best_goodput}}}};
}

std::string plan_text(const Plan& p) {
  const TrainConfig& t = p.in.train;
  const Cluster& cl = p.in.cluster;
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  auto bytes_row = [&](const std::string& what, uint64_t b) {
    line(fmt::format("  {:<44} {:>18}  {:>10}", what, grouped(b), human(double(b))));
  };
  line(fmt::format("cluster: {}{} node(s) × {} GPUs = {} ranks, {}, {:g} GB each",
                   cl.name.empty() ? "" : cl.name + ": ", cl.nodes, cl.gpus_per_node, p.ranks,
                   enum_word(cl.topology), cl.gpu_memory_gb));
  line(fmt::format(
      "run: {} rows × {} tokens = {} tokens per step (micro_batch {} × grad_accum {} × {} "
      "ranks), {} GEMMs, {} with ZeRO-1",
      p.global_rows, t.seq_len, grouped(uint64_t(p.tokens_per_step)), t.micro_batch, t.grad_accum,
      p.ranks, enum_word(t.precision), t.optim.use_muon ? "Muon + AdamW" : "AdamW"));
  line(fmt::format("model: {} parameters ({} active without the embedding), {:.3g} FLOP per token",
                   grouped(uint64_t(p.facts.params_total)),
                   grouped(uint64_t(p.facts.params_active_no_embedding)), p.flops_per_token));
  line("");
  line("memory per GPU (bytes; each the largest rank's, as zaya train's start-up line reports it)");
  bytes_row("weights (F32)", p.memory.weights);
  bytes_row("gradients (F32)", p.memory.gradients);
  bytes_row("optimizer state (this rank's ZeRO-1 shard)", p.memory.optimizer_state);
  bytes_row("ZeRO bucket (gradients out, parameters back)", p.memory.bucket);
  bytes_row("ZeRO shard (the summed gradients owned)", p.memory.shard);
  bytes_row("Muon scratch", p.memory.muon_scratch);
  const bool bf16_storage =
      t.activations == ActivationsSetting::Bf16 ||
      (t.activations == ActivationsSetting::Auto && t.precision == ops::MatmulPrecision::BF16);
  bytes_row(fmt::format("activations ({} × {} tokens, {} storage)", t.micro_batch, t.seq_len,
                        bf16_storage ? "bf16" : "fp32"),
            p.memory.activations);
  bytes_row(fmt::format("workspace, estimate ({}-row head block + {:g} GB)", p.head_block_rows,
                        p.in.reserve_gb),
            p.workspace);
  const uint64_t total = p.memory.total() + p.workspace;
  line(fmt::format("  {:<44} {:>18}  {:>10}  of {}: {} ({:.0f}% used)", "total", grouped(total),
                   human(double(total)), human(double(p.capacity)),
                   p.fits ? "fits" : "DOES NOT FIT", 100.0 * double(total) / double(p.capacity)));
  if (p.memory.weights + p.memory.gradients > p.capacity)
    line(fmt::format(
        "  the weights and gradients alone ({}) exceed the GPU: ZeRO-1 keeps both whole on every "
        "rank, so this model needs sharded weights (ZeRO-3 or expert parallelism), which zaya "
        "does not have",
        human(double(p.memory.weights + p.memory.gradients))));
  if (p.suggested_bucket_mb >= 0)
    line(fmt::format(
        "  the ZeRO bucket is {:.0f}% zero padding ({} bucket(s), each ranks × its largest rank's "
        "share); {} pads {:.0f}% (bucket {})",
        100.0 * double(p.bucket_padding) / double(p.memory.bucket), p.buckets,
        p.suggested_bucket_mb == 0
            ? std::string("optim.zero_bucket_mb = 0 (one bucket)")
            : fmt::format("optim.zero_bucket_mb = {:g}", p.suggested_bucket_mb),
        100.0 * double(p.suggested_padding) / double(p.suggested_bucket),
        human(double(p.suggested_bucket))));
  line("");
  line(
      fmt::format("ZeRO-1 collectives per step (bytes per rank, as zaya train's first step reports "
                  "them): {} bucket(s)",
                  p.buckets));
  bytes_row("reduce-scatter buffer", p.reduce_scatter_bytes);
  bytes_row("all-gather buffer", p.all_gather_bytes);
  if (p.ranks > 1) {
    line(fmt::format(
        "  each sends and receives (ranks − 1)/ranks of it: {}; {} ({})",
        human(p.ring_sent_per_rank), enum_word(p.algorithm),
        p.algorithm == CollectiveAlgorithm::Ring
            ? fmt::format("{} ranks", p.ranks)
            : fmt::format("{} GPUs at {:g} GB/s, then {} nodes at {:g} Gbit/s", cl.gpus_per_node,
                          cl.intra_node_gbyte_per_s, cl.nodes, cl.network_gbit_per_s)));
    line(fmt::format("  reduce-scatter {}, all-gather {}; exposed after the overlap: {} and {}",
                     seconds_text(p.rs_s), seconds_text(p.ag_s), seconds_text(p.rs_exposed_s),
                     seconds_text(p.ag_exposed_s)));
  }
  line("");
  line(fmt::format("step (assumed MFU {:.0f}% of {:g} TFLOP/s {})", 100 * p.in.mfu,
                   t.precision == ops::MatmulPrecision::BF16 ? cl.bf16_tflops : cl.fp32_tflops,
                   enum_word(t.precision)));
  line(
      fmt::format("  compute {} + optimizer {} (Newton–Schulz {:.3g} FLOP on the busiest rank, "
                  "memory passes) + exposed communication {} = {}",
                  seconds_text(p.compute_s), seconds_text(p.optimizer_s), p.muon_flops,
                  seconds_text(p.rs_exposed_s + p.ag_exposed_s), seconds_text(p.step_s)));
  line(fmt::format("  {} tokens/s, {:.2f} days per trillion tokens",
                   grouped(uint64_t(p.tokens_per_s)), p.days_per_trillion));
  line("");
  line("checkpoint (bytes of the files the manifest lists; the small JSON files aside)");
  for (const auto& [name, b] : p.model_files) bytes_row("model/" + name, b);
  const size_t shown = std::min<size_t>(p.shard_bytes.size(), 4);
  for (size_t r = 0; r < shown; ++r)
    bytes_row(fmt::format("optimizer/optimizer_rank{:05d}.safetensors", r), p.shard_bytes[r]);
  if (shown < p.shard_bytes.size())
    line(fmt::format("  … {} more shards, {}–{} bytes each", p.shard_bytes.size() - shown,
                     grouped(*std::min_element(p.shard_bytes.begin() + 1, p.shard_bytes.end())),
                     grouped(*std::max_element(p.shard_bytes.begin() + 1, p.shard_bytes.end()))));
  bytes_row("rank 0 writes", p.rank0_bytes);
  bytes_row("the largest rank writes", p.largest_rank_bytes);
  bytes_row("in all", p.total_bytes);
  line(fmt::format(
      "  write {} at {:g} GB/s; {}", seconds_text(p.write_s), cl.storage_write_gbyte_per_s,
      t.async_checkpoint ? fmt::format("async: the step stalls {} for the copy to the host",
                                       seconds_text(p.snapshot_s))
                         : std::string("synchronous: the step stalls for the whole write")));
  line(
      fmt::format("  every {} steps ({}): {} stall each, goodput {:.2f}% (MTBF {:g} h, restart "
                  "{:g} min)",
                  p.interval_steps, seconds_text(double(p.interval_steps) * p.step_s),
                  seconds_text(p.interval_stall_s), 100 * p.interval_goodput, p.in.mtbf_hours,
                  p.in.restart_minutes));
  line(fmt::format("  Young √(2δM) = {}, Daly {}; best: every {} steps ({}) → goodput {:.2f}%",
                   seconds_text(p.young_s), seconds_text(p.daly_s), p.best_steps,
                   seconds_text(double(p.best_steps) * p.step_s), 100 * p.best_goodput));
  return o;
}

}  // namespace zaya
