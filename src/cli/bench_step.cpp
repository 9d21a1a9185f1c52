// zaya bench step [--device cpu|gpu] [--precision fp32|bf16] [--config CONFIG.json] [--batch B]
//                 [--seq-len T] [--steps N] [--warmup W] [--optimizer adamw|muon] [--threads N]
//                 [--probe-size N] [--profile-steps N] [--seed S] [--json]
// Training speed: builds a Trainer for a model config on synthetic tokens (uniform random ids,
// written to a temporary dataset), runs W untimed steps, then N timed ones. A --seq-len beyond
// the config's max_position_embeddings raises it (a copy of the config). Printed: tokens/s,
// model FLOP/s (the trainer's count: 3 × the forward's matmul + attention FLOPs per token), MFU
// against the device's own GEMM rate measured in the same run, and the step's wall time split by
// op family (ops/profile.h: wall time inside each op, timed at the dispatch seam), collectives
// (the heartbeat's time inside them) and the rest ("outside ops": the trainer's own code).
//
// --device cpu (defaults: configs/models/step-bench.json, B 2, T 512, fp32): each timed step is
// paired with sgemm probe passes (perf/sgemm.h) and profiled as it runs (the seam's timing costs
// little on the CPU); CPU use (process CPU time / wall time × threads) and VmHWM are printed.
// --device gpu (train.device = gpu, one process; defaults: configs/models/gpu-step-bench.json,
// B 2, T 4096, bf16): each timed step ends with gpu::synchronize() and is paired with passes of
// a square BF16 GEMM of --probe-size (perf/gpu_gemm_rate.h: gemm(), f32 accumulation) and, for
// --precision fp32, an F32 one too; MFU is model FLOP/s over the BF16 rate (and over the F32
// rate for fp32). Timed steps are not profiled: --profile-steps more steps follow with every GPU
// op between two synchronisations (exact attribution, slower steps: their wall time is printed
// next to the timed median) and GEMMs split out of MoE and LM head ops by gemm()'s profile
// region. Without a GPU backend or device, --device gpu is a zaya::Error saying why.
#include <omp.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_step.h"
#include "cli/commands.h"
#include "core/assert.h"
#include "core/device.h"
#include "core/heartbeat.h"
#include "core/stats.h"
#include "core/timer.h"
#include "io/file.h"
#include "io/zaya_config.h"
#include "model/inspect.h"
#include "ops/blas_kernels.h"
#include "ops/profile.h"
#include "perf/gpu_gemm_rate.h"
#include "perf/sgemm.h"
#include "train/trainer.h"

