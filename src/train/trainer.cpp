// The Trainer (trainer.h). Setup picks the starting point (resume > init_from > random init),
// builds the optimizer and the data loaders and restores a checkpoint's TrainerState; train_step is
// the step of system.md §3 over rows of seq_len inputs and their next-token targets; after_step
// does everything a step is followed by, on the schedule the config gives. Rank 0 speaks for the
// run (logs, metrics, samples); every collective is called by every rank in the same order.
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "perf/gpu_gemm_rate.h"
#include "perf/sgemm.h"
#include "core/arena.h"
#include "core/device.h"
#include "core/heartbeat.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/tokenizer.h"
#include "dist/group.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "model/activations.h"
#include "model/inspect.h"
#include "model/transformer.h"
#include "ops/blas_kernels.h"
#include "ops/gpu/gemm_table_runtime.h"
#include "ops/precision.h"
#include "train/anomaly.h"
#include "checkpoint/async_writer.h"
#include "train/balance.h"
#include "checkpoint/checkpoint.h"
#include "resilience/faults.h"
#include "train/metrics_log.h"
#include "train/optimizer.h"
#include "resilience/run_events.h"
#include "train/schedule.h"
#include "train/straggler.h"
#include "train/token_staging.h"

namespace zaya {

namespace fs = std::filesystem;

void to_json(nlohmann::json& j, const DataWindow& w) {
  j = {{"step", w.step}, {"data", w.at}, {"rows", w.rows}};
}

void from_json(const nlohmann::json& j, DataWindow& w) {
  if (!j.is_object() || !j.contains("step") || !j.contains("data") || !j.contains("rows") ||
      !j.at("step").is_number_integer() || !j.at("rows").is_number_integer() ||
      j.at("rows").get<int64_t>() < 0)
    fail("trainer_state.json: a data window must be {{\"step\", \"data\", \"rows\"}}, got {}",
         j.dump());
  w.step = j.at("step").get<int64_t>();
  w.at = j.at("data").get<LoaderState>();
  w.rows = j.at("rows").get<int64_t>();
}

void to_json(nlohmann::json& j, const TrainerState& s) {
  j = {{"step", s.step},
       {"optimizer_steps", s.optimizer_steps},
       {"data", s.data},
       {"skipped", s.skipped},
       {"world_size", s.world_size},
       {"global_batch_rows", s.global_batch_rows},
       {"config", s.config},
       {"anomaly", s.anomaly},
       {"anomalous", s.anomalous},
       {"skip_data", s.skip_data}};
}

void from_json(const nlohmann::json& j, TrainerState& s) {
  auto count = [&](const char* key, int64_t fallback, bool required) -> int64_t {
    if (!j.contains(key)) {
      if (required) fail("trainer_state.json: missing '{}'", key);
      return fallback;
    }
    if (!j.at(key).is_number_integer() || j.at(key).get<int64_t>() < 0)
      fail("trainer_state.json: '{}' must be a non-negative integer, got {}", key,
           j.at(key).dump());
    return j.at(key).get<int64_t>();
  };
  if (!j.is_object()) fail("trainer_state.json: expected a JSON object");
  s.step = count("step", 0, true);
  s.optimizer_steps = count("optimizer_steps", 0, true);
  s.skipped = count("skipped", 0, false);
  s.world_size = count("world_size", 1, false);
  s.global_batch_rows = count("global_batch_rows", 0, false);
  if (!j.contains("data")) fail("trainer_state.json: missing 'data'");
  s.data = j.at("data").get<LoaderState>();
  s.config = j.value("config", nlohmann::json::object());
  s.anomaly = j.value("anomaly", nlohmann::json::object());
  const auto windows = [&](const char* key) {
    std::vector<DataWindow> out;
    if (!j.contains(key)) return out;
    if (!j.at(key).is_array()) fail("trainer_state.json: '{}' must be an array", key);
    for (const nlohmann::json& w : j.at(key)) out.push_back(w.get<DataWindow>());
    return out;
  };
  s.anomalous = windows("anomalous");
  s.skip_data = windows("skip_data");
}

namespace {

// Mean over MoE layers of the normalised entropy of the real experts' token shares (1 = even).
double expert_load_entropy(const ZayaConfig& c, const RoutingCounts& counts) {
  double sum = 0;
  int layers = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t n = c.is_attention(i) ? 0 : c.num_experts(i);
    if (n < 2) continue;
    const std::span<const double> k = counts.layer(i);
    double total = 0, h = 0;
    for (int64_t e = 0; e < n; ++e) total += k[size_t(e)];
    if (total == 0) continue;
    for (int64_t e = 0; e < n; ++e) {
      const double p = k[size_t(e)] / total;
      if (p > 0) h -= p * std::log(p);
    }
    sum += h / std::log(double(n));
    ++layers;
  }
  return layers ? sum / layers : 1.0;
}

// The newest valid checkpoint of the run (rank 0 verifies, every rank gets the same answer), or
// the one the config names; empty: start fresh.
std::string pick_resume_dir(const TrainConfig& cfg, dist::Group& group) {
  if (cfg.resume == "none") return "";
  if (cfg.resume != "auto") return cfg.resume;
  if (cfg.checkpoint_dir.empty()) return "";
  double step = -1;  // -2: rank 0 refused (checkpoints exist, none verifies)
  std::string refused;
  if (group.rank() == 0) {
    try {
      const std::string latest = find_resume_checkpoint(cfg.checkpoint_dir);
      if (!latest.empty()) step = double(checkpoint_step(latest));
    } catch (const Error& e) {
      step = -2, refused = e.what();
    }
  }
  group.broadcast(Tensor(&step, {1}), 0);
  if (step == -2) fail("{}", group.rank() == 0 ? refused : "rank 0 found no checkpoint to resume");
  return step < 0 ? "" : cfg.checkpoint_dir + "/" + checkpoint_dir_name(int64_t(step));
}

// train.device: the CPU, or the GPU on a machine that has one — one process, or one per GPU
// with the NCCL group (the mpi group cannot move the optimizer's GPU buckets).
Device train_device(const TrainConfig& cfg, const dist::Group& group) {
  if (cfg.device == "cpu") return Device::Cpu;
  if (group.backend() != "single" && group.backend() != "nccl")
    fail(
        "train.device = gpu needs the NCCL group (issue 17), this run has the {} group: launch "
        "`zaya train` with mpirun/srun (it picks nccl for train.device = gpu), or run one process "
        "(this run has {} ranks)",
        group.backend(), group.size());
  if (!gpu::available()) fail("train.device = gpu: {}", gpu::describe());
  return Device::Gpu;
}

// The MFU denominator, measured once at setup: the CPU's sgemm rate, or the GPU's GEMM rate for
// the run's precision (BF16 or F32 operands, f32 accumulation: bench/gpu_gemm_rate.h). The GPU
// probe grows from 128³ until one product takes ≥ 1 ms or n reaches 4096, so it stays short where
// the device is slow. `source` names what was measured, for the log.
double measure_matmul_rate(Device device, ops::MatmulPrecision precision, std::string& source) {
  if (device == Device::Cpu) {
    source = fmt::format("sgemm ({} kernels)", ops::blas_core_name());
    return measure_sgemm_rate();
  }
  const DType dtype = precision == ops::MatmulPrecision::BF16 ? DType::BF16 : DType::F32;
  double rate = 0;
  for (int64_t n = 128; n <= 4096; n *= 2) {
    GpuGemmProbe probe(n, dtype);
    rate = probe.pass();
    source = fmt::format("GPU {} GEMM ({}³, {})", dtype == DType::BF16 ? "bf16" : "f32", n,
                         probe.engine());
    if (2.0 * double(n) * double(n) * double(n) / rate >= 1e-3) break;
  }
  return rate;
}

// The model on `device`: a resumed checkpoint's weights are loaded later (load_checkpoint).
std::unique_ptr<Model> make_model(const TrainConfig& cfg, const std::string& resume_dir,
                                  Device device) {
  // checkpoint.layout picks the saved layout and so the semantics trained with (a resumed
  // checkpoint already has them).
  const Semantics layout =
      cfg.checkpoint_layout == "native" ? Semantics::Native : Semantics::Original;
  if (!resume_dir.empty()) {
    ZayaConfig rc = load_config((fs::path(resume_dir) / "model" / "config.json").string());
    if (rc.semantics != layout)
      fail(
          "checkpoint {} holds the {} layout but checkpoint.layout is '{}' (resume with the same "
          "layout, or `zaya convert` the model)",
          resume_dir, semantics_name(rc.semantics), cfg.checkpoint_layout);
    return std::make_unique<Model>(rc, device);
  }
  if (!cfg.init_from.empty()) {
    auto src = std::make_unique<Model>(Model::load_dir(cfg.init_from, device));
    if (src->config().semantics == layout) return src;
    log_info("warning: {} holds the {} layout; training it with {} semantics (checkpoint.layout)",
             cfg.init_from, semantics_name(src->config().semantics), cfg.checkpoint_layout);
    auto m = std::make_unique<Model>(with_semantics(src->config(), layout), device);
    const int64_t total = int64_t(src->layout().total);  // same parameter layout
    device_copy(Tensor(m->params(), {total}).on(device), Tensor(src->params(), {total}).on(device));
    return m;
  }
  auto m = std::make_unique<Model>(with_semantics(load_config(cfg.model_config), layout), device);
  m->init_random(uint64_t(cfg.seed), cfg.init_std);  // the same bits on every rank
  return m;
}

// Every rank's host name (a fixed 64 bytes each, gathered by one all-reduce of I32 codes).
std::vector<std::string> gather_hosts(dist::Group& group) {
  constexpr int kChars = 64;
  std::vector<int32_t> codes(size_t(group.size() * kChars), 0);
  char name[kChars] = {};
  gethostname(name, kChars - 1);
  for (int i = 0; i < kChars && name[i]; ++i)
    codes[size_t(group.rank() * kChars + i)] = int32_t(static_cast<unsigned char>(name[i]));
  group.all_reduce(Tensor(codes.data(), {int64_t(codes.size())}), dist::ReduceOp::Sum);
  std::vector<std::string> hosts(size_t(group.size()));
  for (int r = 0; r < group.size(); ++r)
    for (int i = 0; i < kChars && codes[size_t(r * kChars + i)]; ++i)
      hosts[size_t(r)] += char(codes[size_t(r * kChars + i)]);
  return hosts;
}

}  // namespace

