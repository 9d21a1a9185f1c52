// The Trainer (trainer.h). Setup picks the starting point (run_start.h: resume > init_from >
// random init), builds the optimizer and the data loaders and restores a checkpoint's
// TrainerState; train_step is the step of docs/training.md over rows of seq_len inputs and their
// next-token targets; after_step does everything a step is followed by, on the schedule the config
// gives, and hands what went wrong to Recovery (recovery.h). Rank 0 speaks for the run (logs,
// metrics, samples); every collective is called by every rank in the same order.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "core/arena.h"
#include "core/assert.h"
#include "core/device.h"
#include "core/heartbeat.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/shards.h"
#include "data/tokenizer.h"
#include "dist/group.h"
#include "io/file.h"
#include "model/activations.h"
#include "model/inspect.h"
#include "model/transformer.h"
#include "ops/gpu/gemm_table_runtime.h"
#include "ops/precision.h"
#include "perf/mfu.h"
#include "resilience/faults.h"
#include "resilience/fence.h"
#include "resilience/run_events.h"
#include "train/balance.h"
#include "train/metrics_log.h"
#include "train/optimizer.h"
#include "train/recovery.h"
#include "train/run_start.h"
#include "train/sample.h"
#include "train/schedule.h"
#include "train/stop_signal.h"
#include "train/token_staging.h"

namespace zaya {

namespace {

// The config the trainer runs: checkpoint.dir "none" is no checkpoints, checkpoint.every = -1 is
// resolved (train_config.h).
TrainConfig normalized(const TrainConfig& c) {
  TrainConfig n = c;
  n.checkpoint_dir = checkpoint_root(c);
  n.checkpoint_every = checkpoint_interval(c);
  return n;
}

// The slots of the agreed buffer before the routing counts (train_step).
enum AgreedSlot : size_t { kLoss, kNonFinite, kSigint, kSigterm, kCounts };

// The keys of a checkpoint's training config that shape the learning-rate schedule: a resumed run
// that changes one (train.steps raised to continue, say) sees a new learning rate from the next
// step on, which the anomaly window of the old schedule must not judge.
constexpr const char* kScheduleKeys[] = {"train.steps",  "optim.schedule", "optim.lr",
                                         "optim.min_lr", "optim.warmup",   "optim.decay_fraction"};

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
  // the T after its first, so a step has global_rows · T scored (and routed) tokens. B and accum
  // are train.micro_batch and train.grad_accum unless a resume on another number of ranks keeps
  // the checkpoint's global batch (keep_global_batch).
  const int64_t T;
  int64_t B, accum, global_rows;
  std::optional<TokenLoader> train_data;
  bool has_val = false;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<AsyncCheckpointWriter> async_writer;
  MetricsLog metrics;
  double flops_per_token = 0, matmul_rate = 0;  // the MFU denominator (perf/mfu.h)

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

  // The supervisor's run events (resilience/run_events.h) and the in-run recovery from spikes,
  // rollbacks and stragglers (recovery.h). The agreed buffer ends with one compute-time slot
  // per rank.
  RunEvents events;
  std::optional<Recovery> recovery;
  nlohmann::json resumed_anomaly;  // a resumed run's anomaly window, until `recovery` exists
  size_t time_slots = 0;           // index of rank 0's slot in `agreed`
  std::vector<double> rank_seconds;

  // What makes a saved model directory whole (tokenizer files, generation config), rank 0's.
  std::vector<ModelFile> model_files;
  std::string tokenizer_path;  // the run's tokenizer ("" when none)
  std::string model_source;    // where the model's config came from, for messages

  Impl(const TrainConfig& c, const TrainOptions& o, dist::Group* g)
      : cfg(normalized(c)),
        opt(o),
        own_group(g ? nullptr : dist::make_group("single")),
        group(g ? *g : *own_group),
        rank(group.rank()),
        world(group.size()),
        T(c.seq_len),
        B(c.micro_batch),
        accum(c.grad_accum),
        global_rows(c.micro_batch * c.grad_accum * group.size()) {}