namespace zaya::cli {

namespace {

using bench_step::Args;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// VmHWM (peak resident memory) of this process in bytes; 0 where /proc is missing.
double peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return 1024.0 * std::stod(line.substr(6));
  return 0;
}

// The flags checked and the device's defaults filled in.
Args resolve(Args a) {
  const bench_step::DeviceDefaults& d =
      a.device == Device::Gpu ? bench_step::kGpuDefaults : bench_step::kCpuDefaults;
  if (!a.precision) a.precision = d.precision;
  if (a.precision == ops::MatmulPrecision::BF16 && a.device != Device::Gpu)
    fail("--precision bf16 needs --device gpu (the CPU trains in fp32)");
  if (a.device == Device::Gpu && !gpu::available())
    fail("bench step --device gpu: {}", gpu::describe());
  if (a.config.empty()) a.config = d.config;
  if (!std::filesystem::is_regular_file(a.config))
    fail(
        "--config {}: no such file (run from the repository or the bundle folder, or pass "
        "--config)",
        a.config);
  if (a.batch == 0) a.batch = d.batch;
  if (a.seq_len == 0) a.seq_len = d.seq_len;
  return a;
}

// The probes of the device's GEMM rate, sampled between the steps.
struct Probes {
  std::optional<SgemmProbe> sgemm;        // cpu
  std::optional<GpuGemmProbe> bf16, f32;  // gpu (f32: --precision fp32 only)
  std::vector<double> sgemm_rates, bf16_rates, f32_rates;
  void pass(int cpu_passes) {
    for (int p = 0; sgemm && p < cpu_passes; ++p) sgemm_rates.push_back(sgemm->pass());
    if (bf16) bf16_rates.push_back(bf16->pass());
    if (f32) f32_rates.push_back(f32->pass());
  }
};

int run_bench_step(const Args& args) {
  const Args a = resolve(args);
  const bool gpu = a.device == Device::Gpu;
  const ops::MatmulPrecision precision = *a.precision;
  if (a.threads > 0) omp_set_num_threads(int(a.threads));
  const int threads = omp_get_max_threads();
  ZayaConfig model = load_config(a.config);
  const int64_t profiled = gpu ? a.profile_steps : 0;
  const int64_t steps = a.warmup + a.steps + profiled;
  const bench_step::SyntheticDataset data(
      model.vocab_size, steps * a.batch * (a.seq_len + 1) + a.seq_len + 1, a.seed);
  // A longer context than the config's: the same model with max_position_embeddings = T (it sizes
  // nothing but the RoPE range), written beside the tokens.
  std::string config_path = a.config;
  if (a.seq_len > model.max_position_embeddings) {
    std::ifstream in(a.config);
    nlohmann::json j = nlohmann::json::parse(in);
    j["max_position_embeddings"] = a.seq_len;
    config_path = data.dir() + "/config.json";
    write_file(config_path, j.dump(2) + "\n");
    if (!a.json)
      fmt::print("bench step: max_position_embeddings {} → {} for --seq-len {}\n",
                 model.max_position_embeddings, a.seq_len, a.seq_len);
    model = load_config(config_path);
  }

  TrainConfig cfg;
  cfg.model_config = config_path;
  cfg.dataset = data.dir();
  cfg.seq_len = a.seq_len;
  cfg.micro_batch = a.batch;
  cfg.steps = steps;
  cfg.seed = int64_t(a.seed);
  cfg.log_every = steps;
  cfg.eval_every = 0;
  cfg.eval_batches = 0;
  cfg.optim.use_muon = a.optimizer == bench_step::Optimizer::Muon;
  cfg.resume = ResumeFrom{ResumeFrom::Kind::None, ""};
  cfg.device = a.device;
  cfg.precision = precision;
  cfg.activations = a.activations;
  validate_train_config(cfg);
  TrainOptions opt;
  opt.quiet = true;
  Trainer trainer(cfg, opt);

  if (!a.json)
    fmt::print(
        "bench step: {} (B={} × T={}), {}, device {}, precision {}, activations {}, {} threads, {} "
        "warm-up + {} timed{} steps\n",
        a.config, a.batch, a.seq_len, enum_word(a.optimizer), enum_word(a.device),
        enum_word(precision), trainer.activation_storage(), threads, a.warmup, a.steps,
        gpu ? fmt::format(" + {} profiled", profiled) : "");
  for (int64_t i = 0; i < a.warmup; ++i) trainer.train_step();
  if (gpu) gpu::synchronize();

  Probes probes;
  if (gpu) {
    probes.bf16.emplace(a.probe_size, DType::BF16);
    if (precision == ops::MatmulPrecision::F32) probes.f32.emplace(a.probe_size, DType::F32);
  } else {
    probes.sgemm.emplace();
    probes.sgemm->pass();  // warm-up
  }
  std::vector<double> rates, step_seconds, profiled_seconds;
  int64_t new_plans = 0;  // the timed steps' new GEMM plans and their host seconds
  double plan_seconds = 0;
  bench_step::Split split;
  double total_wall = 0, total_cpu = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < a.steps; ++i) {
    probes.pass(3);
    ops::profile::reset();
    ops::profile::enable(!gpu);  // the CPU's steps are profiled as they run; the GPU's after
    const double cpu0 = cpu_seconds();
    const gpu::GemmPlanStats plans_before = gpu::gemm_plan_stats();
    Timer t;
    const StepResult r = trainer.train_step();
    if (gpu) gpu::synchronize();
    const double wall = t.seconds(), cpu = cpu_seconds() - cpu0;
    const gpu::GemmPlanStats plans_after = gpu::gemm_plan_stats();
    new_plans += plans_after.plans - plans_before.plans;
    plan_seconds += plans_after.seconds - plans_before.seconds;
    ops::profile::enable(false);
    if (!gpu) split.add(ops::profile::snapshot(), wall, heartbeat::collective_seconds_this_step());
    rates.push_back(double(r.tokens) / wall);
    step_seconds.push_back(wall);
    total_wall += wall;
    total_cpu += cpu;
    tokens += r.tokens;
  }
  probes.pass(3);
  for (int64_t i = 0; i < profiled; ++i) {
    ops::profile::reset();
    ops::profile::enable(true);
    Timer t;
    trainer.train_step();
    gpu::synchronize();
    const double wall = t.seconds();
    ops::profile::enable(false);
    split.add(ops::profile::snapshot(), wall, heartbeat::collective_seconds_this_step());
    profiled_seconds.push_back(wall);
  }

