// The asynchronous writer (async_writer.cpp): the same files as a synchronous save, and a
// background failure surfaced by wait().
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using namespace zaya::test;

TEST(AsyncCheckpoint, WritesTheSameFilesAsSync) {
  ScratchDir sync_dir, async_dir;
  Model m = tiny_model(5);
  OptState opt(6);
  CheckpointData d = make_data(3, opt);
  const std::string sync_path = save_checkpoint(sync_dir.path, 3, m, d, 0);
  AsyncCheckpointWriter writer(async_dir.path, 2);
  writer.prepare(m, d);
  writer.save(3, m, d);
  // The snapshot is taken in save(): changing the state afterwards must not leak into it.
  std::fill(opt.m1.begin(), opt.m1.end(), 0.0f);
  m.params()[0] += 1.0f;
  d.trainer_state["step"] = 999;
  writer.wait();
  EXPECT_EQ(writer.last_path(), async_dir / "step_00000003");
  EXPECT_GE(writer.last_stall_seconds(), 0.0);
  for (const char* f :
       {"model/config.json", "model/model.safetensors", "optimizer/optimizer_rank00000.safetensors",
        "trainer_state.json", "manifest.json"})
    EXPECT_EQ(read_bytes(sync_path + "/" + f), read_bytes(async_dir / "step_00000003/" + f)) << f;

  writer.save(4, m, make_data(4, opt));
  writer.save(5, m, make_data(5, opt));  // waits for step 4 first
  writer.wait();
  EXPECT_EQ(names_in(async_dir.path), (std::vector<std::string>{"step_00000004", "step_00000005"}));
  Model back = tiny_model(0);
  OptState dest(0);
  nlohmann::json state;
  load_checkpoint(writer.last_path(), back, state, dest.tensors());
  EXPECT_TRUE(same_bits(m, back));
  EXPECT_EQ(state["step"], 5);
  EXPECT_EQ(dest.m1, opt.m1);
}

TEST(AsyncCheckpoint, WaitSurfacesBackgroundErrors) {
  ScratchDir dir;
  std::ofstream(dir / "a_file") << "x";
  Model m = tiny_model(1);
  OptState opt(2);
  AsyncCheckpointWriter writer(dir / "a_file/ckpt", 0);
  writer.save(1, m, make_data(1, opt));
  expect_error([&] { writer.wait(); }, {"step 1", "a_file/ckpt"});
  writer.wait();  // the error is reported once
  // And a failure is also surfaced by the next save.
  writer.save(2, m, make_data(2, opt));
  expect_error([&] { writer.save(3, m, make_data(3, opt)); }, {"step 2"});
}
}  // namespace
}  // namespace zaya
