// Resharding the optimizer state (checkpoint.h): shard files written here by hand — safetensors
// whose metadata holds the format, world_size, rank, total_elements, the global layout and the
// stored ranges, as N writing ranks leave them — are reassembled by load_checkpoint for 1, 2 or 3
// reading ranks bit for bit, and each inconsistency in the shards is an error whose message names
// it. A checkpoint is first saved whole (model, trainer state, manifest); its optimizer/ directory
// is then replaced by the hand-written shards and the manifest rewritten to list them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/optimizer_shards.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::expect_error;
using test::ScratchDir;

constexpr const char* kFormat = "zaya-optimizer-state-v1";

// The global layout: three tensors, 635 elements.
struct LayoutEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset, numel;
};
const std::vector<LayoutEntry> kLayout = {
    {"muon.momentum.w1", {300}, 0, 300},
    {"adamw.v.w1", {30, 10}, 300, 300},
    {"adamw.m.bias", {7, 5}, 600, 35},
};
constexpr int64_t kTotal = 635;

const LayoutEntry& entry(const std::string& name) {
  for (const LayoutEntry& e : kLayout)
    if (e.name == name) return e;
  ADD_FAILURE() << "no tensor " << name;
  return kLayout[0];
}

json layout_json() {
  json l = json::array();
  for (const LayoutEntry& e : kLayout)
    l.push_back({{"name", e.name}, {"offset", e.offset}, {"shape", e.shape}});
  return l;
}

// The global vector's values (distinct, so a misplaced element shows).
const std::vector<float>& global_values() {
  static const std::vector<float> v = test::randn<float>(kTotal, 31);
  return v;
}

// A stored range: tensor `key` of the shard file holds global elements [global, global + length).
struct Range {
  std::string key;
  int64_t global, length;
};

// Elements [begin, begin + length) of tensor `name`, stored as the writer names them ("<name>"
// when whole, "<name>@<begin>" otherwise).
Range piece(const std::string& name, int64_t begin, int64_t length) {
  const LayoutEntry& e = entry(name);
  const bool whole = begin == 0 && length == e.numel;
  return {whole ? name : name + "@" + std::to_string(begin), e.offset + begin, length};
}
Range whole(const std::string& name) {
  return piece(name, 0, entry(name).numel);
}

// One shard file's contents: metadata and stored F32 tensors, editable before it is written.
struct Shard {
  std::string file;  // under optimizer/
  std::map<std::string, std::string> meta;
  std::vector<std::pair<std::string, std::vector<float>>> tensors;
};

std::string shard_file_name(int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "optimizer_rank%05d.safetensors", rank);
  return name;
}

Shard make_shard(int rank, int world, const std::vector<Range>& ranges) {
  Shard s;
  s.file = shard_file_name(rank);
  json jr = json::array();
  for (const Range& r : ranges) {
    jr.push_back({{"tensor", r.key}, {"global_offset", r.global}, {"length", r.length}});
    const float* from = global_values().data() + r.global;
    s.tensors.emplace_back(r.key, std::vector<float>(from, from + r.length));
  }
  s.meta = {{"format", kFormat},
            {"world_size", std::to_string(world)},
            {"rank", std::to_string(rank)},
            {"total_elements", std::to_string(kTotal)},
            {"layout", layout_json().dump()},
            {"ranges", jr.dump()}};
  return s;
}

// Shards rank r of `world` from ranges[r].
std::vector<Shard> make_shards(const std::vector<std::vector<Range>>& ranges) {
  std::vector<Shard> out;
  for (size_t r = 0; r < ranges.size(); ++r)
    out.push_back(make_shard(int(r), int(ranges.size()), ranges[r]));
  return out;
}

// Two writing ranks: a tensor split between them, ranges stored out of order in rank 1's file.
std::vector<Shard> two_shards() {
  return make_shards({{whole("muon.momentum.w1"), piece("adamw.v.w1", 0, 100)},
                      {whole("adamw.m.bias"), piece("adamw.v.w1", 100, 200)}});
}