  const ModelFacts facts = model_facts(model, a.seq_len);
  const double flops_per_token =
      3 * (facts.flops_matmul_per_token + facts.flops_attention_per_token);
  const double tps = median(rates), model_flops = tps * flops_per_token;
  const double cpu_use = total_cpu / (total_wall * threads), peak = peak_rss_bytes();
  const auto families = split.families();
  const double split_wall = split.wall(), split_steps = double(std::max<int64_t>(1, split.steps()));

  nlohmann::json j = {{"config", a.config},
                      {"device", enum_word(a.device)},
                      {"precision", enum_word(precision)},
                      {"activations", trainer.activation_storage()},
                      {"activation_bytes", trainer.activation_bytes()},
                      {"batch", a.batch},
                      {"seq_len", a.seq_len},
                      {"optimizer", enum_word(a.optimizer)},
                      {"threads", threads},
                      {"steps", a.steps},
                      {"tokens_per_s", tps},
                      {"step_seconds_median", median(step_seconds)},
                      {"model_flops_per_token", flops_per_token},
                      {"model_gflops", model_flops / 1e9},
                      {"cpu_use", cpu_use},
                      {"peak_rss_bytes", peak}};
  double mfu = 0, mfu_f32 = 0, bf16_rate = 0, f32_rate = 0;
  if (gpu) {
    bf16_rate = median(probes.bf16_rates);
    mfu = model_flops / bf16_rate;
    j["gpu"] = gpu::describe();
    j["gpu_memory"] = gpu::memory_report();
    j["gemm_engine"] = probes.bf16->engine();
    j["probe_size"] = a.probe_size;
    j["gemm_bf16_tflops"] = bf16_rate / 1e12;
    j["mfu"] = mfu;
    if (probes.f32) {
      f32_rate = median(probes.f32_rates);
      mfu_f32 = model_flops / f32_rate;
      j["gemm_f32_engine"] = probes.f32->engine();
      j["gemm_f32_tflops"] = f32_rate / 1e12;
      j["mfu_f32"] = mfu_f32;
    }
    j["gemm_plans_timed"] = new_plans;
    j["gemm_plan_seconds_timed"] = plan_seconds;
    j["profile_steps"] = profiled;
    if (profiled > 0) j["profiled_step_seconds_median"] = median(profiled_seconds);
  } else {
    const double sgemm_rate = median(probes.sgemm_rates);
    mfu = model_flops / sgemm_rate;
    j["blas_kernels"] = ops::blas_core_name();
    j["sgemm_gflops"] = sgemm_rate / 1e9;
    j["mfu"] = mfu;
  }
  if (a.json) {
    j["split"] = nlohmann::json::object();
    for (const auto& [name, s] : families) j["split"][name] = split_wall > 0 ? s / split_wall : 0;
    for (const auto& [name, cs] : split.entries())
      j["ops"][name] = {{"calls", cs.first / int64_t(split_steps)},
                        {"seconds", cs.second / split_steps}};
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("tokens/s        {:.0f}  (median of {} steps; {:.3f} s per step of {} tokens)\n", tps,
             a.steps, median(step_seconds), tokens / a.steps);
  fmt::print("activations     {:.1f} MiB, stored {} (train.activations)\n",
             double(trainer.activation_bytes()) / double(1 << 20), trainer.activation_storage());
  if (gpu) {
    fmt::print("device          {}\n", gpu::describe());
    fmt::print("model TFLOP/s   {:.4g}  ({:.3g} FLOPs per token: 3 × forward matmul + attention)\n",
               model_flops / 1e12, flops_per_token);
    fmt::print(
        "GEMM engine     {} (gemm() on the probe's operands), precision {} (train.precision)\n",
        probes.bf16->engine(), enum_word(precision));
    fmt::print(
        "BF16 GEMM       {:.4g} TFLOP/s  ({}³, f32 accumulation, {}, sampled between the steps)\n",
        bf16_rate / 1e12, a.probe_size, probes.bf16->engine());
    if (probes.f32)
      fmt::print("F32 GEMM        {:.4g} TFLOP/s  ({}³, {}, sampled between the steps)\n",
                 f32_rate / 1e12, a.probe_size, probes.f32->engine());
    fmt::print("MFU             {:.1f}% of the BF16 GEMM rate", 100 * mfu);
    if (probes.f32) fmt::print("; {:.1f}% of the F32 GEMM rate", 100 * mfu_f32);
    fmt::print("\n");
    fmt::print(
        "GEMM plans      {} new in the timed steps, {:.1f} ms of host time ({:.1f} ms per step; "
        "cuBLASLt's layouts + heuristic for each new shape: the experts' row counts vary)\n",
        new_plans, 1e3 * plan_seconds, 1e3 * plan_seconds / double(a.steps));
    fmt::print("{}\n", gpu::memory_report());
    fmt::print("host memory     {:.1f} MiB (VmHWM)\n", peak / double(1 << 20));
    if (profiled == 0) return 0;
    fmt::print(
        "time split ({} profiled step(s), every GPU op between two synchronisations: {:.3f} s per "
        "step against the timed {:.3f} s; shares of the profiled step):\n",
        profiled, median(profiled_seconds), median(step_seconds));
  } else {
    fmt::print("model GFLOP/s   {:.1f}  ({:.3g} FLOPs per token: 3 × forward matmul + attention)\n",
               model_flops / 1e9, flops_per_token);
    fmt::print(
        "sgemm GFLOP/s   {:.1f}  (OpenBLAS 768³, {} kernels, {} threads, sampled between the "
        "steps)\n",
        j["sgemm_gflops"].get<double>(), ops::blas_core_name(), threads);
    fmt::print("MFU             {:.1f}% of sgemm\n", 100 * mfu);
    fmt::print("CPU use         {:.0f}% of {} threads × wall time\n", 100 * cpu_use, threads);
    fmt::print("peak memory     {:.1f} MiB (VmHWM)\n", peak / double(1 << 20));
    fmt::print("time split (share of the step's wall time):\n");
  }
  for (const auto& [name, s] : families)
    fmt::print("  {:<40} {:5.1f}%  {:8.1f} ms/step\n", name, 100 * s / split_wall,
               1e3 * s / split_steps);
  return 0;
}

}  // namespace