  const ZayaConfig& config() const { return model->config(); }
  void setup();
  void open_data();
  void open_tokenizer();
  void make_model_files();
  void resume_from(const std::string& dir);
  void keep_global_batch(int64_t rows, int saved_world);
  void log_setup();
  void log_memory();
  bool traffic_logged = false;  // the first step's ZeRO-1 collective bytes, said once
  double validation_loss();
  void print_sample(int64_t step);
  void save(int64_t step);
  StepResult train_step();
  void after_step(const StepResult& r);
  void rollback(int64_t step);
  // The last update's parameter all-gathers finished (they are left in flight for the next
  // step's forward to overlap): before anything else reads or replaces the parameters.
  void settle() { optim->finish_update(*model); }
};

void Trainer::Impl::setup() {
  if (opt.quiet || rank != 0) set_log_level(LogLevel::Quiet);  // rank 0 speaks for the run
  device = train_device(cfg, group);
  check_run_files(cfg);  // each missing file named with its key, before anything is read
  precision = cfg.precision;
  if (!cfg.gemm_table.empty())  // train.gemm_table (validate_train_config: device gpu)
    log_info("train: GEMM table {}: {} tuned GEMMs", cfg.gemm_table,
             gpu::load_gemm_table(cfg.gemm_table));
  heartbeat::start(rank, world);
  fence::start_watchdog();  // a rank of an attempt the supervisor has ended exits (fence.h)
  faults::install(rank);
  events.open(rank);
  if (!cfg.checkpoint_dir.empty() && rank == 0) remove_stale_checkpoint_temps(cfg.checkpoint_dir);
  const std::string resume_dir = pick_resume_dir(cfg, group);
  model = make_model(cfg, resume_dir, device);
  model_source = !resume_dir.empty()      ? "checkpoint " + resume_dir + "'s model/config.json"
                 : !cfg.init_from.empty() ? key_source(cfg, "model.init_from")
                                          : key_source(cfg, "model.config");
  // Positions beyond the context have no meaning to the model (and the saved config would still
  // claim the shorter context).
  if (cfg.seq_len > config().max_position_embeddings)
    fail(
        "{} is longer than the model's context: max_position_embeddings = {} ({}); lower "
        "data.seq_len or raise max_position_embeddings in the model's config",
        key_source(cfg, "data.seq_len"), config().max_position_embeddings, model_source);
  model->zero_grads();
  open_data();
  open_tokenizer();
  optim = std::make_unique<Optimizer>(*model, cfg.optim, group);
  schedule = make_schedule(cfg.optim, cfg.steps);
  state.world_size = world;
  state.global_batch_rows = global_rows;
  state.config = train_config_to_json(cfg);
  if (!resume_dir.empty()) resume_from(resume_dir);
  summary.checkpoint = resume_dir;
  if (state.step >= cfg.steps) {  // nothing to train: the caller says so (no summary of 0 steps)
    summary.already_finished = true;
    summary.steps_done = state.step;
    events.write({{"event", "start"},
                  {"world", world},
                  {"resumed_step", state.step},
                  {"setup_s", heartbeat::process_seconds()}});
    return;
  }
  if (rank == 0) make_model_files();

  const ModelFacts facts = model_facts(config(), cfg.seq_len);
  flops_per_token = 3 * (facts.flops_matmul_per_token + facts.flops_attention_per_token);
  const MatmulRate rate = measure_matmul_rate(
      device, precision == ops::MatmulPrecision::BF16 ? DType::BF16 : DType::F32);
  matmul_rate = rate.flops_per_s;
  log_info("train: {} parameters ({} active without embedding), {} tokens/step, {} {:.1f} GFLOP/s",
           facts.params_total, facts.params_active_no_embedding, global_rows * cfg.seq_len,
           rate.source, matmul_rate / 1e9);
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
      cfg.activations == ActivationsSetting::Bf16 || (cfg.activations == ActivationsSetting::Auto &&
                                                      precision == ops::MatmulPrecision::BF16)
          ? ActivationStorage::BF16
          : ActivationStorage::F32;
  acts.emplace(config(), B, T, device, false, storage);
  log_info(
      "train: activations {} MiB, stored {}{}", acts->bytes() >> 20,
      activation_storage_name(storage),
      storage == ActivationStorage::BF16
          ? fmt::format(" (fp32 storage: {} MiB)", Activations::bytes_needed(config(), B, T) >> 20)
          : std::string());
  log_memory();
  inputs.assign(size_t(B * T), 0);
  targets.assign(size_t(B * T), 0);
  staging.emplace(device, B * T);
  if (device == Device::Gpu)
    log_info("train: tokens go through {} {} host slots, copied asynchronously", staging->slots(),
             staging->pinned() ? "page-locked" : "pageable (pin_host refused)");
  loss_sums = Buffer(size_t(accum) * sizeof(double), device);
  loss_sums_host.assign(size_t(accum), 0.0);
  scored.assign(size_t(accum), 0);
  RoutingCounts shape(config());
  time_slots = kCounts + shape.flat().size();
  agreed.assign(time_slots + size_t(world), 0.0);
  counts.emplace(config(), device);
  recovery.emplace(cfg, group, events);
  if (!resumed_anomaly.empty()) recovery->restore_anomaly_state(resumed_anomaly);

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
    fail(
        "{}: the dataset was tokenised with a vocabulary of {} but the model's vocab_size is {} "
        "({}): the model cannot embed its ids ≥ {}",
        key_source(cfg, "data.dataset"), train_data->manifest().vocab_size, config().vocab_size,
        model_source, config().vocab_size);
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

// The run's tokenizer (data.tokenizer, else the dataset's own when it is still there unchanged),
// checked against the dataset's record of its tokenizer and against the model's vocabulary.
void Trainer::Impl::open_tokenizer() {
  namespace fs = std::filesystem;
  const DatasetManifest& dm = train_data->manifest();
  std::string name;  // how messages name the tokenizer
  if (!cfg.tokenizer.empty()) {
    tokenizer_path = cfg.tokenizer;
    name = key_source(cfg, "data.tokenizer");
    // The dataset's ids mean what its tokenizer says: another tokenizer (even of the same size)
    // would train on one mapping and sample, save and serve with another.
    if (!dm.tokenizer_xxh3.empty()) {
      const std::string got = hex64(file_checksum(tokenizer_path));
      if (got != dm.tokenizer_xxh3)
        fail(
            "{} is not the tokenizer the dataset was prepared with: {} has xxh3 {}, but the "
            "dataset's dataset.json ({}) records {} (xxh3 {}); set data.tokenizer to that file, "
            "or prepare the dataset again with this tokenizer",
            name, tokenizer_path, got, key_source(cfg, "data.dataset"), dm.tokenizer_path,
            dm.tokenizer_xxh3);
    }
  } else if (!dm.tokenizer_path.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(dm.tokenizer_path, ec)) {
      log_info(
          "train: no tokenizer (no samples, no tokenizer.json in the saved model): data.tokenizer "
          "is empty and the dataset's tokenizer {} is gone",
          dm.tokenizer_path);
      return;
    }
    const std::string got = hex64(file_checksum(dm.tokenizer_path));
    if (got != dm.tokenizer_xxh3) {
      log_info(
          "train: no tokenizer (no samples, no tokenizer.json in the saved model): data.tokenizer "
          "is empty and the dataset's tokenizer {} has changed since the dataset was prepared "
          "(xxh3 {}, dataset.json records {})",
          dm.tokenizer_path, got, dm.tokenizer_xxh3);
      return;
    }
    tokenizer_path = dm.tokenizer_path;
    name = fmt::format("the dataset's tokenizer {} ({}'s dataset.json)", tokenizer_path,
                       key_source(cfg, "data.dataset"));
    log_info("train: tokenizer {} (the dataset's: data.tokenizer is empty)", tokenizer_path);
  } else {
    return;
  }
  tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_path));
  const int64_t tok_v = tokenizer->vocab_size(), model_v = config().vocab_size;
  if (tok_v > model_v)
    fail(
        "{} has {} tokens but the model's vocab_size is {} ({}): the model cannot embed ids ≥ {}; "
        "use a tokenizer of at most {} tokens or a model with vocab_size ≥ {}",
        name, tok_v, model_v, model_source, model_v, model_v, tok_v);
  // Extra rows are legitimate padding (ZAYA1 pads Gemma 3's 262,144 tokens to 262,272) and cost
  // only memory; beyond that they are most likely a mismatched pair. Samples never draw them.
  if (model_v - tok_v > 128)
    log_info(
        "warning: the model's vocab_size is {} ({}) but {} has only {} tokens: ids {}…{} are "
        "never trained, and samples draw only from the tokenizer's ids",
        model_v, model_source, name, tok_v, tok_v, model_v - 1);
}

