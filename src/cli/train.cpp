// zaya train --config FILE.toml [--set key=value ...] [--print-config] [--quiet]
//            [--record-untuned FILE]
// Trains (or resumes) a ZAYA1 model as the TOML file says; every key is documented by
// --print-config. Unknown keys are rejected with a suggestion. Launched by mpirun/srun, the
// processes train together (data parallel, ZeRO-1): train.micro_batch is per rank; with
// train.device = gpu they use the NCCL group, one GPU per process.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "dist/group.h"
#include "ops/gpu/gemm_table_runtime.h"
#include "train/trainer.h"

namespace zaya::cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  bool print_config = false;
  bool quiet = false;
  std::string record_untuned;
};

int run_train(const TrainArgs& a) {
  TrainConfig cfg = a.config.empty() ? TrainConfig{} : load_train_config(a.config);
  for (const std::string& s : a.sets) apply_override(cfg, s);
  if (a.print_config) {
    std::fputs(train_config_to_toml(cfg).c_str(), stdout);
    return 0;
  }
  if (a.config.empty()) fail("--config FILE.toml is required (see configs/ and --print-config)");
  validate_train_config(cfg);
  if (!a.record_untuned.empty() && cfg.device != Device::Gpu)
    fail("--record-untuned records GPU GEMMs: it needs train.device = gpu");
  // GPU training under mpirun/srun: the NCCL group (collectives on the GPU buffers).
  std::unique_ptr<dist::Group> group = dist::make_group_for(cfg.device);
  // A diagnostic of this run, not a config key (checkpoints). Rank 0 alone writes the file: every
  // rank runs the same GEMMs but its experts' row counts, which vary from step to step anyway.
  const bool record = !a.record_untuned.empty() && group->rank() == 0;
  if (record) gpu::set_gemm_recording(a.record_untuned);
  const TrainSummary s = run_training(cfg, TrainOptions{.quiet = a.quiet, .group = group.get()});
  if (record)
    log_info("train: {} GEMM shapes written to {}", gpu::write_gemm_recording(), a.record_untuned);
  const auto val = [](double v) {
    return std::isnan(v) ? std::string("–") : fmt::format("{:.4f}", v);
  };
  const std::string val_part =
      s.val_status.empty()
          ? fmt::format("val_loss {} → {}", val(s.first_val_loss), val(s.last_val_loss))
          : s.val_status;
  log_info("train: {} steps in {:.1f}s, loss {:.4f} → {:.4f}, {}, {} skipped{}", s.steps_done,
           s.seconds, s.first_loss, s.last_loss, val_part, s.skipped,
           s.rollbacks ? fmt::format(", {} rollback(s)", s.rollbacks) : "");
  return 0;
}

}  // namespace

Action add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train or resume a model from a TOML config");
  sub->add_option("--config", args->config, "training config (TOML; see configs/)");
  sub->add_option("--set", args->sets, "override a key, e.g. --set optim.lr=1e-3 (repeatable)");
  sub->add_flag("--print-config", args->print_config,
                "print every key with its value and meaning, then exit");
  sub->add_flag("--quiet", args->quiet, "no progress output");
  sub->add_option("--record-untuned", args->record_untuned,
                  "write the GPU GEMM shapes the run used to FILE (op,params lines; train.device = "
                  "gpu)");
  return [args] { return run_train(*args); };
}

}  // namespace zaya::cli