struct Trainer::Impl {
  const TrainConfig cfg;
  const TrainOptions opt;
  std::unique_ptr<dist::Group> own_group;
  dist::Group& group;
  const int rank, world;
  Timer wall;
  TrainSummary summary;
  TrainerState state;

  Device device = Device::Cpu;  // train.device: the model, optimizer and activations live there
  // train.precision: the GEMMs of the forward and backward passes (training and validation);
  // the optimizer's own matrix products (Newton–Schulz) keep the device's default.
  ops::MatmulPrecision precision = ops::MatmulPrecision::F32;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optim;
  Schedule schedule;
  // A row is a window of seq_len + 1 tokens: the model reads its first T = seq_len and predicts
  // the T after its first, so a step has global_rows · T scored (and routed) tokens.
  const int64_t T, B, global_rows;
  std::optional<TokenLoader> train_data;
  bool has_val = false;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<AsyncCheckpointWriter> async_writer;
  MetricsLog metrics;
  double flops_per_token = 0, matmul_rate = 0;  // the MFU denominator (measure_matmul_rate)

  std::optional<Activations> acts;
  std::vector<int32_t> inputs, targets;  // [B, T] each: evaluation's
  // Training's micro-batch tokens: page-locked slots on a GPU, copied asynchronously
  // (token_staging.h). Each micro-batch's loss sum stays on the device (loss_sums, F64
  // [grad_accum]) until the step reads them all at once, with the positions each scored.
  std::optional<TokenStaging> staging;
  Buffer loss_sums;
  std::vector<double> loss_sums_host;
  std::vector<int64_t> scored;
  // What the ranks agree on after a step, in one F64 buffer: [loss, non-finite flag], then the
  // routing counts of every MoE layer (RoutingCounts' flat buffer follows).
  std::vector<double> agreed;
  std::optional<RoutingCounts> counts;

