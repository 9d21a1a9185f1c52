// Checkpoints: bitwise round trip, keep-last-N, torn and corrupted checkpoints skipped (with a
// warning) or refused (naming the file), async save identical to sync, errors surfaced.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/safetensors.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"
#include "checkpoint/checkpoint.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::ScratchDir;

Model tiny_model(uint64_t seed) {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(seed);
  return m;
}

// Optimizer-like state owned by the test: two tensors per "parameter group".
struct OptState {
  std::vector<float> m1, v1, m2;
  explicit OptState(uint64_t seed)
      : m1(test::randn<float>(300, seed)),
        v1(test::randn<float>(300, seed + 1)),
        m2(test::randn<float>(7 * 5, seed + 2)) {}
  std::vector<std::pair<std::string, Tensor>> tensors() {
    return {{"muon.momentum.w1", Tensor(m1.data(), {300})},
            {"adamw.v.w1", Tensor(v1.data(), {30, 10})},
            {"adamw.m.bias", Tensor(m2.data(), {7, 5})}};
  }
};

CheckpointData make_data(int64_t step, OptState& opt) {
  CheckpointData d;
  d.trainer_state = {{"step", step},
                     {"data_position", {{"epoch", 0}, {"row", 12345}}},
                     {"rng", {{"seed", 1234}, {"counter", 18446744073709551615ull}}},
                     {"metrics", {{"loss", {6.2383, 0.1 + 0.2, 1e-310}}}}};
  d.optimizer = OptimizerShard::whole(opt.tensors());
  return d;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void flip_byte(const std::string& path, size_t from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const std::streamoff pos = f.tellg() - std::streamoff(from_end);
  f.seekg(pos);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x40;
  f.seekp(pos);
  f.write(&c, 1);
}

bool same_bits(const Model& a, const Model& b) {
  return a.layout().total == b.layout().total &&
         std::memcmp(a.params(), b.params(), a.layout().total * sizeof(float)) == 0;
}

std::vector<std::string> names_in(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

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

TEST(Checkpoint, TruncatedOrMissingFileIsDetected) {
  ScratchDir dir;
  Model m = tiny_model(1);
  OptState opt(2);
  const std::string path = save_checkpoint(dir.path, 1, m, make_data(1, opt), 0);
  fs::resize_file(path + "/model/model.safetensors", 100);
  EXPECT_NE(verify_checkpoint(path).find("model.safetensors"), std::string::npos);
  fs::remove(path + "/model/model.safetensors");
  EXPECT_NE(verify_checkpoint(path).find("missing"), std::string::npos);
  std::ofstream(path + "/manifest.json") << "{ not json";
  EXPECT_NE(verify_checkpoint(path).find("manifest.json"), std::string::npos);
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