// The files beside the weights in every saved model directory (contract: docs/training.md,
// "Checkpoints and resuming"): tokenizer.json (the run's tokenizer, byte for byte),
// tokenizer_config.json (the trained context as model_max_length, the special tokens' text) and
// generation_config.json (BOS/EOS ids, the trained context).
void Trainer::Impl::make_model_files() {
  const auto file = [&](const std::string& name, std::string bytes) {
    model_files.push_back({name, std::make_shared<const std::string>(std::move(bytes))});
  };
  if (!tokenizer_path.empty()) file("tokenizer.json", read_text_file(tokenizer_path, "tokenizer"));
  const DatasetManifest& dm = train_data->manifest();
  const int32_t bos = tokenizer ? tokenizer->bos_id() : dm.bos_id;
  const int32_t eos = tokenizer ? tokenizer->eos_id() : dm.eos_id;
  nlohmann::ordered_json tc = {{"model_max_length", cfg.seq_len}};
  if (tokenizer && bos >= 0) tc["bos_token"] = std::string(tokenizer->token(bos));
  if (tokenizer && eos >= 0) tc["eos_token"] = std::string(tokenizer->token(eos));
  if (tokenizer) tc["tokenizer_class"] = "PreTrainedTokenizerFast";
  file("tokenizer_config.json", tc.dump(2) + "\n");
  nlohmann::ordered_json gc = nlohmann::ordered_json::object();
  if (bos >= 0) gc["bos_token_id"] = bos;
  if (eos >= 0) gc["eos_token_id"] = eos;
  gc["max_length"] = cfg.seq_len;
  file("generation_config.json", gc.dump(2) + "\n");
}