// Three writing ranks, two tensors split, one of them three ways.
std::vector<Shard> three_shards() {
  return make_shards(
      {{piece("muon.momentum.w1", 0, 150)},
       {piece("muon.momentum.w1", 150, 150), whole("adamw.v.w1"), piece("adamw.m.bias", 0, 10)},
       {piece("adamw.m.bias", 10, 25)}});
}

Model tiny_model() {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(5);
  return m;
}

std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

// A checkpoint directory (saved whole once) whose optimizer shards a test replaces.
class OptimizerShards : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::vector<float>> whole_values;
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const LayoutEntry& e : kLayout) {
      const float* from = global_values().data() + e.offset;
      whole_values.emplace_back(from, from + e.numel);
    }
    for (size_t i = 0; i < kLayout.size(); ++i) {
      Tensor t(whole_values[i].data(), {kLayout[i].numel});
      t = kLayout[i].shape.size() == 2 ? t.view({kLayout[i].shape[0], kLayout[i].shape[1]}) : t;
      tensors.emplace_back(kLayout[i].name, t);
    }
    CheckpointData d;
    d.trainer_state = {{"step", 3}};
    d.optimizer = OptimizerShard::whole(tensors);
    path_ = save_checkpoint(dir_.path, 3, model_, d, 0);
  }

  // Replaces optimizer/ with `shards` and rewrites the manifest to list them (and not what was
  // there), so the checkpoint verifies and only the shards' contents are under test.
  void install(const std::vector<Shard>& shards) {
    const std::string opt = path_ + "/optimizer";
    fs::remove_all(opt);
    fs::create_directories(opt);
    const std::string manifest_path = path_ + "/manifest.json";
    json manifest = json::parse(std::ifstream(manifest_path));
    json files = json::array();
    for (const json& f : manifest.at("files"))
      if (f.at("path").get<std::string>().rfind("optimizer/", 0) != 0) files.push_back(f);
    for (const Shard& s : shards) {
      std::vector<std::pair<std::string, Tensor>> stored;
      for (const auto& [key, values] : s.tensors)
        stored.emplace_back(
            key, Tensor(const_cast<float*>(values.data()), {static_cast<int64_t>(values.size())}));
      const std::string file = opt + "/" + s.file;
      save_safetensors(file, stored, s.meta);
      uint64_t bytes = 0;
      const uint64_t digest = file_xxh3(file, false, &bytes);
      files.push_back(
          {{"path", "optimizer/" + s.file}, {"bytes", bytes}, {"xxh3_64", hex64(digest)}});
    }
    manifest["files"] = files;
    std::ofstream(manifest_path) << manifest.dump();
    ASSERT_EQ(verify_checkpoint(path_), "");
  }

  void load(const OptimizerShard& dest) {
    Model m = tiny_model();
    json state;
    load_checkpoint(path_, m, state, dest);
  }

  // A destination of the whole global layout and no slices (for the metadata errors).
  static OptimizerShard layout_only() {
    OptimizerShard d;
    for (const LayoutEntry& e : kLayout) d.layout.emplace_back(e.name, e.shape);
    return d;
  }

  // Installs `shards` and expects loading them (whole, one reading rank) to fail with `parts`.
  void expect_load_error(const std::vector<Shard>& shards,
                         std::initializer_list<std::string> parts) {
    install(shards);
    std::vector<float> buf(kTotal, 0.0f);
    OptimizerShard d = layout_only();
    for (const LayoutEntry& e : kLayout)
      d.slices.push_back({e.name, 0, Tensor(buf.data() + e.offset, {e.numel})});
    expect_error([&] { load(d); }, parts);
  }

  // Loads the installed shards as `readers` ranks, each holding a contiguous chunk of the global
  // vector as per-tensor slices (ZeRO-1's partition), and expects every chunk bit for bit.
  void expect_readers_get_their_chunks(int readers, const std::string& what) {
    for (int r = 0; r < readers; ++r) {
      const int64_t lo = kTotal * r / readers, hi = kTotal * (r + 1) / readers;
      std::vector<float> chunk(size_t(hi - lo), std::numeric_limits<float>::quiet_NaN());
      OptimizerShard d = layout_only();
      for (const LayoutEntry& e : kLayout) {
        const int64_t a = std::max(lo, e.offset), b = std::min(hi, e.offset + e.numel);
        if (a < b)
          d.slices.push_back({e.name, a - e.offset, Tensor(chunk.data() + (a - lo), {b - a})});
      }
      load(d);
      for (int64_t i = lo; i < hi; ++i)
        if (std::memcmp(&chunk[size_t(i - lo)], &global_values()[size_t(i)], 4) != 0) {
          ADD_FAILURE() << what << ", " << readers << " reading ranks: rank " << r << " element "
                        << i << " is " << chunk[size_t(i - lo)] << ", expected "
                        << global_values()[size_t(i)];
          break;
        }
    }
  }

  ScratchDir dir_;
  Model model_ = tiny_model();
  std::string path_;
};

