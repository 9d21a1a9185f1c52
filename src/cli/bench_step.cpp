// zaya bench step [--config CONFIG.json] [--batch B] [--seq-len T] [--steps N] [--warmup W]
//                 [--optimizer adamw|muon] [--threads N] [--seed S] [--json]
// Training speed on this machine: builds a Trainer for a model config on synthetic tokens
// (uniform random ids, written to a temporary dataset), runs W untimed steps, then N timed ones.
// A --seq-len beyond the config's max_position_embeddings raises it (a copy of the config).
// Each timed step is paired with sgemm probe passes (bench/sgemm.h), so MFU compares the step with
// the machine's own sgemm rate measured at the same moment. Printed: tokens/s, model GFLOP/s (the
// trainer's count: 3 × the forward's matmul + attention FLOPs per token), MFU, the step's wall time
// split by op family (ops/profile.h: wall time inside each op, timed at the dispatch seam) and the
// rest ("outside ops": the trainer's own code), CPU use (process CPU time / wall time × threads:
// low means idle threads, but spinning threads count as busy) and peak memory (VmHWM).
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/sgemm.h"
#include "cli/commands.h"
#include "core/assert.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/timer.h"
#include "data/shards.h"
#include "io/zaya_config.h"
#include "model/inspect.h"
#include "ops/blas_kernels.h"
#include "ops/profile.h"
#include "train/trainer.h"

