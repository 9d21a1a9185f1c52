// zaya plan --model CONFIG --cluster FILE.toml [--set key=value ...] [--global-batch ROWS]
//           [--mfu F] [--mtbf-hours H] [--restart-minutes M] [--reserve-gb G] [--json]
// A training run planned for a cluster (plan/planner.h, docs/plan.md): memory per GPU and whether
// it fits, the step time with ZeRO-1's collectives, throughput, checkpoint sizes and stalls, and
// the checkpoint interval that maximises goodput. CONFIG is a training TOML (as `zaya train
// --config` takes it: its keys give the run) or a model's config.json (the run is then the
// training keys' defaults); --set overrides training keys as in `zaya train`. The result (text, or
// one JSON object with --json) goes to stdout.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/output.h"
#include "io/zaya_config.h"
#include "plan/cluster.h"
#include "plan/planner.h"
#include "train/train_config.h"

namespace zaya::cli {

namespace {

struct PlanArgs {
  std::string model, cluster;
  std::vector<std::string> sets;
  int64_t global_batch = 0;
  double mfu = 0.4, mtbf_hours = 24, restart_minutes = 10, reserve_gb = 4;
  bool json = false;
};

int run_plan(const PlanArgs& a) {
  PlanInput in;
  in.cluster = load_cluster(a.cluster);
  const std::string ext = std::filesystem::path(a.model).extension().string();
  TrainConfig& t = in.train;
  if (ext == ".toml") {
    t = load_train_config(a.model);
    if (t.model_config.empty())
      fail("--model {}: key 'model.config' is empty: the planner needs the architecture", a.model);
  } else {
    t.model_config = a.model;
  }
  for (const std::string& s : a.sets) apply_override(t, s);
  if (a.global_batch > 0) {
    const int64_t per_step = t.micro_batch * in.cluster.gpus();
    if (a.global_batch % per_step != 0)
      fail(
          "--global-batch {} rows is not a multiple of train.micro_batch × ranks = {} × {} = {} "
          "(grad_accum must be whole)",
          a.global_batch, t.micro_batch, in.cluster.gpus(), per_step);
    t.grad_accum = a.global_batch / per_step;
  }
  // The training keys' own ranges and cross-checks, for the GPUs the cluster has (the planner
  // reads no data).
  TrainConfig checked = t;
  checked.device = Device::Gpu;
  if (checked.dataset.empty()) checked.dataset = "(not read by the planner)";
  validate_train_config(checked);
  in.model = with_semantics(load_config(t.model_config), t.checkpoint_layout);
  in.mfu = a.mfu;
  in.mtbf_hours = a.mtbf_hours;
  in.restart_minutes = a.restart_minutes;
  in.reserve_gb = a.reserve_gb;
  const Plan p = make_plan(in);
  if (a.json) {
    print_result("{}", plan_json(p).dump(2));
  } else {
    std::string text = plan_text(p);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    print_result("{}", text);
  }
  return 0;
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Plan a ZeRO-1 training run on a cluster: memory, step time, checkpoints, goodput");
  sub->add_option("--model", args->model,
                  "a training TOML (as zaya train --config takes it) or a model's config.json")
      ->required();
  sub->add_option("--cluster", args->cluster, "the cluster (TOML; see configs/clusters/)")
      ->required();
  sub->add_option("--set", args->sets,
                  "override a training key, e.g. --set train.micro_batch=2 (repeatable)");
  sub->add_option("--global-batch", args->global_batch,
                  "rows per optimizer step: sets train.grad_accum to ROWS / (micro_batch × ranks)")
      ->check(positive_number());
  sub->add_option("--mfu", args->mfu,
                  "assumed model FLOP utilisation of the cluster's peak, in (0, 1] (default 0.4)")
      ->check(positive_number());
  sub->add_option("--mtbf-hours", args->mtbf_hours,
                  "mean time between failures of the whole job, hours (default 24)")
      ->check(positive_number());
  sub->add_option("--restart-minutes", args->restart_minutes,
                  "from a failure to training again, minutes (default 10)")
      ->check(non_negative_number());
  sub->add_option("--reserve-gb", args->reserve_gb,
                  "per GPU memory kept for the runtime, communicators and allocator, GB (default "
                  "4)")
      ->check(non_negative_number());
  sub->add_flag("--json", args->json, "one JSON object instead of the text report");
  return [args] { return run_plan(*args); };
}

}  // namespace zaya::cli
