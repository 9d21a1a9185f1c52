// Training TOML: every key parses with its type, --set overrides, unknown keys get a suggestion,
// bad values name the key, and the printed TOML parses back to the same config. Relative paths in
// the file are read from its folder (--set values from the current directory), every key knows
// where it was set, a missing file is named as such, and the checkpoint defaults (runs/<stem>,
// every 10% of the steps, "none") resolve as documented.
#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "train/train_config.h"

using namespace zaya;
using namespace zaya::test;

namespace {

std::string write_toml(const ScratchDir& dir, const std::string& text) {
  const std::string path = dir / "train.toml";
  std::ofstream(path) << text;
  return path;
}

const char* kMinimal = R"(
[model]
config = "tests/fixtures/configs/tiny.json"
[data]
dataset = "data/shards"
seq_len = 64
[optim]
lr = 1e-3
schedule = "wsd"
use_muon = false
)";

}  // namespace

TEST(TrainConfig, ParsesTypedKeysAndKeepsDefaults) {
  ScratchDir dir;
  const TrainConfig c = load_train_config(write_toml(dir, kMinimal));
  // Relative to the TOML's folder.
  EXPECT_EQ(c.model_config, dir / "tests/fixtures/configs/tiny.json");
  EXPECT_EQ(c.seq_len, 64);
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-3);
  EXPECT_EQ(c.optim.schedule, ScheduleKind::Wsd);
  EXPECT_FALSE(c.optim.use_muon);
  EXPECT_EQ(c.micro_batch, TrainConfig{}.micro_batch);
}

TEST(TrainConfig, UnknownKeySuggestsTheClosest) {
  ScratchDir dir;
  expect_error(
      [&] { load_train_config(write_toml(dir, std::string(kMinimal) + "[train]\nstesp = 3\n")); },
      {"unknown key 'train.stesp'", "did you mean 'train.steps'"});
  TrainConfig c;
  expect_error([&] { apply_override(c, "optim.lrr=1"); }, {"optim.lrr", "optim.lr"});
}

TEST(TrainConfig, WrongTypesAndValuesNameTheKey) {
  ScratchDir dir;
  expect_error(
      [&] {
        load_train_config(write_toml(dir, std::string(kMinimal) + "[train]\nsteps = \"ten\"\n"));
      },
      {"train.steps", "integer"});
  expect_error(
      [&] { load_train_config(write_toml(dir, std::string(kMinimal) + "[train]\nsteps = 0\n")); },
      {"train.steps", "positive"});
  expect_error([&] { load_train_config(write_toml(dir, "[model\nconfig = 1")); }, {"invalid TOML"});
  expect_error([&] { load_train_config(dir / "missing.toml"); },
               {"cannot open " + (dir / "missing.toml"), "No such file or directory"});
  expect_error([&] { load_train_config(write_toml(dir, "[optim]\nschedule = \"linear\"\n")); },
               {"optim.schedule"});
}

TEST(TrainConfig, OverridesFollowTheFieldType) {
  TrainConfig c;
  apply_override(c, "optim.lr=2e-4");
  apply_override(c, "train.steps=7");
  apply_override(c, "optim.use_muon=false");
  apply_override(c, "data.dataset=some/dir");
  apply_override(c, "optim.min_lr=0");
  EXPECT_DOUBLE_EQ(c.optim.lr, 2e-4);
  EXPECT_EQ(c.steps, 7);
  EXPECT_FALSE(c.optim.use_muon);
  EXPECT_EQ(c.dataset, "some/dir");
  EXPECT_EQ(c.optim.min_lr, 0.0);
  expect_error([&] { apply_override(c, "train.steps=many"); }, {"train.steps", "integer"});
  expect_error([&] { apply_override(c, "no_equals_sign"); }, {"key=value"});
}

namespace {

// The least a TrainConfig needs to validate (a dataset and a model config), all else default.
TrainConfig valid_config() {
  TrainConfig c;
  c.dataset = "some/dir";
  c.model_config = "config.json";
  return c;
}

}  // namespace

TEST(TrainConfig, DeviceIsCpuOrGpu) {
  TrainConfig c = valid_config();
  EXPECT_EQ(c.device, Device::Cpu);
  apply_override(c, "train.device=gpu");
  EXPECT_EQ(c.device, Device::Gpu);
  validate_train_config(c);
  expect_error([&] { apply_override(c, "train.device=tpu"); },
               {"train.device", "cpu or gpu", "tpu"});
}

TEST(TrainConfig, PrecisionIsFp32OrBf16AndBf16NeedsTheGpu) {
  TrainConfig c = valid_config();
  EXPECT_EQ(c.precision, ops::MatmulPrecision::F32);
  apply_override(c, "train.precision=bf16");
  expect_error([&] { validate_train_config(c); },
               {"train.precision", "bf16", "train.device = gpu"});
  apply_override(c, "train.device=gpu");
  validate_train_config(c);
  expect_error([&] { apply_override(c, "train.precision=fp16"); },
               {"train.precision", "fp32 or bf16", "fp16"});
}