// ---- reassembly ------------------------------------------------------------------------------

TEST_F(OptimizerShards, TwoWritersLoadIntoOneTwoAndThreeReaders) {
  install(two_shards());
  for (int readers : {1, 2, 3}) expect_readers_get_their_chunks(readers, "2 shards");
}

TEST_F(OptimizerShards, ThreeWritersLoadIntoOneTwoAndThreeReaders) {
  install(three_shards());
  for (int readers : {1, 2, 3}) expect_readers_get_their_chunks(readers, "3 shards");
}

// A writing rank that holds nothing (more ranks than the state splits into) writes a shard of no
// ranges; it is counted and contributes nothing.
TEST_F(OptimizerShards, AnEmptyShardIsPartOfTheWorld) {
  install(
      make_shards({{whole("muon.momentum.w1")}, {}, {whole("adamw.v.w1"), whole("adamw.m.bias")}}));
  for (int readers : {1, 2, 3}) expect_readers_get_their_chunks(readers, "3 shards, one empty");
}

// A reading slice that spans several writers' ranges, and a whole tensor kept in its shape.
TEST_F(OptimizerShards, ASliceAcrossThreeWritersAndAWholeShapedTensor) {
  install(three_shards());
  std::vector<float> mid(200), bias(35);
  OptimizerShard d = layout_only();
  d.slices = {{"muon.momentum.w1", 100, Tensor(mid.data(), {200})},
              {"adamw.m.bias", 0, Tensor(bias.data(), {7, 5})}};
  load(d);
  EXPECT_EQ(std::memcmp(mid.data(), global_values().data() + 100, 200 * 4), 0);
  EXPECT_EQ(std::memcmp(bias.data(), global_values().data() + 600, 35 * 4), 0);
}

// ---- the shards' metadata --------------------------------------------------------------------

TEST_F(OptimizerShards, NoShardAtAll) {
  install({});
  expect_error([&] { load(layout_only()); }, {"checkpoint has no optimizer shard"});
}

TEST_F(OptimizerShards, AMissingMetadataKeyIsNamed) {
  for (const char* key : {"format", "world_size", "rank", "total_elements", "layout", "ranges"}) {
    SCOPED_TRACE(key);
    std::vector<Shard> s = two_shards();
    s[1].meta.erase(key);
    expect_load_error(s, {"optimizer_rank00001.safetensors",
                          std::string("optimizer shard metadata has no '") + key + "'"});
  }
}

TEST_F(OptimizerShards, AnUnknownFormat) {
  std::vector<Shard> s = two_shards();
  s[0].meta["format"] = "zaya-optimizer-state-v0";
  expect_load_error(s, {"optimizer_rank00000.safetensors",
                        "unknown optimizer shard format 'zaya-optimizer-state-v0' (expected "
                        "zaya-optimizer-state-v1)"});
}

TEST_F(OptimizerShards, CountsThatAreNotIntegers) {
  for (const auto& [key, value] : std::vector<std::pair<const char*, const char*>>{
           {"world_size", "two"}, {"rank", "1x"}, {"total_elements", ""}}) {
    SCOPED_TRACE(std::string(key) + " = " + value);
    std::vector<Shard> s = two_shards();
    s[1].meta[key] = value;
    expect_load_error(s, {"optimizer_rank00001.safetensors",
                          "optimizer shard metadata world_size/rank/total_elements are not "
                          "integers"});
  }
}

