#include "train/trainer.h"

#include <cblas.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/group.h"
#include "model/activations.h"
#include "model/inspect.h"
#include "model/transformer.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/schedule.h"

namespace zaya {

namespace {

namespace fs = std::filesystem;

// The machine's own sgemm rate (FLOP/s), measured once at start-up: the MFU denominator.
double measure_sgemm_rate() {
  const int n = 768;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  auto once = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  };
  once();  // warm-up: thread pool, caches
  Timer t;
  int reps = 0;
  do once(), ++reps;
  while (t.seconds() < 0.3);
  return 2.0 * n * n * double(n) * reps / t.seconds();
}

// Mean over MoE layers of the normalised entropy of the real experts' token shares (1 = even).
double expert_load_entropy(const ZayaConfig& c,
                           const std::map<int64_t, std::vector<int64_t>>& counts) {
  double sum = 0;
  int layers = 0;
  for (const auto& [layer, k] : counts) {
    const int64_t n = c.num_experts(layer);
    if (n < 2) continue;
    double total = 0, h = 0;
    for (int64_t e = 0; e < n; ++e) total += double(k[size_t(e)]);
    if (total == 0) continue;
    for (int64_t e = 0; e < n; ++e) {
      const double p = double(k[size_t(e)]) / total;
      if (p > 0) h -= p * std::log(p);
    }
    sum += h / std::log(double(n));
    ++layers;
  }
  return layers ? sum / layers : 1.0;
}

void add_counts(std::map<int64_t, std::vector<int64_t>>& into,
                const std::map<int64_t, std::vector<int64_t>>& from) {
  for (const auto& [layer, k] : from) {
    auto& dst = into[layer];
    if (dst.empty()) dst.assign(k.size(), 0);
    for (size_t e = 0; e < k.size(); ++e) dst[e] += k[e];
  }
}

Schedule make_schedule(const TrainConfig& cfg) {
  Schedule s;
  s.kind = cfg.schedule == "wsd"        ? Schedule::WSD
           : cfg.schedule == "constant" ? Schedule::Constant
                                        : Schedule::Cosine;
  s.warmup = cfg.warmup;
  s.total = cfg.steps;
  s.peak = cfg.lr;
  s.floor = cfg.min_lr;
  s.decay_fraction = cfg.decay_fraction;
  return s;
}

OptimizerConfig make_optimizer_config(const TrainConfig& cfg) {
  OptimizerConfig o;
  o.lr = cfg.lr;
  o.weight_decay = cfg.weight_decay;
  o.adam_beta1 = cfg.adam_beta1;
  o.adam_beta2 = cfg.adam_beta2;
  o.adam_eps = cfg.adam_eps;
  o.muon_momentum = cfg.muon_momentum;
  o.muon_ns_steps = int(cfg.muon_ns_steps);
  o.grad_clip = cfg.grad_clip;
  o.balance_lr = cfg.balance_lr;
  o.use_muon = cfg.use_muon;
  return o;
}

// Samples `n` tokens after `prompt` by full recomputation (the KV-cached path is `zaya generate`).
std::string sample_text(const Model& m, const Tokenizer& tok, const std::string& prompt, int64_t n,
                        double temperature, uint64_t seed) {
  std::vector<int32_t> ids;
  if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (int32_t id : tok.encode(prompt)) ids.push_back(id);
  const size_t prompt_len = ids.size();
  const int64_t V = m.config().vocab_size;
  CounterRng rng{seed, 0x5a4d};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t T = int64_t(ids.size());
    Activations a(m.config(), 1, T);
    model_forward(m, a, ids.data());
    const float* row = a.logits.ptr<float>() + (T - 1) * V;
    int32_t next = 0;
    if (temperature <= 0) {
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[next]) next = int32_t(v);
    } else {
      double mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
      std::vector<double> p(static_cast<size_t>(V));
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += p[size_t(v)] = std::exp((row[v] - mx) / temperature);
      double u = rng.uniform(uint64_t(i)) * sum;
      next = int32_t(V - 1);
      for (int64_t v = 0; v < V; ++v)
        if ((u -= p[size_t(v)]) <= 0) {
          next = int32_t(v);
          break;
        }
    }
    if (next == tok.eos_id()) break;
    ids.push_back(next);
  }
  return tok.decode(std::span<const int32_t>(ids.data() + prompt_len, ids.size() - prompt_len));
}

}  // namespace