namespace zaya::cli {

namespace {

struct BenchStepArgs {
  std::string config = "configs/models/step-bench.json", optimizer = "adamw";
  int64_t batch = 2, seq_len = 512, steps = 4, warmup = 1, threads = 0;
  uint64_t seed = 1;
  bool json = false;
};

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

// The op families of the split (by op name); an op not listed is "other ops".
const char* family_of(const std::string& op) {
  static const std::vector<std::pair<const char*, const char*>> prefixes = {
      {"linear_", "GEMMs (linear)"},
      {"attention_", "attention"},
      {"cca_conv", "CCA conv/qk/rope"},
      {"qk_mean", "CCA conv/qk/rope"},
      {"value_shift", "CCA conv/qk/rope"},
      {"l2norm_scale", "CCA conv/qk/rope"},
      {"rope_", "CCA conv/qk/rope"},
      {"moe_", "MoE experts + dispatch"},
      {"router_", "router + EDA"},
      {"eda_", "router + EDA"},
      {"gelu_", "router + EDA"},
      {"silu_mul", "router + EDA"},
      {"count_classes", "router + EDA"},
      {"rmsnorm_", "norms + residual"},
      {"merge_rmsnorm", "norms + residual"},
      {"residual_merge", "norms + residual"},
      {"embedding_", "norms + residual"},
      {"xent_", "LM head loss"},
      {"lm_head_", "LM head loss"},
      {"count_scored", "LM head loss"},
      {"shift_targets", "LM head loss"},
      {"newton_schulz", "optimizer"},
      {"adamw_", "optimizer"},
      {"muon_", "optimizer"},
      {"balance_", "optimizer"},
      {"sum_squares", "optimizer"},
      {"sum", "LM head loss"},
      {"scale", "optimizer"},
      {"fill", "memory (fill/copy)"},
      {"copy", "memory (fill/copy)"},
      {"convert", "memory (fill/copy)"},
      {"gather_rows", "memory (fill/copy)"},
      {"scatter_rows", "memory (fill/copy)"},
      {"concat_cols", "memory (fill/copy)"},
      {"zero_where_class", "memory (fill/copy)"},
  };
  for (const auto& [prefix, family] : prefixes)
    if (op.rfind(prefix, 0) == 0) return family;
  return "other ops";
}

// A dataset directory of uniform random tokens, removed when done.
class SyntheticDataset {
 public:
  SyntheticDataset(int64_t vocab, int64_t train_tokens, uint64_t seed) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zaya-bench-step-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail("bench step: cannot create a temporary directory in {}", tmpl);
    dir_ = tmpl;
    DatasetManifest m;
    m.vocab_size = vocab;
    m.eos_id = 0;
    m.files = 1;
    const std::pair<std::string, int64_t> splits[] = {{"train", train_tokens}, {"val", 4096}};
    for (size_t k = 0; k < 2; ++k) {
      const auto& [split, n] = splits[k];
      const CounterRng rng{seed, 17 + k};
      std::vector<uint32_t> tokens(static_cast<size_t>(n));
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = uint32_t(rng.uniform(i) * double(vocab)) % uint32_t(vocab);
      const std::string file = split + "_000000.bin";
      write_shard(dir_ + "/" + file, tokens, uint32_t(vocab));
      SplitInfo s;
      s.documents = 1;
      s.tokens = n;
      s.shards.push_back({file, n, token_checksum(tokens.data(), tokens.size())});
      m.splits[split] = s;
    }
    write_manifest(dir_, m);
  }
  ~SyntheticDataset() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

int run_bench_step(const BenchStepArgs& a) {
  if (a.optimizer != "adamw" && a.optimizer != "muon")
    fail("--optimizer '{}': use adamw or muon", a.optimizer);
  if (a.threads > 0) omp_set_num_threads(int(a.threads));
  const int threads = omp_get_max_threads();
  ZayaConfig model = load_config(a.config);
  const int64_t steps = a.warmup + a.steps;
  const SyntheticDataset data(model.vocab_size, steps * a.batch * (a.seq_len + 1) + a.seq_len + 1,
                              a.seed);
  // A longer context than the config's: the same model with max_position_embeddings = T (it sizes
  // nothing but the RoPE range), written beside the tokens.
  std::string config_path = a.config;
  if (a.seq_len > model.max_position_embeddings) {
    std::ifstream in(a.config);
    nlohmann::json j = nlohmann::json::parse(in);
    j["max_position_embeddings"] = a.seq_len;
    config_path = data.dir() + "/config.json";
    std::ofstream(config_path) << j.dump(2) << "\n";
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
  cfg.optim.use_muon = a.optimizer == "muon";
  cfg.resume = "none";
  validate_train_config(cfg);
  TrainOptions opt;
  opt.quiet = true;
  Trainer trainer(cfg, opt);

  if (!a.json)
    fmt::print("bench step: {} (B={} × T={}), {}, {} threads, {} warm-up + {} timed steps\n",
               a.config, a.batch, a.seq_len, a.optimizer, threads, a.warmup, a.steps);
  for (int64_t i = 0; i < a.warmup; ++i) trainer.train_step();

  SgemmProbe sgemm;
  sgemm.pass();  // warm-up
  std::vector<double> rates, sgemm_rates, step_seconds;
  std::map<std::string, double> family_seconds;
  std::map<std::string, std::pair<int64_t, double>> op_seconds;
  double total_wall = 0, total_cpu = 0, total_ops = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < a.steps; ++i) {
    for (int p = 0; p < 3; ++p) sgemm_rates.push_back(sgemm.pass());
    ops::profile::reset();
    ops::profile::enable(true);
    const double cpu0 = cpu_seconds();
    Timer t;
    const StepResult r = trainer.train_step();
    const double wall = t.seconds(), cpu = cpu_seconds() - cpu0;
    ops::profile::enable(false);
    for (const auto& o : ops::profile::snapshot()) {
      family_seconds[family_of(o.op)] += o.seconds;
      op_seconds[o.op].first += o.calls;
      op_seconds[o.op].second += o.seconds;
      total_ops += o.seconds;
    }
    rates.push_back(double(r.tokens) / wall);
    step_seconds.push_back(wall);
    total_wall += wall;
    total_cpu += cpu;
    tokens += r.tokens;
  }
  for (int p = 0; p < 3; ++p) sgemm_rates.push_back(sgemm.pass());

  const ModelFacts facts = model_facts(model, a.seq_len);
  const double flops_per_token =
      3 * (facts.flops_matmul_per_token + facts.flops_attention_per_token);
  const double tps = median(rates), sgemm_rate = median(sgemm_rates);
  const double model_flops = tps * flops_per_token, mfu = model_flops / sgemm_rate;
  const double cpu_use = total_cpu / (total_wall * threads), peak = peak_rss_bytes();
  std::vector<std::pair<std::string, double>> families(family_seconds.begin(),
                                                       family_seconds.end());
  families.emplace_back("outside ops", std::max(0.0, total_wall - total_ops));
  std::sort(families.begin(), families.end(),
            [](const auto& x, const auto& y) { return x.second > y.second; });

  if (a.json) {
    nlohmann::json j = {{"config", a.config},
                        {"batch", a.batch},
                        {"seq_len", a.seq_len},
                        {"optimizer", a.optimizer},
                        {"threads", threads},
                        {"blas_kernels", ops::blas_core_name()},
                        {"steps", a.steps},
                        {"tokens_per_s", tps},
                        {"step_seconds_median", median(step_seconds)},
                        {"model_flops_per_token", flops_per_token},
                        {"model_gflops", model_flops / 1e9},
                        {"sgemm_gflops", sgemm_rate / 1e9},
                        {"mfu", mfu},
                        {"cpu_use", cpu_use},
                        {"peak_rss_bytes", peak}};
    for (const auto& [name, s] : families) j["split"][name] = s / total_wall;
    for (const auto& [name, cs] : op_seconds)
      j["ops"][name] = {{"calls", cs.first / a.steps}, {"seconds", cs.second / a.steps}};
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("tokens/s        {:.0f}  (median of {} steps; {:.3f} s per step of {} tokens)\n", tps,
             a.steps, median(step_seconds), tokens / a.steps);
  fmt::print("model GFLOP/s   {:.1f}  ({:.3g} FLOPs per token: 3 × forward matmul + attention)\n",
             model_flops / 1e9, flops_per_token);
  fmt::print(
      "sgemm GFLOP/s   {:.1f}  (OpenBLAS 768³, {} kernels, {} threads, sampled between the "
      "steps)\n",
      sgemm_rate / 1e9, ops::blas_core_name(), threads);
  fmt::print("MFU             {:.1f}% of sgemm\n", 100 * mfu);
  fmt::print("CPU use         {:.0f}% of {} threads × wall time\n", 100 * cpu_use, threads);
  fmt::print("peak memory     {:.1f} MiB (VmHWM)\n", peak / double(1 << 20));
  fmt::print("time split (share of the step's wall time):\n");
  for (const auto& [name, s] : families)
    fmt::print("  {:<24} {:5.1f}%  {:8.1f} ms/step\n", name, 100 * s / total_wall,
               1e3 * s / double(a.steps));
  return 0;
}

}  // namespace

Action add_bench_step_command(CLI::App& bench) {
  auto a = std::make_shared<BenchStepArgs>();
  CLI::App* sub = bench.add_subcommand(
      "step", "Training tokens/s and MFU against the sgemm rate measured in the same run");
  sub->add_option("--config", a->config, "config.json of the model to train (random init)")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  sub->add_option("--batch", a->batch, "rows per step")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  sub->add_option("--seq-len", a->seq_len, "tokens per row")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  sub->add_option("--steps", a->steps, "timed steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(100000)));
  sub->add_option("--warmup", a->warmup, "untimed steps first")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(100000)));
  sub->add_option("--optimizer", a->optimizer, "adamw (everything) or muon (Muon + AdamW)")
      ->capture_default_str();
  sub->add_option("--threads", a->threads, "OpenMP threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1024)));
  sub->add_option("--seed", a->seed, "seed of the model and the tokens")->capture_default_str();
  sub->add_flag("--json", a->json, "print one JSON object instead of the table");
  return [a] { return run_bench_step(*a); };
}

}  // namespace zaya::cli