// A world size that differs between the shards, a rank outside the world, a rank written twice.
TEST_F(OptimizerShards, RanksInconsistentWithTheWorld) {
  {
    SCOPED_TRACE("world sizes 2 and 3");
    std::vector<Shard> s = two_shards();
    s[1].meta["world_size"] = "3";
    expect_load_error(s, {"optimizer_rank00001.safetensors",
                          "optimizer shard rank 1 of world size 3 is inconsistent with the other "
                          "shards"});
  }
  for (const char* rank : {"2", "-1"}) {
    SCOPED_TRACE(std::string("rank ") + rank);
    std::vector<Shard> s = two_shards();
    s[1].meta["rank"] = rank;
    expect_load_error(
        s, {std::string("optimizer shard rank ") + rank + " of world size 2 is inconsistent"});
  }
  {
    SCOPED_TRACE("rank 0 twice");
    std::vector<Shard> s = two_shards();
    s[1].meta["rank"] = "0";
    expect_load_error(s, {"optimizer_rank00001.safetensors",
                          "optimizer shard rank 0 of world size 2 is inconsistent"});
  }
}

// The shards were written by two ranks but only one file is in the checkpoint (listed in its
// manifest: a shard missing from the directory alone is a torn checkpoint, caught by the
// manifest).
TEST_F(OptimizerShards, AMissingShardFile) {
  std::vector<Shard> s = two_shards();
  s.pop_back();
  expect_load_error(s, {"found 1 optimizer shards but they were written by 2 ranks"});
  install(two_shards());
  fs::remove(path_ + "/optimizer/" + shard_file_name(1));
  expect_error([&] { load(layout_only()); },
               {"torn or corrupted", "optimizer/optimizer_rank00001.safetensors"});
}

TEST_F(OptimizerShards, LayoutThatIsNotJson) {
  std::vector<Shard> s = two_shards();
  for (Shard& x : s) x.meta["layout"] = "[{\"name\": ";
  expect_load_error(s, {"optimizer_rank00000.safetensors (layout metadata): not valid JSON"});
}

TEST_F(OptimizerShards, LayoutEntriesWithoutTheirFields) {
  for (const char* field : {"name", "offset", "shape"}) {
    SCOPED_TRACE(field);
    json l = layout_json();
    l[1].erase(field);
    std::vector<Shard> s = two_shards();
    for (Shard& x : s) x.meta["layout"] = l.dump();
    expect_load_error(s,
                      {"optimizer_rank00000.safetensors", "malformed optimizer layout metadata"});
  }
}

TEST_F(OptimizerShards, LayoutsThatDifferBetweenShards) {
  json l = layout_json();
  l[2]["shape"] = {5, 7};
  std::vector<Shard> s = two_shards();
  s[1].meta["layout"] = l.dump();
  expect_load_error(s,
                    {"optimizer_rank00001.safetensors", "optimizer layout differs from the one in",
                     "optimizer_rank00000.safetensors"});
}

TEST_F(OptimizerShards, RangesThatAreNotJson) {
  std::vector<Shard> s = two_shards();
  s[1].meta["ranges"] = "[{\"tensor\": \"adamw.m.bias\",";
  expect_load_error(s, {"optimizer_rank00001.safetensors (ranges metadata): not valid JSON"});
}

TEST_F(OptimizerShards, RangesWithoutTheirFields) {
  for (const char* field : {"tensor", "global_offset", "length"}) {
    SCOPED_TRACE(field);
    std::vector<Shard> s = two_shards();
    json r = json::parse(s[1].meta["ranges"]);
    r[0].erase(field);
    s[1].meta["ranges"] = r.dump();
    expect_load_error(s,
                      {"optimizer_rank00001.safetensors", "malformed optimizer ranges metadata"});
  }
}

// A range naming a tensor the file does not store.
TEST_F(OptimizerShards, ARangeWhoseTensorIsNotStored) {
  std::vector<Shard> s = two_shards();
  s[1].tensors[1].first = "adamw.v.w1@101";  // the range still says adamw.v.w1@100
  expect_load_error(s, {"optimizer_rank00001.safetensors", "tensor 'adamw.v.w1@100' not found"});
}

