// A model directory as `zaya train` saves it (docs/cli.md, "What a model directory holds"):
// config.json and model.safetensors, with tokenizer.json (the toy tokenizer, vocabulary 1024),
// tokenizer_config.json (model_max_length: the trained context) and generation_config.json —
// tiny random weights. A run of such checkpoints (runs/NAME/step_N/) too. For the tests of what
// generate, serve and inspect take from a model directory.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_util.h"

namespace zaya::test {

// The tiny config with the toy tokenizer's vocabulary; random weights (std 0.2, so that greedy
// output varies).
inline Model tiny_toy_model(uint64_t seed = 7) {
  ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  c.vocab_size = 1024;
  Model m(c);
  m.init_random(seed, 0.2);
  return m;
}

// Writes the files beside the weights into model directory `dir`: tokenizer.json, and (when
// model_max_length > 0) tokenizer_config.json and generation_config.json as the trainer writes
// them.
inline void add_model_extras(const std::string& dir, int64_t model_max_length) {
  namespace fs = std::filesystem;
  fs::copy_file(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json",
                dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
  if (model_max_length <= 0) return;
  std::ofstream(dir + "/tokenizer_config.json") << nlohmann::json{
      {"model_max_length", model_max_length},
      {"bos_token", "<bos>"},
      {"eos_token", "<eos>"},
      {"tokenizer_class", "PreTrainedTokenizerFast"}}.dump(2);
  std::ofstream(dir + "/generation_config.json") << nlohmann::json{
      {"bos_token_id", 2},
      {"eos_token_id", 1},
      {"max_length", model_max_length}}.dump(2);
}

// A whole model directory at `dir` (created).
inline void save_whole_model_dir(const std::string& dir, int64_t model_max_length,
                                 uint64_t seed = 7) {
  tiny_toy_model(seed).save_dir(dir);
  add_model_extras(dir, model_max_length);
}

// A run at `run` with a checkpoint at each of `steps`, each one's model/ a whole model directory
// (different weights per step). Returns the checkpoints' paths.
inline std::vector<std::string> save_whole_run(const std::string& run,
                                               const std::vector<int64_t>& steps,
                                               int64_t model_max_length) {
  std::vector<std::string> out;
  std::vector<float> moment(16, 0.5f);
  for (int64_t step : steps) {
    CheckpointData d;
    d.trainer_state = {{"step", step}};
    d.optimizer = OptimizerShard::whole({{"adamw.m.w", Tensor(moment.data(), {16})}});
    const std::string path =
        save_checkpoint(run, step, tiny_toy_model(uint64_t(7 + step)), d, /*keep_last=*/0);
    add_model_extras(path + "/model", model_max_length);
    out.push_back(path);
  }
  return out;
}

}  // namespace zaya::test
