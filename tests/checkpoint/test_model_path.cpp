// resolve_model_path (model_path.h): what a `--model` argument may name, the name a model is
// served under, and the errors for what it may not (with the near path a user meant).
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_util.h"
#include "checkpoint/model_path.h"

namespace zaya {
namespace {

using namespace zaya::test;

TEST(ModelPath, AModelDirectoryIsItself) {
  ScratchDir dir;
  tiny_model(1).save_dir(dir / "m");
  const ModelPath p = resolve_model_path(dir / "m");
  EXPECT_EQ(p.dir, dir / "m");
  EXPECT_EQ(p.note, "");
  EXPECT_EQ(p.name, "m");
  EXPECT_EQ(model_path_line(p), "");  // nothing to say
  // A trailing slash names the same directory.
  const ModelPath slash = resolve_model_path(dir / "m/");
  EXPECT_EQ(slash.dir, dir / "m");
  EXPECT_EQ(slash.name, "m");
}

TEST(ModelPath, AFileInsideAModelDirectoryNamesTheDirectory) {
  ScratchDir dir;
  tiny_model(1).save_dir(dir / "m");
  for (const char* file : {"config.json", "model.safetensors"}) {
    const ModelPath p = resolve_model_path(dir / (std::string("m/") + file));
    EXPECT_EQ(p.dir, dir / "m") << file;
    EXPECT_NE(p.note.find("model directory of"), std::string::npos) << p.note;
  }
}

TEST(ModelPath, ACheckpointAndARunNameTheirModel) {
  ScratchDir dir;
  Model m = tiny_model(1);
  OptState opt(2);
  for (int64_t step : {10, 20}) save_checkpoint(dir / "run", step, m, make_data(step, opt), 0);
  const ModelPath ckpt = resolve_model_path(dir / "run/step_00000010");
  EXPECT_EQ(ckpt.dir, dir / "run/step_00000010/model");
  EXPECT_NE(ckpt.note.find("checkpoint"), std::string::npos) << ckpt.note;
  const ModelPath run = resolve_model_path(dir / "run");
  EXPECT_EQ(run.dir, dir / "run/step_00000020/model");
  EXPECT_NE(run.note.find("step 20"), std::string::npos) << run.note;
  EXPECT_EQ(model_path_line(run), "model " + run.dir + " (" + run.note + ")");
  // A checkpoint's model is named after its run, however it was named.
  EXPECT_EQ(ckpt.name, "run");
  EXPECT_EQ(run.name, "run");
  EXPECT_EQ(resolve_model_path(dir / "run/step_00000010/model").name, "run");
  EXPECT_EQ(resolve_model_path(dir / "run/step_00000010/model/config.json").name, "run");
  // A run kept in a "checkpoints" folder (as configs/*.toml set checkpoint.dir) is named above it.
  save_checkpoint(dir / "kjv/checkpoints", 5, m, make_data(5, opt), 0);
  EXPECT_EQ(resolve_model_path(dir / "kjv/checkpoints").name, "kjv");
  // A corrupted newest step: the run falls back to the one before it, the step itself refuses.
  flip_byte(dir / "run/step_00000020/model/model.safetensors", 3);
  testing::internal::CaptureStderr();
  EXPECT_EQ(resolve_model_path(dir / "run").dir, dir / "run/step_00000010/model");
  testing::internal::GetCapturedStderr();
  expect_error([&] { resolve_model_path(dir / "run/step_00000020"); }, {"does not verify"});
}

TEST(ModelPath, WhatIsNoModelSaysWhatWasExpected) {
  ScratchDir dir;
  tiny_model(1).save_dir(dir / "m");
  expect_error([&] { resolve_model_path(dir / "m/nope"); },
               {"--model " + dir / "m/nope" + ": no such file or directory",
                "did you mean " + dir / "m" + "? (a model directory)"});
  fs::create_directories(dir / "empty");
  expect_error([&] { resolve_model_path(dir / "empty"); }, {"not a model directory"});
  expect_error([&] { resolve_model_path(dir / "empty", "IN"); }, {"IN " + dir / "empty" + ":"});
  expect_error([&] { resolve_model_path(""); }, {"empty path"});
  // Nothing near: no suggestion.
  const std::string far = error_of([&] { resolve_model_path(dir / "empty/x/y"); });
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

// The paths a user types for a run's model, wrong, each answered with the one meant.
TEST(ModelPath, NearMissesNameTheModelMeant) {
  ScratchDir dir;
  Model m = tiny_model(1);
  OptState opt(2);
  save_checkpoint(dir / "runs/tiny-kjv", 150, m, make_data(150, opt), 0);
  const std::string run = dir / "runs/tiny-kjv", step = run + "/step_00000150";
  // A folder the trainer never writes, inside the run: the run.
  expect_error([&] { resolve_model_path(run + "/final"); }, {"did you mean " + run + "? (a run)"});
  expect_error([&] { resolve_model_path(run + "/final/model"); },
               {"did you mean " + run + "? (a run)"});
  // The step without its zero padding: the checkpoint.
  expect_error([&] { resolve_model_path(run + "/step_150"); },
               {"did you mean " + step + "? (a checkpoint)"});
  // A typo in the run's name (a transposition is one edit).
  expect_error([&] { resolve_model_path(dir / "runs/tiny-kvj"); },
               {"did you mean " + run + "? (a run)"});
  // The folder of runs: the run inside it; with two, both are listed.
  expect_error([&] { resolve_model_path(dir / "runs"); }, {"did you mean " + run + "? (a run)"});
  save_checkpoint(dir / "runs/other", 5, m, make_data(5, opt), 0);
  expect_error([&] { resolve_model_path(dir / "runs"); },
               {"holds 2 models, checkpoints or runs", run, dir / "runs/other"});
  // A checkpoint's other files name the checkpoint.
  expect_error([&] { resolve_model_path(step + "/manifest.json"); },
               {"is not a model directory", "did you mean " + step + "? (a checkpoint)"});
  // A run kept in runs/NAME/checkpoints (as configs/*.toml set checkpoint.dir): runs/NAME and a
  // folder beside checkpoints/ name it.
  save_checkpoint(dir / "kjv/checkpoints", 7, m, make_data(7, opt), 0);
  const std::string kjv = dir / "kjv/checkpoints";
  expect_error([&] { resolve_model_path(dir / "kjv"); }, {"did you mean " + kjv + "? (a run)"});
  expect_error([&] { resolve_model_path(dir / "kjv/final"); },
               {"did you mean " + kjv + "? (a run)"});
  // A copy of a model kept in a model/ folder elsewhere.
  m.save_dir(dir / "kept/model");
  expect_error([&] { resolve_model_path(dir / "kept"); },
               {"did you mean " + dir / "kept/model" + "? (a model directory)"});
}

}  // namespace
}  // namespace zaya