  int64_t tokens_since_log = 0;
  Timer since_log;
  bool stopped = false;

  // Fault handling: spikes, rollbacks, stragglers (anomaly.h, straggler.h) and the supervisor's
  // events (run_events.h). The agreed buffer ends with one compute-time slot per rank.
  AnomalyDetector anomaly;
  StragglerTracker stragglers;
  RunEvents events;
  size_t time_slots = 0;  // index of rank 0's slot in `agreed`
  std::vector<double> rank_seconds;
  std::vector<std::string> hosts;       // of every rank
  std::map<int64_t, int> rollbacks_to;  // rollbacks per target step (a bound on retries)
  bool warned_no_rollback = false;

  Impl(const TrainConfig& c, const TrainOptions& o, dist::Group* g)
      : cfg(c),
        opt(o),
        own_group(g ? nullptr : dist::make_group("single")),
        group(g ? *g : *own_group),
        rank(group.rank()),
        world(group.size()),
        T(c.seq_len),
        B(c.micro_batch),
        global_rows(c.micro_batch * c.grad_accum * group.size()),
        anomaly(AnomalyConfig{c.anomaly_window, c.anomaly_z}),
        stragglers(group.size(), StragglerConfig{c.straggler_factor, c.straggler_steps}) {}

  const ZayaConfig& config() const { return model->config(); }
  void setup();
  void open_data();
  void resume_from(const std::string& dir);
  void log_setup();
  double validation_loss();
  void print_sample(int64_t step);
  void save(int64_t step);
  StepResult train_step();
  void after_step(const StepResult& r);
  void skip_discarded_windows();
  bool judge(const StepResult& r, bool nonfinite, const LoaderState& window_start);
  void rollback(int64_t step);
  // The last update's parameter all-gathers finished (they are left in flight for the next
  // step's forward to overlap): before anything else reads or replaces the parameters.
  void settle() { optim->finish_update(*model); }
  void note_stragglers(int64_t step);
  void corrupt_checkpoint(int64_t step);
};

