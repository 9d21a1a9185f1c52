// A ZAYA1-74B-preview-shaped model with sliding-window layers through the commands: its legacy
// config (smoe_layers, swa_layers on every other block, its own RoPE θ; few blocks, small widths,
// windows shorter than the sequence) and the native one `zaya convert` makes of it both load,
// train one step with `zaya train` on the tiny byte dataset, save their checkpoint's model
// directory in their own names (smoe_block / stacked experts) with the windows kept, and generate
// from it with `zaya generate`.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "train/tiny_data.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Legacy 74B layout in miniature: 3 blocks (windows 5, 0, 5), 24 experts + skip, 2 KV heads.
json legacy_config() {
  json j = {{"hidden_size", 64},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 2},
            {"vocab_size", 1024},
            {"moe_router_topk", 1},
            {"norm_epsilon", 1e-5},
            {"max_position_embeddings", 2048},
            {"rotary_base", 5000000},
            {"swa_rotary_base", 10000},
            {"rope_pct", 0.5},
            {"tie_word_embeddings", true},
            {"eos_token_id", 1}};
  for (const char* k : {"smoe_layers", "cca_num_q_heads", "num_query_groups_list",
                        "ffn_hidden_size_list", "smoe_mlp_expansion", "swa_layers"})
    j[k] = json::array();
  for (int b = 0; b < 3; ++b) {
    j["smoe_layers"].push_back("a"), j["smoe_layers"].push_back(24);
    j["cca_num_q_heads"].push_back(4), j["cca_num_q_heads"].push_back(0);
    j["num_query_groups_list"].push_back(2), j["num_query_groups_list"].push_back(0);
    j["ffn_hidden_size_list"].push_back(0), j["ffn_hidden_size_list"].push_back(32);
    j["smoe_mlp_expansion"].push_back(0), j["smoe_mlp_expansion"].push_back(16);
    j["swa_layers"].push_back(b % 2 == 0 ? 5 : 0), j["swa_layers"].push_back(0);
  }
  return j;
}

size_t count_words(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

// Trains one step from model config `config`, saving checkpoints in `layout` (original keeps a
// legacy config's names), and generates past the window from the saved model directory; returns
// that directory.
fs::path train_one_step_and_generate(const ScratchDir& dir, const std::string& name,
                                     const fs::path& config, const std::string& layout) {
  const std::string shards = make_tiny_dataset(dir);
  const fs::path run = fs::path(dir.path) / name;
  fs::create_directories(run);
  std::ofstream(run / "run.toml") << "[model]\nconfig = \"" << config.string()
                                  << "\"\n[data]\ndataset = \"" << shards
                                  << "\"\nseq_len = 16\n[train]\nmicro_batch = 2\nsteps = 1\n"
                                  << "eval_every = 0\neval_batches = 1\nsample_tokens = 0\n"
                                  << "[checkpoint]\nkeep_last = 0\nasync = false\n";
  const CliResult t =
      run_zaya_in(run.string(), "train --config " + (run / "run.toml").string() +
                                    " --set checkpoint.dir=" + (run / "ckpt").string() +
                                    " --set checkpoint.layout=" + layout);
  EXPECT_EQ(t.code, 0) << t.err << t.out;
  const fs::path model = run / "ckpt" / "step_00000001" / "model";
  EXPECT_TRUE(fs::exists(model / "config.json")) << t.err;
  fs::copy_file(fs::path(ZAYA_TEST_FIXTURES) / "tokenizer" / "toy_tokenizer.json",
                model / "tokenizer.json", fs::copy_options::overwrite_existing);
  const CliResult g =
      run_zaya_in(run.string(), "generate --model " + model.string() +
                                    " --prompt-ids '2 40 41 42 43 44 45 46 47' "
                                    "--ids --temperature 0 --max-new-tokens 10 --max-context 64 "
                                    "--ignore-eos --quiet");
  EXPECT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(count_words(g.out), 10u) << g.out;
  return model;
}

}  // namespace

TEST(TrainWindows, Legacy74BShapedTrainsAStepAndGenerates) {
  const ScratchDir dir;
  const fs::path cfg = fs::path(dir.path) / "legacy.json";
  std::ofstream(cfg) << legacy_config().dump(1);
  const fs::path model = train_one_step_and_generate(dir, "legacy", cfg, "original");
  const json saved = json::parse(slurp((model / "config.json").string()));
  EXPECT_EQ(saved["swa_layers"], legacy_config()["swa_layers"]);
  EXPECT_EQ(saved["swa_rotary_base"], 10000.0);
  EXPECT_TRUE(saved.contains("smoe_layers"));
  const SafeTensors st = SafeTensors::open_dir(model.string());
  EXPECT_NE(st.find("model.layers.1.smoe_block.experts.local_experts.23.linear_fc2.weight"),
            nullptr);
}

TEST(TrainWindows, Native74BShapedTrainsAStepAndGenerates) {
  const ScratchDir dir;
  // The same model in the native schema (its reading is tested in tests/io).
  const json native = {
      {"architectures", {"ZayaForCausalLM"}},
      {"model_type", "zaya"},
      {"hidden_size", 64},
      {"vocab_size", 1024},
      {"num_hidden_layers", 3},
      {"layer_types", {"hybrid_sliding", "hybrid", "hybrid_sliding"}},
      {"sliding_window", 5},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"head_dim", 8},
      {"num_experts", 24},
      {"moe_intermediate_size", 16},
      {"router_hidden_size", 16},
      {"rms_norm_eps", 1e-5},
      {"max_position_embeddings", 2048},
      {"eos_token_id", 1},
      {"rope_parameters",
       {{"hybrid", {{"rope_theta", 5000000.0}, {"partial_rotary_factor", 0.5}}},
        {"hybrid_sliding", {{"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}}}}}};
  const fs::path cfg = fs::path(dir.path) / "native.json";
  std::ofstream(cfg) << native.dump(1);
  const fs::path model = train_one_step_and_generate(dir, "native", cfg, "native");
  const json saved = json::parse(slurp((model / "config.json").string()));
  EXPECT_EQ(saved["layer_types"], native["layer_types"]);
  EXPECT_EQ(saved["sliding_window"], 5);
  EXPECT_EQ(saved["rope_parameters"]["hybrid_sliding"]["rope_theta"], 10000.0);
}
