// zaya train --config FILE.toml [--set key=value ...] [--print-config] [--quiet]
//            [--record-untuned FILE]
// Trains (or resumes) a ZAYA1 model as the TOML file says; every key is documented by
// --print-config. Unknown keys are rejected with a suggestion. Launched by mpirun/srun, the
// processes train together (data parallel, ZeRO-1): train.micro_batch is per rank; with
// train.device = gpu they use the NCCL group, one GPU per process.
// Streams (docs/cli.md): progress and logs on stderr; the final line on stdout (rank 0's, kept by
// --quiet): the summary and the model directory, or where a stopped run's checkpoint is and the
// command that resumes it, or that the run had already finished. SIGINT/SIGTERM stop after the
// current step with a checkpoint (train/stop_signal.h): exit 130 / 143.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/output.h"
#include "dist/group.h"
#include "ops/gpu/gemm_table_runtime.h"
#include "train/stop_signal.h"
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

// A word for the shell: quoted unless it is plain.
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && w.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"
                                       "RSTUVWXYZ0123456789_./=:,+-@%") == std::string::npos;
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command that continues this run from its newest checkpoint: the same config and overrides,
// with resume = "auto" (a run started with resume = "none" must not start over a second time).
std::string resume_command(const TrainArgs& a, const TrainConfig& cfg) {
  std::string cmd = "zaya train --config " + shell_word(a.config);
  for (const std::string& s : a.sets)
    if (s.rfind("checkpoint.resume=", 0) != 0 && s.rfind("checkpoint.overwrite=", 0) != 0)
      cmd += " --set " + shell_word(s);
  if (cfg.resume.kind != ResumeFrom::Kind::Auto) cmd += " --set checkpoint.resume=auto";
  return cmd;
}

int run_train(const TrainArgs& a) {
  TrainConfig cfg = a.config.empty() ? TrainConfig{} : load_train_config(a.config);
  for (const std::string& s : a.sets) apply_override(cfg, s);
  apply_run_defaults(cfg, a.config);
  if (a.print_config) {
    // The values this run uses: a relative path here is the current directory's (the file's
    // keys are resolved against its folder), so the text is not a drop-in copy of the file.
    std::fputs("# every key as this run uses it; relative paths are from the current directory\n",
               stdout);
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
  install_stop_signals(/*announce=*/!a.quiet && group->rank() == 0);
  const TrainSummary s = run_training(cfg, TrainOptions{.quiet = a.quiet, .group = group.get()});
  if (record)
    log_info("train: {} GEMM shapes written to {}", gpu::write_gemm_recording(), a.record_untuned);
  const int code = s.stop_signal ? 128 + s.stop_signal : 0;
  if (group->rank() != 0) return code;  // rank 0 speaks for the run
  const std::string model = s.checkpoint.empty() ? std::string() : s.checkpoint + "/model";
  if (s.already_finished) {
    print_result("train: run already finished at step {} (model {}); raise train.steps to continue",
                 s.steps_done, model);
    return 0;
  }
  if (s.stop_signal) {
    const std::string where =
        s.checkpoint.empty()
            ? fmt::format("no checkpoint: checkpoints are off, {}",
                          key_source(cfg, "checkpoint.dir"))
            : fmt::format("checkpoint {} (model {}); resume with: {}{}", s.checkpoint, model,
                          resume_command(a, cfg),
                          group->size() > 1
                              ? fmt::format(" (launched as before; {} ranks wrote it, "
                                            "any rank count resumes it)",
                                            group->size())
                              : "");
    print_result("train: stopped by {} after step {}/{}; {}", stop_signal_name(s.stop_signal),
                 s.steps_done, cfg.steps, where);
    return code;
  }
  const auto val = [](double v) {
    return std::isnan(v) ? std::string("–") : fmt::format("{:.4f}", v);
  };
  const std::string val_part =
      s.val_status.empty()
          ? fmt::format("val_loss {} → {}", val(s.first_val_loss), val(s.last_val_loss))
          : s.val_status;
  print_result(
      "train: {} steps in {:.1f}s, loss {:.4f} → {:.4f}, {}, {} skipped{}; {}", s.steps_done,
      s.seconds, s.first_loss, s.last_loss, val_part, s.skipped,
      s.rollbacks ? fmt::format(", {} rollback(s)", s.rollbacks) : "",
      model.empty() ? "no checkpoint: " + key_source(cfg, "checkpoint.dir") : "model " + model);
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
  sub->add_flag("--quiet", args->quiet, "no progress output (the final line stays, on stdout)");
  sub->add_option("--record-untuned", args->record_untuned,
                  "write the GPU GEMM shapes the run used to FILE (op,params lines; train.device = "
                  "gpu)");
  return [args] { return run_train(*args); };
}

}  // namespace zaya::cli
