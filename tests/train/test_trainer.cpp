// The training loop end to end on a tiny model and a synthetic dataset: it learns, it resumes
// bitwise (20 steps straight == 10 + resume + 10: weights and step metrics), it skips
// non-finite steps, and a corrupted newest checkpoint falls back to the previous one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "core/device.h"
#include "dist/group.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "test_skips.h"
#include "test_util.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

std::string make_dataset(const ScratchDir& dir) {
  return make_tiny_dataset(dir);
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* timing : {"tokens_per_s", "mfu", "time"}) j.erase(timing);
    rows.push_back(j);
  }
  return rows;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST(Trainer, LossFallsOnALearnablePattern) {
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "learn", make_dataset(dir));
  c.steps = 40;
  c.checkpoint_dir = "";
  const TrainSummary s = run_training(c, {.quiet = true});
  EXPECT_EQ(s.steps_done, 40);
  EXPECT_EQ(s.skipped, 0);
  EXPECT_LT(s.last_loss, 0.6 * s.first_loss) << s.first_loss << " → " << s.last_loss;
  EXPECT_LT(s.last_val_loss, s.first_val_loss);
}

// train.activations = bf16 on the CPU: the saved activations rounded to bf16 (model/activations.h)
// keep the losses close to the fp32 run's and falling; the step-0 validation
// loss (a forward only) is the same bits.
TEST(Trainer, Bf16ActivationsKeepTheLossesOfFp32Storage) {
  ScratchDir dir;
  const std::string shards = make_dataset(dir);
  TrainConfig f32 = tiny_run(dir, "f32", shards), bf16 = tiny_run(dir, "bf16", shards);
  f32.checkpoint_dir = bf16.checkpoint_dir = "";
  f32.log_every = bf16.log_every = 1;
  f32.activations = ActivationsSetting::Fp32;
  bf16.activations = ActivationsSetting::Bf16;
  const TrainSummary a = run_training(f32, {.quiet = true});
  const TrainSummary b = run_training(bf16, {.quiet = true});
  EXPECT_EQ(b.first_val_loss, a.first_val_loss);
  const auto ma = read_metrics(f32.metrics), mb = read_metrics(bf16.metrics);
  ASSERT_EQ(ma.size(), 20u);
  ASSERT_EQ(mb.size(), 20u);
  EXPECT_EQ(mb[0]["loss"], ma[0]["loss"]);  // the first forward: before any rounded gradient
  double worst = 0;
  for (size_t i = 0; i < ma.size(); ++i) {
    const double x = ma[i]["loss"], y = mb[i]["loss"];
    worst = std::max(worst, std::fabs(y - x) / std::fabs(x));
  }
  // Issue 17's bar for bf16 training is 2e-2; rounding only the saved tensors moves the losses far
  // less (3.6e-6 here; a backward that read the working area unwidened: 3.0e-3).
  EXPECT_LE(worst, 1e-4);
  EXPECT_GT(worst, 0.0) << "bf16 storage changed no loss: were the activations rounded?";
  EXPECT_LT(b.last_loss, 0.8 * b.first_loss);
  std::printf(
      "bf16 activations, 20 steps: max rel loss diff vs fp32 storage %.3e, loss %.4f → "
      "%.4f\n",
      worst, b.first_loss, b.last_loss);
}