void Trainer::Impl::setup() {
  if (opt.quiet || rank != 0) set_log_level(LogLevel::Quiet);  // rank 0 speaks for the run
  device = train_device(cfg, group);
  precision = ops::parse_matmul_precision(cfg.precision);
  if (!cfg.gemm_table.empty())  // train.gemm_table (validate_train_config: device gpu)
    log_info("train: GEMM table {}: {} tuned GEMMs", cfg.gemm_table,
             gpu::load_gemm_table(cfg.gemm_table));
  heartbeat::start(rank, world);
  faults::install(rank);
  events.open(rank);
  if (!cfg.checkpoint_dir.empty() && rank == 0) remove_stale_checkpoint_temps(cfg.checkpoint_dir);
  const std::string resume_dir = pick_resume_dir(cfg, group);
  model = make_model(cfg, resume_dir, device);
  model->zero_grads();
  optim = std::make_unique<Optimizer>(*model, cfg.optim, group);
  schedule = make_schedule(cfg.optim, cfg.steps);
  open_data();
  state.world_size = world;
  state.global_batch_rows = global_rows;
  state.config = train_config_to_json(cfg);
  if (!resume_dir.empty()) resume_from(resume_dir);

  if (!cfg.tokenizer.empty())
    tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(cfg.tokenizer));
  if (tokenizer && tokenizer->vocab_size() > config().vocab_size)
    fail("tokenizer {} has {} tokens but the model's vocab_size is {}", cfg.tokenizer,
         tokenizer->vocab_size(), config().vocab_size);

  const ModelFacts facts = model_facts(config(), cfg.seq_len);
  flops_per_token = 3 * (facts.flops_matmul_per_token + facts.flops_attention_per_token);
  std::string rate_source;
  matmul_rate = measure_matmul_rate(device, precision, rate_source);
  log_info("train: {} parameters ({} active without embedding), {} tokens/step, {} {:.1f} GFLOP/s",
           facts.params_total, facts.params_active_no_embedding, global_rows * cfg.seq_len,
           rate_source, matmul_rate / 1e9);
  log_setup();
  if (device != Device::Cpu)
    log_info("train: device {} ({}), precision {}", device_name(device), gpu::describe(),
             ops::matmul_precision_name(precision));

  // Cut back to the resumed step: every step once, even after a resume.
  if (!cfg.metrics.empty() && rank == 0) metrics = MetricsLog(cfg.metrics, state.step);
  if (!cfg.checkpoint_dir.empty() && cfg.async_checkpoint) {
    async_writer =
        std::make_unique<AsyncCheckpointWriter>(group, cfg.checkpoint_dir, int(cfg.keep_last));
    CheckpointData shape;  // sizes the staging buffer in the background, off the first save
    shape.optimizer = optim->state_to_save();
    async_writer->prepare(*model, shape);
  }

  const ActivationStorage storage =
      cfg.activations == "bf16" ||
              (cfg.activations == "auto" && precision == ops::MatmulPrecision::BF16)
          ? ActivationStorage::BF16
          : ActivationStorage::F32;
  acts.emplace(config(), B, T, device, false, storage);
  log_info(
      "train: activations {} MiB, stored {}{}", acts->bytes() >> 20,
      activation_storage_name(storage),
      storage == ActivationStorage::BF16
          ? fmt::format(" (fp32 storage: {} MiB)", Activations::bytes_needed(config(), B, T) >> 20)
          : std::string());
  inputs.assign(size_t(B * T), 0);
  targets.assign(size_t(B * T), 0);
  staging.emplace(device, B * T);
  if (device == Device::Gpu)
    log_info("train: tokens go through {} {} host slots, copied asynchronously", staging->slots(),
             staging->pinned() ? "page-locked" : "pageable (pin_host refused)");
  loss_sums = Buffer(size_t(cfg.grad_accum) * sizeof(double), device);
  loss_sums_host.assign(size_t(cfg.grad_accum), 0.0);
  scored.assign(size_t(cfg.grad_accum), 0);
  RoutingCounts shape(config());
  time_slots = 2 + shape.flat().size();
  agreed.assign(time_slots + size_t(world), 0.0);
  counts.emplace(config(), device);
  hosts = gather_hosts(group);

  if (state.step == 0) {
    summary.first_val_loss = validation_loss();
    if (has_val) log_info("step {:>6}  val_loss {:.4f}", 0, summary.first_val_loss);
  }
  events.write({{"event", "start"},
                {"world", world},
                {"resumed_step", state.step},
                {"setup_s", heartbeat::process_seconds()}});
  faults::at_setup();
  since_log.reset();
}

void Trainer::Impl::open_data() {
  train_data.emplace(cfg.dataset, "train", T + 1, uint64_t(cfg.seed), rank, world);
  if (train_data->manifest().vocab_size > config().vocab_size)
    fail("dataset {} was tokenised with {} tokens but the model's vocab_size is {}", cfg.dataset,
         train_data->manifest().vocab_size, config().vocab_size);
  if (cfg.eval_batches == 0) {
    summary.val_status = "evaluation off (train.eval_batches = 0)";
    return;
  }
  try {
    TokenLoader probe(cfg.dataset, "val", T + 1, uint64_t(cfg.seed), rank, world);
    has_val = true;
  } catch (const Error& e) {
    summary.val_status = "no validation split";
    log_info("train: no validation loss: {}", e.what());
  }
}

