// What the checkpoint tests share: a tiny model, optimizer-like state owned by the test, and
// byte-level helpers for tearing and corrupting files.
#pragma once
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya::test {

namespace fs = std::filesystem;

inline Model tiny_model(uint64_t seed) {
  Model m(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"));
  m.init_random(seed);
  return m;
}

// Optimizer-like state owned by the test: two tensors per "parameter group".
struct OptState {
  std::vector<float> m1, v1, m2;
  explicit OptState(uint64_t seed)
      : m1(randn<float>(300, seed)),
        v1(randn<float>(300, seed + 1)),
        m2(randn<float>(7 * 5, seed + 2)) {}
  std::vector<std::pair<std::string, Tensor>> tensors() {
    return {{"muon.momentum.w1", Tensor(m1.data(), {300})},
            {"adamw.v.w1", Tensor(v1.data(), {30, 10})},
            {"adamw.m.bias", Tensor(m2.data(), {7, 5})}};
  }
};

inline CheckpointData make_data(int64_t step, OptState& opt) {
  CheckpointData d;
  d.trainer_state = {{"step", step},
                     {"data_position", {{"epoch", 0}, {"row", 12345}}},
                     {"rng", {{"seed", 1234}, {"counter", 18446744073709551615ull}}},
                     {"metrics", {{"loss", {6.2383, 0.1 + 0.2, 1e-310}}}}};
  d.optimizer = OptimizerShard::whole(opt.tensors());
  return d;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void flip_byte(const std::string& path, size_t from_end) {
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

inline bool same_bits(const Model& a, const Model& b) {
  return a.layout().total == b.layout().total &&
         std::memcmp(a.params(), b.params(), a.layout().total * sizeof(float)) == 0;
}

inline std::vector<std::string> names_in(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace zaya::test