// A stored tensor whose length is not its range's.
TEST_F(OptimizerShards, AStoredTensorOfAnotherLength) {
  std::vector<Shard> s = two_shards();
  s[1].tensors[1].second.pop_back();
  expect_load_error(s, {"optimizer_rank00001.safetensors",
                        "optimizer range 'adamw.v.w1@100' is F32 with 199 elements, expected F32 "
                        "with 200"});
}

// Two ranges covering the same elements, a gap between ranges, no range at element 0.
TEST_F(OptimizerShards, OverlapsAndGaps) {
  {
    SCOPED_TRACE("overlap");
    // Rank 1's piece of adamw.v.w1 starts 20 elements early: [380, 400) is in both shards.
    expect_load_error(make_shards({{whole("muon.momentum.w1"), piece("adamw.v.w1", 0, 100)},
                                   {whole("adamw.m.bias"), piece("adamw.v.w1", 80, 220)}}),
                      {"optimizer shards leave a gap or overlap at element 400",
                       "optimizer_rank00001.safetensors"});
  }
  {
    SCOPED_TRACE("gap");
    // ... or 20 elements late: [400, 420) is in neither.
    expect_load_error(make_shards({{whole("muon.momentum.w1"), piece("adamw.v.w1", 0, 100)},
                                   {whole("adamw.m.bias"), piece("adamw.v.w1", 120, 180)}}),
                      {"optimizer shards leave a gap or overlap at element 400",
                       "optimizer_rank00001.safetensors"});
  }
  {
    SCOPED_TRACE("no range at element 0");
    expect_load_error(make_shards({{piece("muon.momentum.w1", 1, 299), piece("adamw.v.w1", 0, 100)},
                                   {whole("adamw.m.bias"), piece("adamw.v.w1", 100, 200)}}),
                      {"optimizer shards leave a gap or overlap at element 0",
                       "optimizer_rank00000.safetensors"});
  }
}

// Ranges that tile a vector shorter or longer than total_elements: a missing end, or a range past
// the end of the last tensor.
TEST_F(OptimizerShards, RangesPastTheEndOrShortOfIt) {
  {
    SCOPED_TRACE("past the end");
    std::vector<Shard> s = two_shards();
    // adamw.m.bias's range (rank 1's first) runs 5 elements past its tensor, the last one.
    json r = json::parse(s[1].meta["ranges"]);
    r[0]["length"] = 40;
    s[1].meta["ranges"] = r.dump();
    s[1].tensors[0].second.resize(40, 1.0f);
    expect_load_error(s, {"optimizer shards cover 640 of 635 elements"});
  }
  {
    SCOPED_TRACE("short of the end");
    expect_load_error(make_shards({{whole("muon.momentum.w1"), piece("adamw.v.w1", 0, 100)},
                                   {piece("adamw.m.bias", 0, 30), piece("adamw.v.w1", 100, 200)}}),
                      {"optimizer shards cover 630 of 635 elements"});
  }
}

// A layout whose tensors are not back to back from element 0 to total_elements (a gap, an overlap,
// a tensor listed twice, a total that disagrees) would put values in the wrong place.
TEST_F(OptimizerShards, ALayoutThatDoesNotTileTheVectorIsRefused) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"gap", [](json& l) { l[2]["offset"] = 610; },
       "tensor 'adamw.m.bias' starts at element 610, expected 600"},
      {"overlap", [](json& l) { l[1]["offset"] = 290; },
       "tensor 'adamw.v.w1' starts at element 290, expected 300"},
      {"twice", [](json& l) { l[1]["name"] = "muon.momentum.w1"; },
       "tensor 'muon.momentum.w1' is listed twice"},
      {"short", [](json& l) { l.erase(2); },
       "optimizer layout covers 600 elements but total_elements is 635"},
      {"negative", [](json& l) { l[0]["shape"] = {-300}; },
       "tensor 'muon.momentum.w1' has a bad shape [-300]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<Shard> s = two_shards();
    json l = layout_json();
    c.edit(l);
    for (Shard& x : s) x.meta["layout"] = l.dump();
    expect_load_error(s, {"optimizer_rank00000.safetensors", c.message});
  }
}