TEST(TrainConfig, ActivationsAreAutoFp32OrBf16OnEitherDevice) {
  TrainConfig c = valid_config();
  EXPECT_EQ(c.activations, ActivationsSetting::Auto);
  apply_override(c, "train.activations=bf16");
  validate_train_config(c);  // the CPU too
  apply_override(c, "train.activations=fp32");
  validate_train_config(c);
  expect_error([&] { apply_override(c, "train.activations=fp16"); },
               {"train.activations", "auto, fp32 or bf16", "fp16"});
}

TEST(TrainConfig, MuonBf16IsOffByDefaultAndNeedsTheGpu) {
  TrainConfig c = valid_config();
  EXPECT_FALSE(c.optim.muon_bf16);
  apply_override(c, "optim.muon_bf16=true");
  EXPECT_TRUE(c.optim.muon_bf16);
  expect_error([&] { validate_train_config(c); }, {"optim.muon_bf16", "train.device = gpu"});
  apply_override(c, "train.device=gpu");
  validate_train_config(c);
}

TEST(TrainConfig, PrintedTomlParsesBackToTheSameConfig) {
  ScratchDir dir;
  TrainConfig c = load_train_config(write_toml(dir, kMinimal));
  c.sample_prompt = "In the \"beginning\"";
  c.optim.adam_eps = 1e-8;
  const TrainConfig back = load_train_config(write_toml(dir, train_config_to_toml(c)));
  EXPECT_EQ(train_config_to_json(back), train_config_to_json(c));
}

// A run file works from any directory: its relative paths are its folder's, lexically normalised;
// absolute paths, "none" and "auto" stay as written; --set values are the current directory's.
TEST(TrainConfig, RelativePathsInTheTomlAreReadFromItsFolder) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "configs");
  const std::string path = dir / "configs/run.toml";
  std::ofstream(path) << R"(
[model]
config = "models/m.json"
init_from = "/abs/model"
[data]
dataset = "../data/shards"
tokenizer = "./tok.json"
[train]
metrics = "../runs/run/metrics.jsonl"
sample_prompt = "not/a/path"
[checkpoint]
dir = "../runs/run"
resume = "../runs/old/step_00000010"
)";
  TrainConfig c = load_train_config(path);
  EXPECT_EQ(c.model_config, dir / "configs/models/m.json");
  EXPECT_EQ(c.init_from, "/abs/model");
  EXPECT_EQ(c.dataset, dir / "data/shards");
  EXPECT_EQ(c.tokenizer, dir / "configs/tok.json");
  EXPECT_EQ(c.metrics, dir / "runs/run/metrics.jsonl");
  EXPECT_EQ(c.sample_prompt, "not/a/path");
  EXPECT_EQ(c.checkpoint_dir, dir / "runs/run");
  EXPECT_EQ(c.resume.dir, dir / "runs/old/step_00000010");
  // Where each key came from, with the value as written.
  EXPECT_EQ(key_source(c, "model.config"), "model.config = models/m.json (in " + path + ")");
  apply_override(c, "data.dataset=here/shards");
  EXPECT_EQ(c.dataset, "here/shards");
  EXPECT_EQ(key_source(c, "data.dataset"), "data.dataset = here/shards (--set)");
  EXPECT_EQ(key_source(TrainConfig{}, "train.steps"), "train.steps = 1000");
  // "none" and the other resume words are not paths.
  std::ofstream(path) << "[model]\nconfig = \"m.json\"\n[data]\ndataset = \"d\"\n"
                      << "[checkpoint]\ndir = \"none\"\nresume = \"none\"\n";
  c = load_train_config(path);
  EXPECT_EQ(c.checkpoint_dir, "none");
  EXPECT_EQ(c.resume.kind, ResumeFrom::Kind::None);
  EXPECT_EQ(checkpoint_root(c), "");
}

TEST(TrainConfig, CheckpointDefaultsAreARunDirectoryAndTenPercentOfTheSteps) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "configs");
  const std::string path = dir / "configs/my-run.toml";
  std::ofstream(path) << "[model]\nconfig = \"m.json\"\n[data]\ndataset = \"d\"\n";
  TrainConfig c = load_train_config(path);
  EXPECT_EQ(c.checkpoint_dir, "");
  apply_run_defaults(c, path);
  EXPECT_EQ(c.checkpoint_dir, "runs/my-run");  // the current directory's, named after the file
  EXPECT_EQ(checkpoint_root(c), "runs/my-run");
  TrainConfig off = c;
  apply_override(off, "checkpoint.dir=none");
  apply_run_defaults(off, path);
  EXPECT_EQ(checkpoint_root(off), "");
  // checkpoint.every = -1: every 10% of train.steps, rounded up, at least 1.
  EXPECT_EQ(c.checkpoint_every, -1);
  for (const auto& [steps, every] :
       std::vector<std::pair<int64_t, int64_t>>{{1000, 100}, {200, 20}, {15, 2}, {5, 1}, {1, 1}}) {
    c.steps = steps;
    EXPECT_EQ(checkpoint_interval(c), every) << steps;
  }
  c.checkpoint_every = 0;
  EXPECT_EQ(checkpoint_interval(c), 0);
  expect_error(
      [&] {
        apply_override(c, "checkpoint.every=-2");
        validate_train_config(c);
      },
      {"checkpoint.every", "≥ -1"});
}
