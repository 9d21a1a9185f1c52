// Nothing lost silently: an all-corrupt checkpoint directory is an error (not a run from
// step 0 over it), dead writers' temporaries are cleaned at start, the metrics file holds every
// step exactly once after a resume (a torn last line dropped) and a failed metrics write is an
// error; trainer_state.json values and non-finite learning rates are rejected.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "data/shards.h"
#include "test_util.h"
#include "train/metrics_log.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// tiny_run with smaller steps: 6 of them, a checkpoint every 3.
TrainConfig short_run(const ScratchDir& dir, const std::string& name, const std::string& shards) {
  TrainConfig c = short_tiny_run(dir, name, shards, 6);
  c.checkpoint_every = 3;
  return c;
}

std::vector<int64_t> metric_steps(const std::string& path) {
  std::vector<int64_t> steps;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
  return steps;
}

std::vector<int64_t> iota_steps(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

void corrupt(const std::string& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-5, std::ios::end);
  f.put('\x55');
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A pid that no process has: a child that has exited and been reaped.
int64_t dead_pid() {
  const pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

TEST(Durability, AllCorruptCheckpointsAreAnErrorNotAFreshStart) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "corrupt", make_tiny_dataset(dir));
  run_training(c, {.quiet = true});
  const std::string w3 = c.checkpoint_dir + "/step_00000003/model/model.safetensors";
  const std::string w6 = c.checkpoint_dir + "/step_00000006/model/model.safetensors";
  corrupt(w3);
  corrupt(w6);
  const std::string before3 = slurp(w3), before6 = slurp(w6);
  c.steps = 9;
  expect_error(
      [&] { run_training(c, {.quiet = true}); },
      {"2 checkpoint(s)", "none verifies", "refusing to start from step 0", "resume = \"none\""});
  EXPECT_EQ(slurp(w3), before3) << "the old checkpoint was overwritten";
  EXPECT_EQ(slurp(w6), before6) << "the old checkpoint was overwritten";
  // The user's explicit choice: from scratch, over the old checkpoints (deleted first).
  c.resume = ResumeFrom::parse("none");
  c.checkpoint_overwrite = true;
  EXPECT_EQ(run_training(c, {.quiet = true}).steps_done, 9);
}

TEST(Durability, StaleTemporariesOfDeadWritersAreRemovedAtStart) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "stale", make_tiny_dataset(dir));
  run_training(c, {.quiet = true});
  const std::string root = c.checkpoint_dir;
  const int64_t dead = dead_pid();
  const std::string tmp = fmt::format("{}/.tmp_step_00000009_{}", root, dead);
  fs::create_directories(tmp + "/model");
  std::ofstream(tmp + "/model/model.safetensors") << std::string(100000, 'x');
  const std::string live = fmt::format("{}/.tmp_step_00000012_{}", root, int64_t(getppid()));
  fs::create_directories(live);
  // Killed mid-replacement: step 3's old copy moved aside, the new one not yet in place.
  fs::rename(root + "/step_00000003", fmt::format("{}/.old_step_00000003_{}", root, dead));
  EXPECT_EQ(remove_stale_checkpoint_temps(root), 1);
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(fs::exists(live)) << "a running writer's directory was removed";
  EXPECT_EQ(verify_checkpoint(root + "/step_00000003"), "") << "the old copy was not put back";
  // And through the trainer: a kill mid-write leaves nothing behind after the next start.
  fs::create_directories(tmp);
  fs::remove_all(live);
  c.steps = 7;
  run_training(c, {.quiet = true});
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().rfind("step_", 0), 0u) << e.path();
}

TEST(Durability, MetricsHoldEveryStepOnceAfterAResume) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "metrics", make_tiny_dataset(dir));
  c.steps = 8;
  run_training(c, {.quiet = true});  // checkpoints at 3, 6, 8
  EXPECT_EQ(metric_steps(c.metrics), iota_steps(8));
  // A run killed after step 8 was logged but before its checkpoint, mid-way through a line.
  fs::remove_all(c.checkpoint_dir + "/step_00000008");
  std::ofstream(c.metrics, std::ios::app) << R"({"step": 9, "loss": 1.)";
  c.steps = 10;
  run_training(c, {.quiet = true});  // resumes at 6
  EXPECT_EQ(metric_steps(c.metrics), iota_steps(10));
  // A fresh start (resume = "none", over the old checkpoints) rewrites the file from step 1.
  c.resume = ResumeFrom::parse("none");
  c.checkpoint_overwrite = true;
  c.steps = 4;
  run_training(c, {.quiet = true});
  EXPECT_EQ(metric_steps(c.metrics), iota_steps(4));
}

TEST(Durability, AFailedMetricsWriteIsAnError) {
  ASSERT_TRUE(fs::exists("/dev/full")) << "Linux has /dev/full: the test of a full disk needs it";
  MetricsLog log("/dev/full", 0);
  expect_error([&] { log.append({{"step", 1}}); }, {"metrics file /dev/full: write failed"});
}

// A hostile edit: trainer_state.json edited (step −7, then INT64_MAX) and the manifest
// re-hashed so the checkpoint verifies; resuming from it is an error naming the key.
TEST(Durability, AResumedTrainerStateOutOfRangeIsAnError) {
  ScratchDir dir;
  TrainConfig c = short_run(dir, "state", make_tiny_dataset(dir));
  c.steps = 3;
  run_training(c, {.quiet = true});
  const std::string ck = c.checkpoint_dir + "/step_00000003";
  for (const nlohmann::json& bad : {nlohmann::json(-7), nlohmann::json(INT64_MAX)}) {
    nlohmann::json state = nlohmann::json::parse(slurp(ck + "/trainer_state.json"));
    state["step"] = bad;
    std::ofstream(ck + "/trainer_state.json") << state.dump(2) << "\n";
    nlohmann::json manifest = nlohmann::json::parse(slurp(ck + "/manifest.json"));
    for (nlohmann::json& f : manifest["files"])
      if (f["path"] == "trainer_state.json") {
        f["bytes"] = fs::file_size(ck + "/trainer_state.json");
        f["xxh3_64"] = hex64(file_checksum(ck + "/trainer_state.json"));
      }
    std::ofstream(ck + "/manifest.json") << manifest.dump(2) << "\n";
    ASSERT_EQ(verify_checkpoint(ck), "") << "the re-hashed checkpoint should verify";
    c.steps = 6;
    expect_error([&] { run_training(c, {.quiet = true}); },
                 {"trainer_state.json", "\"step\" is " + bad.dump()});
  }
}

TEST(Durability, NonFiniteLearningRateIsRejected) {
  TrainConfig c;
  c.dataset = "x";
  c.model_config = "y";
  c.optim.lr = INFINITY;
  expect_error([&] { validate_train_config(c); }, {"optim.lr", "finite"});
  c.optim.lr = 1e-3;
  c.optim.weight_decay = NAN;
  expect_error([&] { validate_train_config(c); }, {"optim.weight_decay", "finite"});
}
