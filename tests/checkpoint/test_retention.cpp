// The checkpoints under a root (retention.h): keep-last-N pruning, torn checkpoints ignored and
// a corrupted newest one skipped, with a warning, for the previous one.
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using namespace zaya::test;

TEST(Checkpoint, KeepLastDeletesOlderOnes) {
  ScratchDir dir;
  Model m = tiny_model(1);
  OptState opt(2);
  for (int64_t step : {10, 20, 30, 40}) save_checkpoint(dir.path, step, m, make_data(step, opt), 2);
  EXPECT_EQ(names_in(dir.path), (std::vector<std::string>{"step_00000030", "step_00000040"}));
  // Re-saving an existing step replaces it; keep_last 0 keeps everything.
  save_checkpoint(dir.path, 40, m, make_data(40, opt), 0);
  save_checkpoint(dir.path, 50, m, make_data(50, opt), 0);
  EXPECT_EQ(names_in(dir.path),
            (std::vector<std::string>{"step_00000030", "step_00000040", "step_00000050"}));
  EXPECT_EQ(find_latest_valid_checkpoint(dir.path), dir / "step_00000050");
}

TEST(Checkpoint, TornCheckpointsAreIgnored) {
  ScratchDir dir;
  EXPECT_EQ(find_latest_valid_checkpoint(dir / "nothing_here"), "");
  Model m = tiny_model(1);
  OptState opt(2);
  save_checkpoint(dir.path, 100, m, make_data(100, opt), 0);
  // A temporary left by a crash, and a step directory without a manifest.
  fs::create_directories(dir / ".tmp_step_00000300_12345/model");
  fs::create_directories(dir / "step_00000200/model");
  m.save_dir(dir / "step_00000200/model");
  testing::internal::CaptureStderr();
  EXPECT_EQ(find_latest_valid_checkpoint(dir.path), dir / "step_00000100");
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("step_00000200"), std::string::npos) << log;
  EXPECT_NE(log.find("manifest.json"), std::string::npos) << log;
  nlohmann::json state;
  expect_error([&] { load_checkpoint(dir / "step_00000200", m, state, opt.tensors()); },
               {"step_00000200", "manifest.json"});
  // Pruning counts complete checkpoints only and never touches torn ones or temporaries.
  save_checkpoint(dir.path, 150, m, make_data(150, opt), 1);
  EXPECT_EQ(names_in(dir.path), (std::vector<std::string>{".tmp_step_00000300_12345",
                                                          "step_00000150", "step_00000200"}));
}

TEST(Checkpoint, CorruptedNewestFallsBackToPrevious) {
  for (const char* file : {"model/model.safetensors", "optimizer/optimizer_rank00000.safetensors",
                           "trainer_state.json"}) {
    SCOPED_TRACE(file);
    ScratchDir dir;
    Model m = tiny_model(1);
    OptState opt(2);
    save_checkpoint(dir.path, 1, m, make_data(1, opt), 0);
    const std::string newest = save_checkpoint(dir.path, 2, m, make_data(2, opt), 0);
    flip_byte(newest + "/" + file, 3);
    testing::internal::CaptureStderr();
    EXPECT_EQ(find_latest_valid_checkpoint(dir.path), dir / "step_00000001");
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("warning"), std::string::npos) << log;
    EXPECT_NE(log.find(file), std::string::npos) << log;
    nlohmann::json state;
    expect_error([&] { load_checkpoint(newest, m, state, opt.tensors()); },
                 {newest + "/" + file, "corrupted"});
  }
}
}  // namespace
}  // namespace zaya