void Trainer::Impl::resume_from(const std::string& dir) {
  nlohmann::json j;
  load_checkpoint(dir, *model, j, optim->state_to_load());
  check_trainer_state(j, dir);
  const TrainerState saved = j.get<TrainerState>();
  state.step = saved.step;
  state.optimizer_steps = saved.optimizer_steps;
  state.skipped = saved.skipped;
  optim->set_steps(saved.optimizer_steps);
  train_data->restore(saved.data);  // global rows: any rank count
  state.data = train_data->state();
  summary.skipped = saved.skipped;
  state.anomalous = saved.anomalous;
  state.skip_data = saved.skip_data;
  anomaly = AnomalyDetector(AnomalyConfig{cfg.anomaly_window, cfg.anomaly_z});
  if (!saved.anomaly.empty()) anomaly.from_json(saved.anomaly);
  log_info("train: resumed from {} at step {}", dir, state.step);
  if (saved.world_size != world)
    log_info("train: optimizer state resharded from {} to {} ranks", saved.world_size, world);
  if (saved.global_batch_rows != 0 && saved.global_batch_rows != global_rows)
    log_info(
        "warning: the checkpoint was trained with {} rows per step, this run uses {} "
        "(micro_batch × grad_accum × ranks); the run continues from the same data position",
        saved.global_batch_rows, global_rows);
}

void Trainer::Impl::log_setup() {
  double state_max = double(optim->state_bytes());  // the most any rank holds
  group.all_reduce(Tensor(&state_max, {1}), dist::ReduceOp::Max);
  const double state_total = double(optim->total_state_bytes());
  const ZeroPlan& plan = optim->plan();
  const auto [least, most] = std::minmax_element(plan.elements.begin(), plan.elements.end());
  const std::string sharding =
      world == 1 ? std::string("one rank: the gradients are read in place, no ZeRO bucket")
                 : fmt::format(
                       "shards of {}–{} parameters in a {} × {} bucket buffer, {} "
                       "bucket(s) reduced as the backward finishes them",
                       *least, *most, world, plan.chunk, plan.buckets.size());
  log_info(
      "train: {} rank(s) ({}), global batch {} rows = {} × {} micro-batches × {} ranks; "
      "optimizer state: {:.3f} MiB per rank (of {:.3f} MiB total, ratio {:.4f}); {}",
      world, group.backend(), global_rows, B, cfg.grad_accum, world, state_max / (1 << 20),
      state_total / (1 << 20), state_max / state_total, sharding);
}

// Collective: the mean over eval_batches global batches, split over the ranks like training.
double Trainer::Impl::validation_loss() {
  if (!has_val) return NAN;
  settle();
  TokenLoader val(cfg.dataset, "val", T + 1, uint64_t(cfg.seed), rank, world);  // same each time
  double sum = 0;
  for (int64_t i = 0; i < cfg.eval_batches; ++i) {
    val.next_batch(inputs.data(), targets.data(), B);
    const ops::MatmulPrecisionScope matmuls(device, precision);
    sum += model_forward(*model, *acts, inputs.data(), targets.data());
  }
  group.all_reduce(Tensor(&sum, {1}), dist::ReduceOp::Sum);
  return sum / double(cfg.eval_batches * world);
}

// A sample from the current weights through infer/'s KV-cached decoder and sampler.
void Trainer::Impl::print_sample(int64_t step) {
  if (!tokenizer || cfg.sample_tokens == 0 || rank != 0) return;
  settle();
  GenerationRequest req;
  if (tokenizer->bos_id() >= 0) req.prompt.push_back(tokenizer->bos_id());
  for (int32_t id : tokenizer->encode(cfg.sample_prompt)) req.prompt.push_back(id);
  if (req.prompt.empty()) req.prompt.push_back(tokenizer->eos_id() >= 0 ? tokenizer->eos_id() : 0);
  const int64_t room = config().max_position_embeddings - int64_t(req.prompt.size());
  if (room <= 0) return;
  req.sampling.temperature = cfg.sample_temperature;
  req.sampling.seed = uint64_t(cfg.seed) + uint64_t(step);
  req.sampling.max_new_tokens = std::min(cfg.sample_tokens, room);
  // infer/ decodes on the host: a GPU model's weights are copied over for the sample.
  std::unique_ptr<Model> host;
  if (model->device() != Device::Cpu) {
    host = std::make_unique<Model>(config());
    const int64_t total = int64_t(model->layout().total);
    device_copy(Tensor(host->params(), {total}), Tensor(model->params(), {total}).on(device));
  }
  const InferModel im = InferModel::from_model(host ? *host : *model);  // views of F32 weights
  Engine engine(im, tokenizer.get(), EngineOptions{1, 0, 512});
  std::string text;
  bool done = false;
  engine.submit(std::move(req), [&](const GenerationEvent& ev) {
    text += ev.text;
    done = ev.done;
  });
  while (!done) engine.step();
  log_info("sample @ step {}: {}{}", step, cfg.sample_prompt, text);
}

void Trainer::Impl::save(int64_t step) {
  if (cfg.checkpoint_dir.empty()) return;
  settle();
  CheckpointData d;
  state.data = train_data->state();
  state.anomaly = anomaly.to_json();
  d.trainer_state = state;
  d.optimizer = optim->state_to_save();
  if (async_writer) {
    async_writer->save(step, *model, d);
    log_info("checkpoint: step {} (async, stall {:.3f}s)", step,
             async_writer->last_stall_seconds());
  } else {
    Timer t;
    const std::string path =
        save_checkpoint(group, cfg.checkpoint_dir, step, *model, d, int(cfg.keep_last));
    log_info("checkpoint: {} ({:.2f}s)", path, t.seconds());
  }
}

