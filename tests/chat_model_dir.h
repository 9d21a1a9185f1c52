// A ZAYA1-8B-like model directory for the chat tests (docs/chat.md, "What a ZAYA1-8B directory
// holds"): tiny random weights in transformers' native layout, sharded with an index as the hub's
// are, under a config.json with ZAYA1-8B's fields (vocabulary 262,272, eos 106); the real Gemma 3
// tokenizer.json with ZAYA's special tokens in place of the Gemma 3 tokens of the same ids
// (<zyphra_tool_call> 101, </zyphra_tool_call> 102, <zyphra_tool_response> 103,
// </zyphra_tool_response> 104, <|im_start|> 105, <|im_end|> 106); tokenizer_config.json;
// chat_template.jinja (tests/fixtures/chat_templates/zaya1.jinja, the ZAYA1 chat format); and
// generation_config.json with eos [106, 1] and ZAYA1-8B's sampling defaults.
//
// The Gemma 3 tokenizer is not committed (33 MB): scripts/fetch_gemma3_tokenizer.sh puts it in
// build/tokenizer-cache (scripts/setup.sh runs it). Without it the tests that need this directory
// skip naming the script — not an allowed skip reason (tests/test_skips.h), so CI fails instead.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "gemma3_tokenizer.h"
#include "io/model_dir.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "test_paths.h"

namespace zaya::test {

// ZAYA's special tokens and the ids they have in ZAYA1-8B's tokenizer.
inline const std::pair<int, const char*> kZayaSpecialTokens[] = {
    {101, "<zyphra_tool_call>"},      {102, "</zyphra_tool_call>"}, {103, "<zyphra_tool_response>"},
    {104, "</zyphra_tool_response>"}, {105, "<|im_start|>"},        {106, "<|im_end|>"}};

// ZAYA1-8B's native config.json with tiny shapes (hidden 64, two decoder layers, four experts).
inline nlohmann::json zaya_chat_config_json() {
  return nlohmann::json::parse(R"({
    "architectures": ["ZayaForCausalLM"], "model_type": "zaya", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 2, "cca_time0": 2, "cca_time1": 2,
    "dtype": "float32", "eos_token_id": 106, "head_dim": 8, "hidden_act": "silu",
    "hidden_size": 64, "initializer_range": 0.02, "layer_types": ["hybrid", "hybrid"],
    "lm_head_bias": false, "max_position_embeddings": 131072, "moe_intermediate_size": 64,
    "num_attention_heads": 4, "num_experts": 4, "num_experts_per_tok": 1,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "output_router_logits": false,
    "pad_token_id": 0, "rms_norm_eps": 1e-05,
    "rope_parameters": {"hybrid": {"partial_rotary_factor": 0.5, "rope_theta": 5000000.0,
                                   "rope_type": "default"}, "rope_type": "default"},
    "router_hidden_size": 32, "sliding_window": null, "tie_word_embeddings": true,
    "transformers_version": "5.0.0", "use_cache": true, "vocab_size": 262272})");
}

// The context the fixture says it was trained with (tokenizer_config.json's model_max_length).
inline constexpr int64_t kZayaChatContext = 4096;

// Writes the directory at `dir` (created). Returns false when the Gemma 3 tokenizer is missing.
// Random weights with std 0.2 (so that sampled output varies), from `seed`.
inline bool save_zaya_chat_model_dir(const std::string& dir, uint64_t seed = 11) {
  namespace fs = std::filesystem;
  if (!fs::exists(gemma3_tokenizer_path())) return false;
  fs::create_directories(dir);

  Model m(config_from_json(zaya_chat_config_json()));
  m.init_random(seed, 0.2);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : m.layout().specs) tensors.emplace_back(s.name, s.view(m.params()));
  save_model_dir(dir, m.config(), tensors, /*max_shard_bytes=*/uint64_t(48) << 20);  // 2 shards

  std::ifstream in(gemma3_tokenizer_path(), std::ios::binary);
  nlohmann::json tok = nlohmann::json::parse(in);
  auto& vocab = tok["model"]["vocab"];
  for (const auto& [id, text] : kZayaSpecialTokens) {
    for (auto& t : tok["added_tokens"]) {
      if (t["id"] != id) continue;
      vocab.erase(t["content"].get<std::string>());
      t["content"] = text;
      t["special"] = true;
    }
    vocab[text] = id;
  }
  std::ofstream(dir + "/tokenizer.json", std::ios::binary) << tok.dump();
  std::ofstream(dir + "/tokenizer_config.json") << nlohmann::json{
      {"model_max_length", kZayaChatContext},
      {"bos_token", "<bos>"},
      {"eos_token", "<|im_end|>"},
      {"pad_token", "<pad>"},
      {"tokenizer_class", "GemmaTokenizer"}}.dump(2);
  std::ofstream(dir + "/generation_config.json")
      << nlohmann::json{{"bos_token_id", 2}, {"eos_token_id", {106, 1}}, {"pad_token_id", 0},
                        {"do_sample", true}, {"temperature", 1.0},       {"top_p", 0.95}}
             .dump(2);
  fs::copy_file(std::string(ZAYA_TEST_FIXTURES) + "/chat_templates/zaya1.jinja",
                dir + "/chat_template.jinja", fs::copy_options::overwrite_existing);
  return true;
}

// One directory per test process, made on first use (a few seconds: the tokenizer is 33 MB) and
// removed when the process exits. Returns "" when the Gemma 3 tokenizer is missing (then
// GTEST_SKIP() << gemma3_missing_message()).
inline const std::string& zaya_chat_model_dir() {
  struct Owned {
    std::string dir;
    ~Owned() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  };
  static std::once_flag once;
  static Owned owned;
  std::call_once(once, [] {
    const std::string d = (std::filesystem::path(testing::TempDir()) /
                           ("zaya_chat_model_" + std::to_string(getpid())))
                              .string();
    if (save_zaya_chat_model_dir(d)) owned.dir = d;
  });
  return owned.dir;
}

}  // namespace zaya::test
