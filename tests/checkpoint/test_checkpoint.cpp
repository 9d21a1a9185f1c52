// Checkpoints through their API (checkpoint.h): bitwise round trip, ZeRO-1 slices loaded
// whatever slices were written, the model part a normal model directory, mismatches and an
// unwritable root clear errors.
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_util.h"
#include "io/safetensors.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using namespace zaya::test;

TEST(Checkpoint, RoundTripIsBitwise) {
  ScratchDir dir;
  Model m = tiny_model(7);
  OptState opt(11);
  CheckpointData d = make_data(42, opt);
  const std::string path = save_checkpoint(dir.path, 42, m, d, 0);
  EXPECT_EQ(path, dir.path + "/step_00000042");
  for (const char* f :
       {"model/config.json", "model/model.safetensors", "optimizer/optimizer_rank00000.safetensors",
        "trainer_state.json", "manifest.json"})
    EXPECT_TRUE(fs::exists(path + "/" + f)) << f;
  EXPECT_EQ(verify_checkpoint(path), "");

  Model back = tiny_model(99);
  ASSERT_FALSE(same_bits(m, back));
  OptState dest(1000);
  nlohmann::json state;
  load_checkpoint(path, back, state, dest.tensors());
  EXPECT_TRUE(same_bits(m, back));
  EXPECT_EQ(state, d.trainer_state);
  EXPECT_EQ(std::memcmp(dest.m1.data(), opt.m1.data(), opt.m1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(dest.v1.data(), opt.v1.data(), opt.v1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(dest.m2.data(), opt.m2.data(), opt.m2.size() * 4), 0);

  // The optimizer shard records the global layout and world size.
  SafeTensors st = SafeTensors::open_file(path + "/optimizer/optimizer_rank00000.safetensors");
  EXPECT_EQ(st.metadata().at("world_size"), "1");
  EXPECT_EQ(st.metadata().at("total_elements"), "635");
  auto ranges = nlohmann::json::parse(st.metadata().at("ranges"));
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[1]["global_offset"], 300);
  EXPECT_EQ(ranges[2]["global_offset"], 600);
  EXPECT_EQ(ranges[2]["length"], 35);
}

// ZeRO-1 shards: slices of tensors are stored with their global offsets, and a loading rank
// gets any slice back whatever slices were written; a gap is an error naming where.
TEST(Checkpoint, SlicesLoadWhateverSlicesWereWritten) {
  ScratchDir dir;
  Model m = tiny_model(7);
  OptState opt(11);
  auto whole = opt.tensors();
  CheckpointData d = make_data(1, opt);
  d.optimizer.slices = {{"muon.momentum.w1", 0, Tensor(opt.m1.data(), {120})},
                        {"muon.momentum.w1", 120, Tensor(opt.m1.data() + 120, {180})},
                        {"adamw.v.w1", 0, whole[1].second},
                        {"adamw.m.bias", 0, whole[2].second}};
  const std::string path = save_checkpoint(dir.path, 1, m, d, 0);
  SafeTensors st = SafeTensors::open_file(path + "/optimizer/optimizer_rank00000.safetensors");
  auto ranges = nlohmann::json::parse(st.metadata().at("ranges"));
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[1]["tensor"], "muon.momentum.w1@120");
  EXPECT_EQ(ranges[1]["global_offset"], 120);

  std::vector<float> a(200), c(10);
  OptimizerShard dest = OptimizerShard::whole(whole);
  dest.slices = {{"muon.momentum.w1", 50, Tensor(a.data(), {200})},
                 {"adamw.m.bias", 10, Tensor(c.data(), {10})}};
  nlohmann::json state;
  load_checkpoint(path, m, state, dest);
  EXPECT_EQ(std::memcmp(a.data(), opt.m1.data() + 50, a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(c.data(), opt.m2.data() + 10, c.size() * 4), 0);
  dest.slices = {{"adamw.m.bias", 30, Tensor(c.data(), {10})}};
  expect_error([&] { load_checkpoint(path, m, state, dest); }, {"adamw.m.bias", "outside"});

  d.optimizer.slices.erase(d.optimizer.slices.begin());  // elements [0, 120) missing
  const std::string gap = save_checkpoint(dir.path, 2, m, d, 0);
  expect_error([&] { load_checkpoint(gap, m, state, dest); }, {"gap", "element 0"});
}

TEST(Checkpoint, ModelPartIsANormalModelDirectory) {
  ScratchDir dir;
  Model m = tiny_model(3);
  OptState opt(4);
  const std::string path = save_checkpoint(dir.path, 5, m, make_data(5, opt), 0);
  Model loaded = Model::load_dir(path + "/model");
  EXPECT_EQ(loaded.config(), m.config());
  EXPECT_TRUE(same_bits(m, loaded));
  // Byte-identical to what Model::save_dir writes.
  m.save_dir(dir / "plain");
  EXPECT_EQ(read_bytes(path + "/model/model.safetensors"),
            read_bytes(dir / "plain/model.safetensors"));
  EXPECT_EQ(read_bytes(path + "/model/config.json"), read_bytes(dir / "plain/config.json"));
}

TEST(Checkpoint, MismatchesGiveClearErrors) {
  ScratchDir dir;
  Model m = tiny_model(1);
  OptState opt(2);
  const std::string path = save_checkpoint(dir.path, 1, m, make_data(1, opt), 0);
  nlohmann::json state;

  ZayaConfig other_cfg = m.config();
  other_cfg.vocab_size = 1024;
  Model other(other_cfg);
  expect_error([&] { load_checkpoint(path, other, state, opt.tensors()); },
               {"different model config", "vocab_size"});

  auto dest = opt.tensors();
  dest[1].second = dest[1].second.view({10, 30});
  expect_error([&] { load_checkpoint(path, m, state, dest); }, {"adamw.v.w1", "shape"});
  dest = opt.tensors();
  dest.pop_back();
  expect_error([&] { load_checkpoint(path, m, state, dest); }, {"adamw.m.bias"});
  dest = opt.tensors();
  dest[0].first = "renamed";
  expect_error([&] { load_checkpoint(path, m, state, dest); },
               {"renamed", "not in the checkpoint"});

  std::vector<double> f64(4);
  CheckpointData bad;
  bad.optimizer = OptimizerShard::whole({{"x", Tensor(f64.data(), {4})}});
  expect_error([&] { save_checkpoint(dir.path, 2, m, bad, 0); }, {"'x'", "F32"});
  EXPECT_FALSE(fs::exists(dir / "step_00000002"));
  EXPECT_EQ(names_in(dir.path), std::vector<std::string>{"step_00000001"});  // temporary removed
}

TEST(Checkpoint, UnwritableRootIsAnError) {
  ScratchDir dir;
  std::ofstream(dir / "a_file") << "x";
  Model m = tiny_model(1);
  OptState opt(2);
  expect_error([&] { save_checkpoint(dir / "a_file/ckpt", 1, m, make_data(1, opt), 0); },
               {"a_file/ckpt"});
}
}  // namespace
}  // namespace zaya