TrainSummary run_training(const TrainConfig& cfg, const TrainOptions& opt) {
  std::unique_ptr<dist::Group> own_group;
  if (!opt.group) own_group = dist::make_group("single");
  dist::Group& group = opt.group ? *opt.group : *own_group;
  const int rank = group.rank(), world = group.size();
  if (opt.quiet || rank != 0) set_log_level(LogLevel::Quiet);  // rank 0 speaks for the run
  Timer wall;
  TrainSummary summary;

  // ---- model: resume > init_from > random init. Rank 0 picks the checkpoint (verifying it);
  // every rank resumes from the same one.
  std::string resume_dir;
  if (!cfg.checkpoint_dir.empty() && cfg.resume == "auto") {
    double step = -1;
    if (rank == 0) {
      const std::string latest = find_latest_valid_checkpoint(cfg.checkpoint_dir);
      if (!latest.empty())
        step = double(std::stoll(fs::path(latest).filename().string().substr(5)));
    }
    group.broadcast(Tensor(&step, {1}), 0);
    if (step >= 0) resume_dir = cfg.checkpoint_dir + "/" + checkpoint_dir_name(int64_t(step));
  } else if (cfg.resume != "auto" && cfg.resume != "none") {
    resume_dir = cfg.resume;
  }
  std::unique_ptr<Model> model;
  if (!resume_dir.empty())
    model = std::make_unique<Model>(
        load_config((fs::path(resume_dir) / "model" / "config.json").string()));
  else if (!cfg.init_from.empty())
    model = std::make_unique<Model>(Model::load_dir(cfg.init_from));
  else {
    model = std::make_unique<Model>(load_config(cfg.model_config));
    model->init_random(uint64_t(cfg.seed), cfg.init_std);  // the same bits on every rank
  }
  Model& m = *model;
  const ZayaConfig& c = m.config();
  m.zero_grads();
  Optimizer optim(m, make_optimizer_config(cfg), group);
  const Schedule schedule = make_schedule(cfg);

  // A row is a window of seq_len + 1 tokens: the model reads its first T = seq_len and predicts
  // the T after its first, so a step has global_rows · T scored (and routed) tokens.
  const int64_t T = cfg.seq_len, B = cfg.micro_batch;
  const int64_t global_rows = B * cfg.grad_accum * world;  // rows per optimizer step
  TokenLoader train_data(cfg.dataset, "train", T + 1, uint64_t(cfg.seed), rank, world);
  if (train_data.manifest().vocab_size > c.vocab_size)
    fail("dataset {} was tokenised with {} tokens but the model's vocab_size is {}", cfg.dataset,
         train_data.manifest().vocab_size, c.vocab_size);
  std::optional<TokenLoader> val_data;
  if (cfg.eval_batches == 0) {
    summary.val_status = "evaluation off (train.eval_batches = 0)";
  } else {
    try {
      val_data.emplace(cfg.dataset, "val", T + 1, uint64_t(cfg.seed), rank, world);
    } catch (const Error& e) {
      summary.val_status = "no validation split";
      log_info("train: no validation loss: {}", e.what());
    }
  }

  int64_t start_step = 0;
  nlohmann::json state;
  if (!resume_dir.empty()) {
    load_checkpoint(resume_dir, m, state, optim.state_to_load());
    start_step = state.at("step").get<int64_t>();
    optim.set_steps(state.at("optimizer_steps").get<int64_t>());
    train_data.restore(state.at("data").get<LoaderState>());  // global rows: any rank count
    summary.skipped = state.value("skipped", int64_t(0));
    log_info("train: resumed from {} at step {}", resume_dir, start_step);
    const int64_t saved_world = state.value("world_size", int64_t(1));
    if (saved_world != world)
      log_info("train: optimizer state resharded from {} to {} ranks", saved_world, world);
    const int64_t saved_rows = state.value("global_batch_rows", global_rows);
    if (saved_rows != global_rows)
      log_info(
          "warning: the checkpoint was trained with {} rows per step, this run uses {} "
          "(micro_batch × grad_accum × ranks); the run continues from the same data position",
          saved_rows, global_rows);
  }

  std::unique_ptr<Tokenizer> tokenizer;
  if (!cfg.tokenizer.empty())
    tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(cfg.tokenizer));
  if (tokenizer && tokenizer->vocab_size() > c.vocab_size)
    fail("tokenizer {} has {} tokens but the model's vocab_size is {}", cfg.tokenizer,
         tokenizer->vocab_size(), c.vocab_size);

  const ModelFacts facts = model_facts(c, cfg.seq_len);
  const double flops_per_token =
      3 * (facts.flops_matmul_per_token + facts.flops_attention_per_token);
  const double sgemm_rate = measure_sgemm_rate();
  log_info(
      "train: {} parameters ({} active without embedding), {} tokens/step, sgemm {:.1f} GFLOP/s",
      facts.params_total, facts.params_active_no_embedding, global_rows * cfg.seq_len,
      sgemm_rate / 1e9);
  double state_max = double(optim.state_bytes());  // the most any rank holds
  group.all_reduce(Tensor(&state_max, {1}), dist::ReduceOp::Max);
  const double state_total = double(optim.total_state_bytes());
  const ZeroPlan& plan = optim.plan();
  const auto [least, most] = std::minmax_element(plan.elements.begin(), plan.elements.end());
  log_info(
      "train: {} rank(s) ({}), global batch {} rows = {} × {} micro-batches × {} ranks; "
      "optimizer state: {:.3f} MiB per rank (of {:.3f} MiB total, ratio {:.4f}); shards of {}–{} "
      "parameters in a {} × {} bucket",
      world, group.backend(), global_rows, B, cfg.grad_accum, world, state_max / (1 << 20),
      state_total / (1 << 20), state_max / state_total, *least, *most, world, plan.chunk);

  std::ofstream metrics;
  if (!cfg.metrics.empty() && rank == 0) {
    const fs::path parent = fs::path(cfg.metrics).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    metrics.open(cfg.metrics, std::ios::app);
    if (!metrics) fail("cannot open metrics file {}", cfg.metrics);
  }
  std::unique_ptr<AsyncCheckpointWriter> async_writer;
  if (!cfg.checkpoint_dir.empty() && cfg.async_checkpoint) {
    async_writer =
        std::make_unique<AsyncCheckpointWriter>(group, cfg.checkpoint_dir, int(cfg.keep_last));
    CheckpointData shape;  // sizes the staging buffer in the background, off the first save
    shape.optimizer = optim.state_to_save();
    async_writer->prepare(m, shape);
  }

  Activations acts(c, B, T);
  std::vector<int32_t> inputs(size_t(B * T)), targets(size_t(B * T));
  // Every rank's gradient is a share of the global batch's mean: their sum is the mean.
  const double grad_scale = 1.0 / double(global_rows * T);

  // Collective: the mean over eval_batches global batches, split over the ranks like training.
  auto validation_loss = [&]() -> double {
    if (!val_data) return NAN;
    TokenLoader val(cfg.dataset, "val", T + 1, uint64_t(cfg.seed), rank, world);  // same each time
    double sum = 0;
    for (int64_t i = 0; i < cfg.eval_batches; ++i) {
      val.next_batch(inputs.data(), targets.data(), B);
      sum += model_forward(m, acts, inputs.data(), targets.data());
    }
    group.all_reduce(Tensor(&sum, {1}), dist::ReduceOp::Sum);
    return sum / double(cfg.eval_batches * world);
  };
  auto print_sample = [&](int64_t step) {
    if (!tokenizer || cfg.sample_tokens == 0 || rank != 0) return;
    const std::string text =
        sample_text(m, *tokenizer, cfg.sample_prompt, cfg.sample_tokens, cfg.sample_temperature,
                    uint64_t(cfg.seed) + uint64_t(step));
    log_info("sample @ step {}: {}{}", step, cfg.sample_prompt, text);
  };
  auto save = [&](int64_t step) {
    if (cfg.checkpoint_dir.empty()) return;
    CheckpointData d;
    d.trainer_state = {{"step", step},
                       {"optimizer_steps", optim.steps()},
                       {"data", train_data.state()},
                       {"skipped", summary.skipped},
                       {"world_size", world},
                       {"global_batch_rows", global_rows},
                       {"config", train_config_to_json(cfg)}};
    d.optimizer = optim.state_to_save();
    if (async_writer) {
      async_writer->save(step, m, d);
      log_info("checkpoint: step {} (async, stall {:.3f}s)", step,
               async_writer->last_stall_seconds());
    } else {
      Timer t;
      const std::string path =
          save_checkpoint(group, cfg.checkpoint_dir, step, m, d, int(cfg.keep_last));
      log_info("checkpoint: {} ({:.2f}s)", path, t.seconds());
    }
  };

  if (start_step == 0) {
    summary.first_val_loss = validation_loss();
    if (val_data) log_info("step {:>6}  val_loss {:.4f}", 0, summary.first_val_loss);
  }
  Timer since_log;
  int64_t tokens_since_log = 0;
  for (int64_t step = start_step; step < cfg.steps; ++step) {
    Timer step_timer;
    m.zero_grads();
    double loss = 0;
    std::map<int64_t, std::vector<int64_t>> counts;
    for (int64_t micro = 0; micro < cfg.grad_accum; ++micro) {
      train_data.next_batch(inputs.data(), targets.data(), B);
      loss += model_forward(m, acts, inputs.data(), targets.data()) / double(cfg.grad_accum);
      add_counts(counts, count_routing(c, acts));
      model_backward(m, acts, grad_scale);
    }
    const double norm = optim.reduce_gradients(m);  // same on every rank
    // One all-reduce agrees on the loss (mean over ranks), whether any rank's loss is non-finite,
    // and the routing counts of the global batch (exact in double).
    std::vector<double> agreed = {loss, std::isfinite(loss) ? 0.0 : 1.0};
    for (const auto& [layer, k] : counts)
      for (int64_t n : k) agreed.push_back(double(n));
    group.all_reduce(Tensor(agreed.data(), {int64_t(agreed.size())}), dist::ReduceOp::Sum);
    loss = agreed[0] / double(world);
    size_t at = 2;
    for (auto& [layer, k] : counts)
      for (int64_t& n : k) n = int64_t(agreed[at++]);
    const double lr = schedule.lr(step);
    const bool skip = agreed[1] > 0 || !std::isfinite(loss) || !std::isfinite(norm);
    if (skip) {
      ++summary.skipped;
      log_info("step {:>6}  non-finite loss {} or grad norm {}: step skipped", step + 1, loss,
               norm);
    } else {
      optim.update(m, lr);
      optim.update_balancing_biases(m, counts);
    }
    const int64_t tokens = global_rows * T;
    tokens_since_log += tokens;
    const double step_s = step_timer.seconds();
    const double tps = double(tokens) / step_s;
    const double mfu = tps * flops_per_token / (sgemm_rate * world);
    const double entropy = expert_load_entropy(c, counts);
    if (step == start_step) summary.first_loss = loss;
    summary.last_loss = loss;
    summary.steps_done = step + 1;
    if (metrics.is_open()) {
      nlohmann::json j = {{"step", step + 1},
                          {"loss", loss},
                          {"grad_norm", norm},
                          {"lr", lr},
                          {"tokens", (step + 1) * tokens},
                          {"tokens_per_s", tps},
                          {"mfu", mfu},
                          {"skipped", summary.skipped},
                          {"expert_load_entropy", entropy},
                          {"time", wall.seconds()}};
      metrics << j.dump() << "\n" << std::flush;
    }
    const bool stop = step + 1 == opt.stop_at_step;
    const bool last = step + 1 == cfg.steps;
    if ((step + 1) % cfg.log_every == 0 || last) {
      const double rate = double(tokens_since_log) / since_log.seconds();
      const double eta = double(cfg.steps - step - 1) * double(tokens) / rate;
      log_info(
          "step {:>6}/{}  loss {:.4f}  grad_norm {:.3f}  lr {:.2e}  {:.0f} tok/s  mfu {:.1f}%  "
          "expert_entropy {:.3f}  eta {:.0f}s",
          step + 1, cfg.steps, loss, norm, lr, rate,
          100 * rate * flops_per_token / (sgemm_rate * world), entropy, eta);
      since_log.reset();
      tokens_since_log = 0;
    }
    if (val_data && ((cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0) || last)) {
      summary.last_val_loss = validation_loss();
      log_info("step {:>6}  val_loss {:.4f}", step + 1, summary.last_val_loss);
    }
    if ((cfg.sample_every > 0 && (step + 1) % cfg.sample_every == 0) || last)
      print_sample(step + 1);
    if ((cfg.checkpoint_every > 0 && (step + 1) % cfg.checkpoint_every == 0) || last || stop)
      save(step + 1);
    if (stop) break;
  }
  if (async_writer) async_writer->wait();
  summary.seconds = wall.seconds();
  return summary;
}

}  // namespace zaya