void Trainer::Impl::resume_from(const std::string& dir) {
  nlohmann::json j;
  load_checkpoint(dir, *model, j, optim->state_to_load());
  const TrainerState saved = parse_trainer_state(j, dir + "/trainer_state.json");
  state.step = saved.step;
  state.optimizer_steps = saved.optimizer_steps;
  state.skipped = saved.skipped;
  optim->set_steps(saved.optimizer_steps);
  train_data->restore(saved.data);  // global rows: any rank count
  state.data = train_data->state();
  summary.skipped = saved.skipped;
  state.anomalous = saved.anomalous;
  state.skip_data = saved.skip_data;
  // A changed schedule starts the anomaly window over: its losses and gradient norms were taken
  // at the old learning rates (train.steps raised to continue: the cosine no longer ends here).
  std::string changed;
  for (const char* key : kScheduleKeys)
    if (saved.config.is_object() && saved.config.contains(key) &&
        saved.config.at(key) != state.config.at(key))
      changed += fmt::format("{}{} {} → {}", changed.empty() ? "" : ", ", key,
                             saved.config.at(key).dump(), state.config.at(key).dump());
  const nlohmann::json window = changed.empty() ? saved.anomaly : nlohmann::json::object();
  if (recovery)
    recovery->restore_anomaly_state(window);
  else
    resumed_anomaly = window;  // for the Recovery made later in setup
  log_info("train: resumed from {} at step {}", dir, state.step);
  if (!changed.empty())
    log_info(
        "train: the learning-rate schedule changed since the checkpoint ({}): the anomaly "
        "guard's window starts over",
        changed);
  if (saved.world_size != world)
    log_info("train: optimizer state resharded from {} to {} ranks", saved.world_size, world);
  // The same batch keys on another number of ranks (a restart on the hosts left): the same
  // global batch, so that the run goes on as it would have.
  const auto same_key = [&](const char* key) {
    return saved.config.is_object() && saved.config.contains(key) &&
           saved.config.at(key) == state.config.at(key);
  };
  if (saved.global_batch_rows != 0 && saved.global_batch_rows != global_rows &&
      saved.world_size != world && same_key("train.micro_batch") && same_key("train.grad_accum"))
    keep_global_batch(saved.global_batch_rows, saved.world_size);
  else if (saved.global_batch_rows != 0 && saved.global_batch_rows != global_rows)
    log_info(
        "warning: the checkpoint was trained with {} rows per step, this run uses {} "
        "(micro_batch × grad_accum × ranks); the run continues from the same data position",
        saved.global_batch_rows, global_rows);
}