StepResult Trainer::Impl::train_step() {
  using heartbeat::Section;
  Timer step_timer;
  heartbeat::begin_step(state.step + 1);
  heartbeat::enter(Section::Data);
  skip_discarded_windows();
  const LoaderState window_start = train_data->state();
  Model& m = *model;
  // Every rank's gradient is a share of the global batch's mean: their sum is the mean.
  const double grad_scale = 1.0 / double(global_rows * T);
  m.zero_grads();
  counts->clear();
  // On a GPU this loop adds no wait for the device of its own: tokens go through the staging
  // slots, the loss sums and routing counts stay there until after it. (The model still waits
  // inside: each MoE layer's forward reads its expert offsets back; so the host runs
  // ahead of the device by at most about one layer.)
  for (int64_t micro = 0; micro < cfg.grad_accum; ++micro) {
    heartbeat::enter(Section::Data);
    const TokenStaging::Slot slot = staging->next();
    train_data->next_batch(slot.inputs, slot.targets, B);
    scored[size_t(micro)] = ops::count_scored(Tensor(slot.targets, {B * T}));  // host memory
    heartbeat::enter(Section::ForwardBackward);
    const ops::MatmulPrecisionScope matmuls(device, precision);
    // (The LM head's backward rides along with its forward: one logits product, not two.)
    const Tensor loss_sum = Tensor(static_cast<double*>(loss_sums.data()) + micro, {1}).on(device);
    // The first forward finishes the last update's all-gathers layer by layer as it reads them
    // (all of them by its last hook, before the final merge).
    model_forward_and_head_backward(
        m, *acts, slot.inputs, slot.targets, grad_scale, loss_sum,
        micro == 0 ? LayerStart([&](int64_t layer) { optim->parameters_needed(m, layer); })
                   : LayerStart());
    staging->issued();
    counts->add(config(), *acts);
    // The last micro-batch's backward starts the ZeRO-1 buckets' reduce-scatters as it finishes
    // their layers (Optimizer::gradients_ready).
    const bool last = micro + 1 == cfg.grad_accum;
    model_backward(
        m, *acts, grad_scale,
        last ? LayerDone([&](int64_t layer) { optim->gradients_ready(m, layer); }) : LayerDone());
  }
  // The loss sums and routing counts of the step, read once.
  device_copy(Tensor(loss_sums_host.data(), {cfg.grad_accum}),
              Tensor(static_cast<double*>(loss_sums.data()), {cfg.grad_accum}).on(device));
  counts->to_host();
  double loss = 0;  // the micro-batches' means, averaged
  for (size_t k = 0; k < scored.size(); ++k)
    loss += (scored[k] ? loss_sums_host[k] / double(scored[k]) : 0.0) / double(cfg.grad_accum);
  const double norm = optim->reduce_gradients(m);  // same on every rank
  loss = faults::apply_loss_fault(state.step + 1, loss);
  // One all-reduce agrees on the loss (mean over ranks), whether any rank's loss is non-finite,
  // the routing counts of the global batch (exact in double), and each rank's compute time so
  // far (outside collectives: the straggler check).
  agreed[0] = loss;
  agreed[1] = std::isfinite(loss) ? 0.0 : 1.0;
  std::copy(counts->flat().begin(), counts->flat().end(), agreed.begin() + 2);
  std::fill(agreed.begin() + ptrdiff_t(time_slots), agreed.end(), 0.0);
  agreed[time_slots + size_t(rank)] =
      step_timer.seconds() - heartbeat::collective_seconds_this_step();
  group.all_reduce(Tensor(agreed.data(), {int64_t(agreed.size())}), dist::ReduceOp::Sum);
  std::copy(agreed.begin() + 2, agreed.begin() + ptrdiff_t(time_slots), counts->flat().begin());
  rank_seconds.assign(agreed.begin() + ptrdiff_t(time_slots), agreed.end());

  StepResult r;
  r.step = state.step + 1;
  r.loss = agreed[0] / double(world);
  r.grad_norm = norm;
  r.lr = schedule.lr(state.step);
  r.skipped = judge(r, agreed[1] > 0, window_start);
  if (!r.skipped) {
    heartbeat::enter(Section::Optimizer);
    optim->update(m, r.lr, norm, /*defer_gathers=*/true);  // finished by the next forward
    optim->update_balancing_biases(m, *counts);
  }
  state.step = r.step;
  state.optimizer_steps = optim->steps();
  r.tokens = global_rows * T;
  r.expert_load_entropy = expert_load_entropy(config(), *counts);
  r.seconds = step_timer.seconds();
  heartbeat::end_step(r.step, r.seconds);
  return r;
}