TEST(Trainer, ResumeIsBitwiseExact) {
  ScratchDir dir;
  const std::string shards = make_dataset(dir);
  for (bool muon : {true, false}) {
    const std::string tag = muon ? "muon" : "adamw";
    TrainConfig straight = tiny_run(dir, "straight_" + tag, shards);
    straight.optim.use_muon = muon;
    run_training(straight, {.quiet = true});

    TrainConfig halves = tiny_run(dir, "halves_" + tag, shards);
    halves.optim.use_muon = muon;
    run_training(halves, {.quiet = true, .stop_at_step = 10});
    run_training(halves, {.quiet = true});  // resume = auto

    const std::string a = straight.checkpoint_dir + "/step_00000020/model/model.safetensors";
    const std::string b = halves.checkpoint_dir + "/step_00000020/model/model.safetensors";
    ASSERT_TRUE(fs::exists(a) && fs::exists(b)) << tag;
    EXPECT_TRUE(slurp(a) == slurp(b)) << tag << ": final weights differ";
    const auto ma = read_metrics(straight.metrics), mb = read_metrics(halves.metrics);
    ASSERT_EQ(ma.size(), 20u);
    ASSERT_EQ(mb.size(), 20u);
    for (size_t i = 0; i < ma.size(); ++i) EXPECT_EQ(ma[i], mb[i]) << tag << " step " << i + 1;
  }
}

TEST(Trainer, CorruptedNewestCheckpointFallsBackToThePrevious) {
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "fallback", make_dataset(dir));
  c.steps = 6;
  c.checkpoint_every = 3;
  run_training(c, {.quiet = true});
  const std::string newest = c.checkpoint_dir + "/step_00000006/model/model.safetensors";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x55');
  }
  EXPECT_EQ(find_latest_valid_checkpoint(c.checkpoint_dir), c.checkpoint_dir + "/step_00000003");
  c.steps = 7;
  const TrainSummary s = run_training(c, {.quiet = true});  // resumes at 3, runs 4…7
  EXPECT_EQ(s.steps_done, 7);
  // Cut back to the resumed step: steps 1…3, then 4…7, each once.
  const auto rows = read_metrics(c.metrics);
  ASSERT_EQ(rows.size(), 7u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i]["step"], int64_t(i) + 1);
}

TEST(Trainer, NonFiniteStepsAreSkippedAndCounted) {
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "nan", make_dataset(dir));
  Model m(load_config(c.model_config));
  m.init_random(1);
  m.param("model.final_norm.weight").ptr<float>()[0] = NAN;
  m.save_dir(dir / "nan_model");
  c.init_from = dir / "nan_model";
  c.steps = 3;
  c.checkpoint_dir = "";
  const TrainSummary s = run_training(c, {.quiet = true});
  EXPECT_EQ(s.skipped, 3);
  EXPECT_EQ(s.steps_done, 3);
}

TEST(Trainer, GpuDeviceWithoutAGpuIsAClearError) {
  if (gpu::available()) ZAYA_SKIP(GpuPresent) << gpu::describe();
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "no_gpu", make_dataset(dir));
  c.device = Device::Gpu;
  expect_error([&] { run_training(c, {.quiet = true}); },
               {"train.device = gpu: ", gpu::describe()});
}

namespace {

// A two-rank group that never gets to move anything: the trainer must refuse train.device = gpu
// before its first collective.
class TwoRankGroup final : public dist::Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  dist::Backend backend() const override { return dist::Backend::Mpi; }
  void all_reduce(const Tensor&, dist::ReduceOp) override { fail("unexpected all_reduce"); }
  void reduce_scatter(const Tensor&, const Tensor&) override { fail("unexpected reduce_scatter"); }
  void all_gather(const Tensor&, const Tensor&) override { fail("unexpected all_gather"); }
  void broadcast(const Tensor&, int) override { fail("unexpected broadcast"); }
  void barrier() override { fail("unexpected barrier"); }
};

}  // namespace

TEST(Trainer, GpuDeviceOnSeveralRanksNeedsTheNcclGroup) {
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "gpu_ranks", make_dataset(dir));
  c.device = Device::Gpu;
  TwoRankGroup group;
  expect_error([&] { run_training(c, {.quiet = true, .group = &group}); },
               {"train.device = gpu needs the NCCL group", "run one process", "2 ranks"});
}

TEST(Trainer, MissingDatasetIsAClearError) {
  ScratchDir dir;
  TrainConfig c = tiny_run(dir, "missing", dir / "no_such_shards");
  expect_error([&] { run_training(c, {.quiet = true}); }, {"no_such_shards"});
}