// A checkpoint of `rows` rows per step on `saved_world` ranks, resumed on `world` ranks with the
// same train.micro_batch and train.grad_accum: each rank takes rows / world of every global batch,
// in micro-batches of train.micro_batch rows when they divide it (grad_accum grows or shrinks),
// else of the largest row count below that does. The rows of a step stay the same, so its loss is
// that of the uninterrupted run up to the summation order (docs/zero1.md).
void Trainer::Impl::keep_global_batch(int64_t rows, int saved_world) {
  if (rows % world != 0)
    fail(
        "the checkpoint was trained with a global batch of {} rows on {} ranks, which {} ranks "
        "cannot share evenly (micro_batch × grad_accum × ranks); run on a number of ranks that "
        "divides {}, or change {} or {} to choose a new global batch",
        rows, saved_world, world, rows, key_source(cfg, "train.micro_batch"),
        key_source(cfg, "train.grad_accum"));
  const int64_t per_rank = rows / world;
  int64_t b = std::min<int64_t>(cfg.micro_batch, per_rank);
  while (per_rank % b != 0) --b;
  B = b;
  accum = per_rank / b;
  global_rows = rows;
  state.global_batch_rows = rows;
  log_info(
      "train: {} ranks instead of the checkpoint's {}: the global batch stays {} rows = {} × {} "
      "micro-batches × {} ranks",
      world, saved_world, rows, B, accum, world);
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
      world, enum_word(group.backend()), global_rows, B, accum, world, state_max / (1 << 20),
      state_total / (1 << 20), state_max / state_total, sharding);
  // Each bucket is world × its largest rank's share: many ranks and small buckets pad it with
  // zeros that are allocated and sent every step (docs/zero1.md, "Costs and limits").
  int64_t owned = 0;
  for (int64_t e : plan.elements) owned += e;
  const int64_t padding = plan.bucket_elements() - owned;
  if (world > 1 && 4 * padding > plan.bucket_elements())
    log_info(
        "warning: the ZeRO bucket buffer is {:.0f}% zero padding ({} bucket(s) over {} ranks): a "
        "larger optim.zero_bucket_mb (0: one bucket) pads less; `zaya plan` names one",
        100.0 * double(padding) / double(plan.bucket_elements()), plan.buckets.size(), world);
}

// Collective: the bytes each rank allocated for what a step holds, read from the buffers
// themselves (the largest over the ranks: the rank that must fit), in one line that `zaya plan`'s
// figures are checked against (docs/plan.md).
void Trainer::Impl::log_memory() {
  const Optimizer::Memory o = optim->memory();
  double bytes[] = {double(model->params_bytes()),
                    double(model->grads_bytes()),
                    double(o.state),
                    double(o.bucket),
                    double(o.shard),
                    double(o.scratch),
                    double(acts->bytes())};
  group.all_reduce(Tensor(bytes, {int64_t(std::size(bytes))}), dist::ReduceOp::Max);
  log_info(
      "train: memory per rank (bytes, the largest rank's): weights {:.0f}, gradients {:.0f}, "
      "optimizer state {:.0f}, ZeRO bucket {:.0f}, ZeRO shard {:.0f}, Muon scratch {:.0f}, "
      "activations {:.0f}",
      bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6]);
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

// A sample from the current weights (train/sample.h), on rank 0. A failure is a warning: a sample
// is a glimpse of the run, never a reason to end it (it comes after the step's checkpoint).
void Trainer::Impl::print_sample(int64_t step) {
  if (!tokenizer || cfg.sample_tokens == 0 || rank != 0) return;
  settle();
  try {
    const std::optional<std::string> text =
        sample_text(*model, *tokenizer, cfg.sample_prompt, cfg.sample_tokens,
                    cfg.sample_temperature, uint64_t(cfg.seed) + uint64_t(step));
    if (text) log_info("sample @ step {}: {}{}", step, cfg.sample_prompt, *text);
  } catch (const std::exception& e) {
    log_info("warning: no sample @ step {}: {}", step, e.what());
  }
}