// ---- the checkpoint's layout against this run's ----------------------------------------------

TEST_F(OptimizerShards, ATensorOfThisRunMissingFromTheCheckpoint) {
  install(two_shards());
  OptimizerShard d = layout_only();
  d.layout.emplace_back("muon.momentum.w2", std::vector<int64_t>{4});
  expect_error([&] { load(d); },
               {"optimizer tensor 'muon.momentum.w2' is not in the checkpoint (was it written by a "
                "different optimizer configuration?)"});
}

TEST_F(OptimizerShards, AShapeMismatch) {
  install(three_shards());
  OptimizerShard d = layout_only();
  d.layout[1].second = {10, 30};
  expect_error([&] { load(d); }, {"optimizer tensor 'adamw.v.w1' has shape [30,10] in the "
                                  "checkpoint but [10,30] in this run"});
}

TEST_F(OptimizerShards, ACheckpointTensorThisRunDoesNotHave) {
  install(two_shards());
  OptimizerShard d = layout_only();
  d.layout.pop_back();
  expect_error([&] { load(d); }, {"the checkpoint holds optimizer tensor 'adamw.m.bias' that this "
                                  "run does not have"});
}

// ---- the destination's slices ----------------------------------------------------------------

TEST_F(OptimizerShards, DestinationSlicesOutsideTheLayoutOrTheirTensor) {
  install(two_shards());
  std::vector<float> f(10);
  std::vector<double> f64(10);
  OptimizerShard d = layout_only();
  d.slices = {{"muon.momentum.w9", 0, Tensor(f.data(), {10})}};
  expect_error([&] { load(d); }, {"optimizer destination 'muon.momentum.w9' is not in the layout"});
  d.slices = {{"adamw.m.bias", 0, Tensor(f64.data(), {10})}};
  expect_error([&] { load(d); }, {"optimizer destination 'adamw.m.bias' must be F32, is F64"});
  d.slices = {{"adamw.m.bias", 30, Tensor(f.data(), {10})}};
  expect_error([&] { load(d); },
               {"optimizer destination [30, 40) is outside 'adamw.m.bias' (35 elements)"});
  d.slices = {{"adamw.m.bias", -1, Tensor(f.data(), {10})}};
  expect_error([&] { load(d); },
               {"optimizer destination [-1, 9) is outside 'adamw.m.bias' (35 elements)"});
}

// optimizer_shard_file_bytes and OptimizerShardSizer give the size write_optimizer_shard writes
// (whole tensors, slices, an empty shard), from the slices' shapes alone.
TEST(OptimizerShardSize, IsTheSizeWritten) {
  const ScratchDir dir;
  std::vector<float> data(635);
  OptimizerShard shard;
  for (const LayoutEntry& e : kLayout) shard.layout.emplace_back(e.name, e.shape);
  const OptimizerShardSizer sizer(shard.layout);
  const std::vector<std::vector<OptimizerSlice>> cases = {
      {},
      {{"muon.momentum.w1", 0, Tensor(data.data(), {300})}},
      {{"muon.momentum.w1", 100, Tensor(data.data(), {200})},
       {"adamw.v.w1", 0, Tensor(data.data(), {30, 10})},
       {"adamw.m.bias", 3, Tensor(data.data(), {32})}}};
  for (size_t k = 0; k < cases.size(); ++k) {
    shard.slices = cases[k];
    const std::string path = dir / ("s" + std::to_string(k) + ".safetensors");
    write_optimizer_shard(path, shard, int(k), 3);
    const uint64_t written = fs::file_size(path);
    for (OptimizerSlice& s : shard.slices) s.data.data = nullptr;
    EXPECT_EQ(optimizer_shard_file_bytes(shard, int(k), 3), written) << k;
    EXPECT_EQ(sizer.bytes(shard.slices, int(k), 3), written) << k;
  }
}

}  // namespace
}  // namespace zaya