// The windows a rollback discarded: when the data position reaches one, it is passed over.
void Trainer::Impl::skip_discarded_windows() {
  for (bool again = true; again;) {
    again = false;
    const LoaderState at = train_data->state();
    for (const DataWindow& w : state.skip_data) {
      if (w.at.epoch != at.epoch || w.at.position != at.position) continue;
      train_data->advance(uint64_t(w.rows));
      log_info(
          "data: skipping the {} rows of step {}'s window (epoch {}, row {}): a rollback "
          "discarded them",
          w.rows, w.step, w.at.epoch, w.at.position);
      again = true;
      break;
    }
  }
}

// The anomaly verdict of step r (the same on every rank: its inputs are agreed). An anomalous
// step is skipped and counted, and its data window recorded for a rollback.
bool Trainer::Impl::judge(const StepResult& r, bool nonfinite, const LoaderState& window_start) {
  const AnomalyVerdict v = anomaly.observe(nonfinite ? NAN : r.loss, r.grad_norm);
  if (!v.anomaly) {
    state.anomalous.clear();
    return false;
  }
  ++state.skipped;
  state.anomalous.push_back({r.step, window_start, global_rows});
  if (v.kind == "nonfinite")
    log_info("step {:>6}  non-finite loss {} or grad norm {}: step skipped", r.step, r.loss,
             r.grad_norm);
  else
    log_info(
        "step {:>6}  {} (loss {:.4f}, grad_norm {:.3f}: z {:.1f} over the last {} steps): "
        "step skipped",
        r.step, v.kind == "loss_spike" ? "loss spike" : "gradient-norm spike", r.loss, r.grad_norm,
        v.z, cfg.anomaly_window);
  events.write({{"event", "anomaly"},
                {"step", r.step},
                {"kind", v.kind},
                {"loss", r.loss},
                {"grad_norm", r.grad_norm},
                {"z", v.z}});
  return true;
}

// Collective: back to the newest valid checkpoint before the anomalies in a row; their data
// windows are skipped from now on (exact: the data position is in the checkpoint), later
// checkpoints are discarded and the metrics file is cut back, so every step is logged once.
void Trainer::Impl::rollback(int64_t step) {
  settle();
  const int64_t first = state.anomalous.front().step;
  double target = -1;
  if (!cfg.checkpoint_dir.empty()) {
    if (async_writer) async_writer->wait();
    if (rank == 0) {
      const std::string dir = find_latest_valid_checkpoint(cfg.checkpoint_dir, first);
      if (!dir.empty()) target = double(checkpoint_step(dir));
    }
    group.broadcast(Tensor(&target, {1}), 0);
  }
  if (target < 0) {
    if (!warned_no_rollback)
      log_info(
          "warning: {} anomalous steps in a row (from step {}) but no checkpoint before them "
          "to roll back to: the steps stay skipped",
          state.anomalous.size(), first);
    warned_no_rollback = true;
    state.anomalous.clear();
    return;
  }
  const int64_t to = int64_t(target);
  if (++rollbacks_to[to] > 3)
    fail(
        "the loss keeps spiking after 3 rollbacks to step {} (last anomaly at step {}): the run "
        "is diverging; lower optim.lr or check the data",
        to, step);
  Timer took;
  std::vector<DataWindow> skip = state.skip_data;
  std::vector<int64_t> steps;
  for (const DataWindow& w : state.anomalous) skip.push_back(w), steps.push_back(w.step);
  if (rank == 0) discard_checkpoints_after(cfg.checkpoint_dir, to);
  group.barrier();
  resume_from(cfg.checkpoint_dir + "/" + checkpoint_dir_name(to));
  state.skip_data = std::move(skip);
  state.anomalous.clear();
  if (!cfg.metrics.empty() && rank == 0) metrics = MetricsLog(cfg.metrics, state.step);
  summary.steps_done = state.step;
  ++summary.rollbacks;
  log_info(
      "rollback: {} anomalous steps in a row ({}–{}): back to step {}; their data windows are "
      "skipped from now on",
      steps.size(), steps.front(), steps.back(), to);
  events.write({{"event", "rollback"},
                {"step", step},
                {"to_step", to},
                {"windows", steps},
                {"seconds", took.seconds()}});
}

void Trainer::Impl::note_stragglers(int64_t step) {
  if (world < 2) return;
  for (int r : stragglers.observe(rank_seconds)) {
    const double ratio = stragglers.ratios()[size_t(r)];
    log_info(
        "straggler: rank {} ({}) took {:.2f}x the other ranks' median compute time for {} "
        "steps in a row (step {})",
        r, hosts[size_t(r)], ratio, cfg.straggler_steps, step);
    events.write({{"event", "straggler"},
                  {"step", step},
                  {"rank", r},
                  {"host", hosts[size_t(r)]},
                  {"ratio", ratio}});
  }
}

// corrupt-checkpoint@step:N: flips a byte in the middle of the complete checkpoint's weights.
void Trainer::Impl::corrupt_checkpoint(int64_t step) {
  if (cfg.checkpoint_dir.empty() || !faults::corrupt_checkpoint_due(step)) return;
  if (async_writer) async_writer->wait();
  const std::string file =
      cfg.checkpoint_dir + "/" + checkpoint_dir_name(step) + "/model/model.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const std::streamoff middle = f.tellg() / 2;
  f.seekg(middle);
  const char byte = char(f.get());
  f.seekp(middle);
  f.put(char(~byte));
  if (!f) fail("fault injection: cannot corrupt {}", file);
  log_info("fault: corrupted {} (byte {})", file, int64_t(middle));
}