Action add_bench_step_command(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = bench.add_subcommand(
      "step", "Training tokens/s and MFU against the device's GEMM rate measured in the same run");
  add_enum_option(sub, "--device", a->device, "cpu, or gpu (train.device = gpu: one process)");
  sub->add_option_function<std::string>(
      "--precision",
      [a](const std::string& word) {
        const auto p = parse_enum<ops::MatmulPrecision>(word);
        if (!p)
          throw CLI::ValidationError("--precision '" + word + "': use " +
                                     enum_choices<ops::MatmulPrecision>());
        a->precision = *p;
      },
      "fp32 or bf16 (train.precision: the GEMM inputs; bf16 needs --device gpu); default fp32 "
      "on cpu, bf16 on gpu");
  add_enum_option(sub, "--activations", a->activations,
                  "auto, fp32 or bf16 (train.activations: the storage of the saved activations; "
                  "auto = bf16 with --precision bf16)");
  sub->add_option("--config", a->config,
                  "config.json of the model to train (random init); default "
                  "configs/models/step-bench.json on cpu, gpu-step-bench.json on gpu")
      ->check(CLI::ExistingFile);
  sub->add_option("--batch", a->batch, "rows per step; default 2")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  sub->add_option("--seq-len", a->seq_len, "tokens per row; default 512 on cpu, 4096 on gpu")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  sub->add_option("--steps", a->steps, "timed steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(100000)));
  sub->add_option("--warmup", a->warmup, "untimed steps first")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(100000)));
  add_enum_option(sub, "--optimizer", a->optimizer, "adamw (everything) or muon (Muon + AdamW)");
  sub->add_option("--threads", a->threads, "OpenMP threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1024)));
  sub->add_option("--probe-size", a->probe_size,
                  "gpu: n of the n³ GEMM whose rate is the MFU denominator")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(16), int64_t(32768)));
  sub->add_option("--profile-steps", a->profile_steps,
                  "gpu: profiled steps after the timed ones, for the time split (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1000)));
  sub->add_option("--seed", a->seed, "seed of the model and the tokens")->capture_default_str();
  sub->add_flag("--json", a->json, "print one JSON object instead of the table");
  return [a] { return run_bench_step(*a); };
}

}  // namespace zaya::cli
