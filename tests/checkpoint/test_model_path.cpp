// resolve_model_path (model_path.h): what a `--model` argument may name, and the errors for what
// it may not.
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
  expect_error([&] { resolve_model_path(dir / "m/nope"); }, {"did you mean " + dir / "m" + "?"});
  fs::create_directories(dir / "empty");
  expect_error([&] { resolve_model_path(dir / "empty"); }, {"not a model directory"});
}

}  // namespace
}  // namespace zaya