void Trainer::Impl::after_step(const StepResult& r) {
  Timer after;
  note_stragglers(r.step);
  const double tps = double(r.tokens) / r.seconds;
  if (summary.steps_done == 0) summary.first_loss = r.loss;
  summary.last_loss = r.loss;
  summary.steps_done = r.step;
  summary.skipped = state.skipped;
  tokens_since_log += r.tokens;
  if (metrics.is_open()) {
    nlohmann::json j = {{"step", r.step},
                        {"loss", r.loss},
                        {"grad_norm", r.grad_norm},
                        {"lr", r.lr},
                        {"tokens", r.step * r.tokens},
                        {"tokens_per_s", tps},
                        {"mfu", tps * flops_per_token / (matmul_rate * world)},
                        {"skipped", state.skipped},
                        {"expert_load_entropy", r.expert_load_entropy},
                        {"time", wall.seconds()}};
    if (world > 1) {  // per-rank compute seconds (outside collectives) and the stragglers now
      j["rank_compute_s"] = rank_seconds;
      j["stragglers"] = stragglers.current();
    }
    metrics.append(j);
  }
  stopped = r.step == opt.stop_at_step;
  const bool last = r.step == cfg.steps;
  if (r.step % cfg.log_every == 0 || last) {
    const double rate = double(tokens_since_log) / since_log.seconds();
    const double eta = double(cfg.steps - r.step) * double(r.tokens) / rate;
    log_info(
        "step {:>6}/{}  loss {:.4f}  grad_norm {:.3f}  lr {:.2e}  {:.0f} tok/s  mfu {:.1f}%  "
        "expert_entropy {:.3f}  eta {:.0f}s",
        r.step, cfg.steps, r.loss, r.grad_norm, r.lr, rate,
        100 * rate * flops_per_token / (matmul_rate * world), r.expert_load_entropy, eta);
    since_log.reset();
    tokens_since_log = 0;
  }
  if (last && !cfg.gemm_table.empty()) {
    const gpu::GemmTableStats t = gpu::gemm_table_stats();
    log_info(
        "train: GEMM table: {} of {} GEMM calls found their own line, {} the nearest row count's "
        "(a routed expert's), {} ran the default",
        t.exact, t.calls, t.nearest, t.calls - t.exact - t.nearest);
  }
  if (has_val && ((cfg.eval_every > 0 && r.step % cfg.eval_every == 0) || last)) {
    const heartbeat::Scope beat(heartbeat::Section::Eval);
    summary.last_val_loss = validation_loss();
    log_info("step {:>6}  val_loss {:.4f}", r.step, summary.last_val_loss);
  }
  if ((cfg.sample_every > 0 && r.step % cfg.sample_every == 0) || last) {
    const heartbeat::Scope beat(heartbeat::Section::Eval);
    print_sample(r.step);
  }
  if ((cfg.checkpoint_every > 0 && r.step % cfg.checkpoint_every == 0) || last || stopped) {
    const heartbeat::Scope beat(heartbeat::Section::Checkpoint);
    save(r.step);
    corrupt_checkpoint(r.step);
  }
  events.write({{"event", "step"},
                {"step", r.step},
                {"step_s", r.seconds},
                {"after_s", after.seconds()},
                {"skipped", r.skipped}});
  if (cfg.anomaly_rollback > 0 && int64_t(state.anomalous.size()) >= cfg.anomaly_rollback)
    rollback(r.step);
}

Trainer::Trainer(const TrainConfig& cfg, const TrainOptions& opt)
    : impl_(std::make_unique<Impl>(cfg, opt, opt.group)) {
  impl_->setup();
}

Trainer::~Trainer() = default;

bool Trainer::done() const {
  return impl_->stopped || impl_->state.step >= impl_->cfg.steps;
}

StepResult Trainer::train_step() {
  return impl_->train_step();
}

void Trainer::after_step(const StepResult& r) {
  impl_->after_step(r);
}

TrainSummary Trainer::finish() {
  impl_->settle();
  if (impl_->async_writer) impl_->async_writer->wait();
  heartbeat::enter(heartbeat::Section::Done);
  impl_->events.write({{"event", "done"}});
  impl_->summary.seconds = impl_->wall.seconds();
  return impl_->summary;
}

const TrainerState& Trainer::state() const {
  return impl_->state;
}

const Model& Trainer::model() const {
  impl_->settle();
  return *impl_->model;
}

const char* Trainer::activation_storage() const {
  return activation_storage_name(impl_->acts->storage());
}

size_t Trainer::activation_bytes() const {
  return impl_->acts->bytes();
}

TrainSummary run_training(const TrainConfig& cfg, const TrainOptions& opt) {
  Trainer t(cfg, opt);
  while (!t.done()) t.after_step(t.train_step());
  return t.finish();
}

}  // namespace zaya