void Trainer::Impl::save(int64_t step) {
  if (cfg.checkpoint_dir.empty()) return;
  settle();
  CheckpointData d;
  state.data = train_data->state();
  state.anomaly = recovery->anomaly_state();
  d.trainer_state = state;
  d.optimizer = optim->state_to_save();
  d.model_files = model_files;
  summary.checkpoint = cfg.checkpoint_dir + "/" + checkpoint_dir_name(step);
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
  recovery->skip_discarded_windows(*train_data, state);
  const DataWindow window{state.step + 1, train_data->state(), global_rows};
  Model& m = *model;
  // Every rank's gradient is a share of the global batch's mean: their sum is the mean.
  const double grad_scale = 1.0 / double(global_rows * T);
  m.zero_grads();
  counts->clear();
  // On a GPU this loop adds no wait for the device of its own: tokens go through the staging
  // slots, the loss sums and routing counts stay there until after it. (The model still waits
  // inside: each MoE layer's forward reads its expert offsets back; so the host runs
  // ahead of the device by at most about one layer.)
  for (int64_t micro = 0; micro < accum; ++micro) {
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
    const bool last = micro + 1 == accum;
    model_backward(
        m, *acts, grad_scale,
        last ? LayerDone([&](int64_t layer) { optim->gradients_ready(m, layer); }) : LayerDone());
  }
  // The loss sums and routing counts of the step, read once.
  device_copy(Tensor(loss_sums_host.data(), {accum}),
              Tensor(static_cast<double*>(loss_sums.data()), {accum}).on(device));
  counts->to_host();
  double loss = 0;  // the micro-batches' means, averaged
  for (size_t k = 0; k < scored.size(); ++k)
    loss += (scored[k] ? loss_sums_host[k] / double(scored[k]) : 0.0) / double(accum);
  const double norm = optim->reduce_gradients(m);  // same on every rank
  loss = faults::apply_loss_fault(state.step + 1, loss);
  // One all-reduce agrees on the loss (mean over ranks), whether any rank's loss is non-finite,
  // the routing counts of the global batch (exact in double), and each rank's compute time so
  // far (outside collectives: the straggler check).
  // A stop signal rides along: every rank stops after the same step, whichever got it.
  const int sig = stop_signal_received();
  agreed[kLoss] = loss;
  agreed[kNonFinite] = std::isfinite(loss) ? 0.0 : 1.0;
  agreed[kSigint] = sig == SIGINT ? 1.0 : 0.0;
  agreed[kSigterm] = sig == SIGTERM ? 1.0 : 0.0;
  std::copy(counts->flat().begin(), counts->flat().end(), agreed.begin() + kCounts);
  std::fill(agreed.begin() + ptrdiff_t(time_slots), agreed.end(), 0.0);
  agreed[time_slots + size_t(rank)] =
      step_timer.seconds() - heartbeat::collective_seconds_this_step();
  group.all_reduce(Tensor(agreed.data(), {int64_t(agreed.size())}), dist::ReduceOp::Sum);
  std::copy(agreed.begin() + kCounts, agreed.begin() + ptrdiff_t(time_slots),
            counts->flat().begin());
  rank_seconds.assign(agreed.begin() + ptrdiff_t(time_slots), agreed.end());

  StepResult r;
  r.step = state.step + 1;
  r.loss = agreed[kLoss] / double(world);
  r.grad_norm = norm;
  r.lr = schedule.lr(state.step);
  r.stop_signal = agreed[kSigterm] > 0 ? SIGTERM : agreed[kSigint] > 0 ? SIGINT : 0;
  r.skipped = recovery->judge(r.step, r.loss, r.grad_norm, agreed[kNonFinite] > 0, window, state);
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

// Collective: back to the newest valid checkpoint before the anomalies in a row (recovery.h); the
// metrics file is cut back to it, so every step is logged once.
void Trainer::Impl::rollback(int64_t step) {
  settle();
  if (async_writer) async_writer->wait();
  const std::vector<DataWindow> anomalous = state.anomalous;
  const std::vector<DataWindow> skip = Recovery::windows_to_skip(state);
  const int64_t to = recovery->rollback_target(cfg.checkpoint_dir, step, state);
  if (to < 0) return;
  Timer took;
  resume_from(cfg.checkpoint_dir + "/" + checkpoint_dir_name(to));
  state.skip_data = skip;
  state.anomalous.clear();
  if (!cfg.metrics.empty() && rank == 0) metrics = MetricsLog(cfg.metrics, state.step);
  summary.steps_done = state.step;
  ++summary.rollbacks;
  recovery->report_rollback(step, to, anomalous, took.seconds());
}

void Trainer::Impl::after_step(const StepResult& r) {
  Timer after;
  recovery->note_stragglers(r.step, rank_seconds);
  const double tps = double(r.tokens) / r.seconds;
  if (summary.steps_done == 0) summary.first_loss = r.loss;
  summary.last_loss = r.loss;
  summary.steps_done = r.step;
  summary.skipped = state.skipped;
  tokens_since_log += r.tokens;
  // One rank alone also stops for a signal that came after the step's all-reduce (several ranks
  // must wait for the next step's: they stop together).
  const int stop_signal = r.stop_signal ? r.stop_signal : world == 1 ? stop_signal_received() : 0;
  const bool last = r.step == cfg.steps;
  stopped = r.step == opt.stop_at_step || (stop_signal != 0 && !last);
  if (stopped && stop_signal) summary.stop_signal = stop_signal;
  const bool signalled = summary.stop_signal != 0;  // no evaluation or sample: save and go
  if (!traffic_logged) {  // the buffers the first step handed to the ZeRO-1 collectives
    traffic_logged = true;
    log_info(
        "train: ZeRO-1 collectives of step {} (bytes per rank): reduce-scatter {}, all-gather {} "
        "({} bucket(s); a ring moves (ranks − 1)/ranks of each in and out of every rank)",
        r.step, optim->reduce_scatter_bytes(), optim->all_gather_bytes(),
        world == 1 ? size_t(0) : optim->plan().buckets.size());
  }
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
  double val_loss = NAN;  // evaluated after this step, when due
  if (has_val && !signalled && ((cfg.eval_every > 0 && r.step % cfg.eval_every == 0) || last)) {
    const heartbeat::Scope beat(heartbeat::Section::Eval);
    summary.last_val_loss = val_loss = validation_loss();
    log_info("step {:>6}  val_loss {:.4f}", r.step, summary.last_val_loss);
  }
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
    if (world > 1) {  // per-rank compute seconds (outside collectives), hosts, stragglers now
      j["rank_compute_s"] = rank_seconds;
      j["rank_hosts"] = recovery->hosts();
      j["stragglers"] = recovery->stragglers();
    }
    if (!std::isnan(val_loss)) j["val_loss"] = val_loss;  // on its step's line (zaya plot)
    metrics.append(j);
  }
  // Save first, sample after: nothing that follows the checkpoint can lose the step's weights.
  if ((cfg.checkpoint_every > 0 && r.step % cfg.checkpoint_every == 0) || last || stopped) {
    const heartbeat::Scope beat(heartbeat::Section::Checkpoint);
    save(r.step);
    // corrupt-checkpoint@step:N (fault injection, resilience/faults.h)
    if (!cfg.checkpoint_dir.empty() && faults::corrupt_checkpoint_due(r.step)) {
      if (async_writer) async_writer->wait();
      faults::corrupt_checkpoint(cfg.checkpoint_dir + "/" + checkpoint_dir_name(r.step));
    }
  }
  if (!signalled && ((cfg.sample_every > 0 && r.step % cfg.sample_every == 0) || last)) {
    const heartbeat::Scope beat(heartbeat::Section::Eval);
    print_sample(r.step);
  }
  events.write({{"event", "step"},
                {"step", r.step},
                {"step_s", r.seconds},
                {"after_s", after.seconds()},
                {"skipped", r.skipped}});
  if (!signalled && recovery->rollback_due(state)) rollback(r.step);  // (a resumed run does it)
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
