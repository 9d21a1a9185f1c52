// `zaya convert` and `zaya inspect` on models with sliding-window layers: a
// ZAYA1-74B-preview-shaped model (its head layout, 24 experts plus the skip class, router width 256
// scaled down; every other block windowed, its own RoPE θ) with random weights, written in the
// legacy layout (smoe_layers config, smoe_block tensor names), converted legacy → native → legacy
// and legacy → original → native → legacy: every tensor's bytes, the windows and the θs survive
// each way. inspect gives the repository's two 74B configs
// (configs/models/zaya1-74b-preview{,-legacy}.json) the same counts, near the published 74.7B total
// / ~4B active, KV-cache figures in which only the full layers grow past the window, and weight
// bytes per format. The twin's swa_k matches in every layout, and a GGUF that `zaya quantize`
// writes of it keeps its windows and θs (and from the legacy layout too).
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "infer/gguf_model.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/attention_window.h"
#include "model/model.h"
#include "test_util.h"
#include "twin_eval.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kRoot = std::string(ZAYA_TEST_FIXTURES) + "/../..";

// The legacy 74B config with `blocks` blocks and small widths: hidden 64 (4 query heads of 8 in
// CCA's compressed space, 2 KV heads), 24 experts of width 16, router 16, window 5 on even blocks.
json legacy_74b_shaped(int64_t blocks) {
  json j = {{"hidden_size", 64},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 2},
            {"vocab_size", 300},
            {"moe_router_topk", 1},
            {"norm_epsilon", 1e-5},
            {"max_position_embeddings", 4096},
            {"rotary_base", 5000000},
            {"swa_rotary_base", 10000},
            {"rope_pct", 0.5},
            {"tie_word_embeddings", true},
            {"eos_token_id", 1}};
  for (const char* k : {"smoe_layers", "cca_num_q_heads", "num_query_groups_list",
                        "ffn_hidden_size_list", "smoe_mlp_expansion", "swa_layers"})
    j[k] = json::array();
  for (int64_t b = 0; b < blocks; ++b) {
    j["smoe_layers"].push_back("a"), j["smoe_layers"].push_back(24);
    j["cca_num_q_heads"].push_back(4), j["cca_num_q_heads"].push_back(0);
    j["num_query_groups_list"].push_back(2), j["num_query_groups_list"].push_back(0);
    j["ffn_hidden_size_list"].push_back(0), j["ffn_hidden_size_list"].push_back(32);
    j["smoe_mlp_expansion"].push_back(0), j["smoe_mlp_expansion"].push_back(16);
    j["swa_layers"].push_back(b % 2 == 0 ? 5 : 0), j["swa_layers"].push_back(0);
  }
  return j;
}

// A random model directory in the legacy layout.
void write_legacy_model(const fs::path& dir, int64_t blocks) {
  Model m(config_from_json(legacy_74b_shaped(blocks)));
  m.init_random(5, 0.2);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : m.layout().specs) tensors.emplace_back(s.name, s.view(m.params()));
  save_model_dir(dir.string(), m.config(), tensors);
}

void expect_same_dir_tensors(const fs::path& a, const fs::path& b) {
  const SafeTensors x = SafeTensors::open_dir(a.string()), y = SafeTensors::open_dir(b.string());
  ASSERT_EQ(x.names(), y.names());
  for (const std::string& n : x.names()) {
    ASSERT_EQ(x.at(n).nbytes, y.at(n).nbytes) << n;
    EXPECT_EQ(std::memcmp(x.at(n).data, y.at(n).data, x.at(n).nbytes), 0) << n;
  }
}

CliResult convert(const std::string& to, const fs::path& in, const fs::path& out) {
  const ScratchDir run;
  return run_zaya_in(run.path, "convert --to " + to + " " + in.string() + " " + out.string());
}

json inspect_json(const std::string& path) {
  const ScratchDir run;
  const CliResult r = run_zaya_in(run.path, "inspect --json " + path);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

}  // namespace

TEST(CliConvertWindows, LegacyNativeOriginalRoundTripsBitExact) {
  const ScratchDir d;
  const fs::path dir(d.path), legacy = dir / "legacy";
  write_legacy_model(legacy, 3);
  // The legacy directory holds smoe_block names and the legacy config.
  const SafeTensors src = SafeTensors::open_dir(legacy.string());
  EXPECT_NE(src.find("model.layers.1.smoe_block.experts.local_experts.23.linear_fc1.weight"),
            nullptr);
  EXPECT_NE(src.find("model.layers.3.smoe_block.router.router_mlp.4.weight"), nullptr);
  for (const std::string& n : src.names()) EXPECT_EQ(n.find("zaya_block"), std::string::npos) << n;
  const json src_cfg = json::parse(slurp((legacy / "config.json").string()));
  EXPECT_TRUE(src_cfg.contains("smoe_layers"));

  CliResult r = convert("native", legacy, dir / "native");
  ASSERT_EQ(r.code, 0) << r.err;
  const json ncfg = json::parse(slurp((dir / "native" / "config.json").string()));
  EXPECT_EQ(ncfg["layer_types"], json::array({"hybrid_sliding", "hybrid", "hybrid_sliding"}));
  EXPECT_EQ(ncfg["sliding_window"], 5);
  EXPECT_EQ(ncfg["rope_parameters"]["hybrid_sliding"]["rope_theta"], 10000.0);
  const SafeTensors nst = SafeTensors::open_dir((dir / "native").string());
  EXPECT_NE(nst.find("model.layers.2.mlp.experts.gate_up_proj"), nullptr);

  r = convert("legacy", dir / "native", dir / "legacy2");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_dir_tensors(legacy, dir / "legacy2");
  const json back = json::parse(slurp((dir / "legacy2" / "config.json").string()));
  for (const char* k : {"smoe_layers", "swa_layers", "swa_rotary_base", "rotary_base", "rope_pct",
                        "smoe_mlp_expansion", "ffn_hidden_size_list"})
    EXPECT_EQ(back[k], src_cfg[k]) << k;

  // Through ZAYA1-base's names: zaya_block tensors, zaya_layers + swa_layers config.
  r = convert("original", legacy, dir / "original");
  ASSERT_EQ(r.code, 0) << r.err;
  const SafeTensors ost = SafeTensors::open_dir((dir / "original").string());
  EXPECT_NE(ost.find("model.layers.1.zaya_block.router.balancing_biases"), nullptr);
  const json ocfg = json::parse(slurp((dir / "original" / "config.json").string()));
  EXPECT_EQ(ocfg["swa_layers"], src_cfg["swa_layers"]);
  ASSERT_EQ(convert("native", dir / "original", dir / "native2").code, 0);
  expect_same_dir_tensors(dir / "native", dir / "native2");
  ASSERT_EQ(convert("legacy", dir / "native2", dir / "legacy3").code, 0);
  expect_same_dir_tensors(legacy, dir / "legacy3");
}

// The twin's swa_k (tests/fixtures/model_swa): windowed layers of one window (what the native
// schema holds) and a skip class that wins for some tokens. zaya eval of the original files matches
// the twin; converted to native it matches the twin run with native semantics, converted to legacy
// the twin again — in each layout the windows and their θ are read from that layout's config.
TEST(CliConvertWindows, EveryLayoutMatchesTheTwin) {
  const ScratchDir d;
  const fs::path dir(d.path), src = fs::path(ZAYA_TEST_FIXTURES) / "model_swa" / "swa_k";
  const fs::path tokens = src / "tokens.txt";
  ASSERT_EQ(convert("native", src, dir / "native").code, 0);
  ASSERT_EQ(convert("legacy", src, dir / "legacy").code, 0);
  const json ncfg = json::parse(slurp((dir / "native" / "config.json").string()));
  EXPECT_EQ(ncfg["layer_types"], json::array({"hybrid_sliding", "hybrid", "hybrid_sliding"}));
  EXPECT_EQ(ncfg["sliding_window"], 4);
  EXPECT_EQ(json::parse(slurp((dir / "legacy" / "config.json").string()))["swa_layers"],
            json::array({4, 0, 0, 0, 4, 0}));

  const double lo = eval_loss(dir, src, tokens, dir / "lo.st", dir / "go.st");
  expect_eval_matches_twin(lo, dir / "lo.st", dir / "go.st", src / "expected.safetensors");
  const double ll = eval_loss(dir, dir / "legacy", tokens, dir / "ll.st", dir / "gl.st");
  expect_eval_matches_twin(ll, dir / "ll.st", dir / "gl.st", src / "expected.safetensors");
  const double ln = eval_loss(dir, dir / "native", tokens, dir / "ln.st", dir / "gn.st");
  expect_eval_matches_twin(ln, dir / "ln.st", dir / "gn.st", src / "expected_native.safetensors");
  std::printf("swa_k loss: original %.8f, legacy %.8f, native %.8f\n", lo, ll, ln);
  EXPECT_GT(std::abs(lo - ln), 100 * kModelLossAbs);  // the skip class makes them differ
}

// A GGUF written by `zaya quantize` carries config.json's text: the windows and the windowed θ come
// back exactly, from the original and the legacy layout alike, and its loss stays near the f32
// model's (Q8_0 weights).
TEST(CliConvertWindows, GgufKeepsTheWindows) {
  const ScratchDir d;
  const fs::path dir(d.path), src = fs::path(ZAYA_TEST_FIXTURES) / "model_swa" / "swa_k";
  ASSERT_EQ(convert("legacy", src, dir / "legacy").code, 0);
  const double want = eval_loss(dir, src, src / "tokens.txt", dir / "l.st", dir / "g.st");
  for (const fs::path& model : {src, dir / "legacy"}) {
    const fs::path gguf = dir / (model.filename().string() + ".gguf");
    const CliResult q = run_zaya_in(d.path, "quantize --quiet --model " + model.string() +
                                                " --type q8_0 --out " + gguf.string());
    ASSERT_EQ(q.code, 0) << q.err;
    const ZayaConfig c = open_gguf_model(gguf.string()).config;
    EXPECT_EQ(c.swa_layers, (std::vector<int64_t>{4, 0, 0, 0, 4, 0})) << model;
    EXPECT_EQ(c.swa_rope_theta, 10000.0) << model;
    EXPECT_EQ(c.rope_theta, 5000000.0) << model;
    // A GGUF file is scored by the inference decoder (no --logits/--grads): the loss line alone.
    const CliResult e = run_zaya_in(d.path, "eval --quiet --model " + gguf.string() + " --tokens " +
                                                (src / "tokens.txt").string());
    ASSERT_EQ(e.code, 0) << e.err;
    ASSERT_EQ(e.out.rfind("loss ", 0), 0u) << e.out;
    EXPECT_NEAR(std::stod(e.out.substr(5)), want, 0.02) << model;
  }
}

TEST(CliConvertWindows, Inspect74BConfigsInBothLayouts) {
  const json n = inspect_json(kRoot + "/configs/models/zaya1-74b-preview.json");
  const json l = inspect_json(kRoot + "/configs/models/zaya1-74b-preview-legacy.json");
  EXPECT_EQ(n["layout"], "native");
  EXPECT_EQ(l["layout"], "original");
  EXPECT_NE(l["schema"].get<std::string>().find("legacy"), std::string::npos);
  for (const char* k : {"params_total", "params_active_without_embedding", "kv_bytes_bf16_at_32k",
                        "kv_bytes_bf16_at_128k", "windowed_attention_layers", "attention_layers"})
    EXPECT_EQ(n[k], l[k]) << k;
  std::printf("74B: %lld total, %lld active without embedding\n",
              (long long)n["params_total"].get<int64_t>(),
              (long long)n["params_active_without_embedding"].get<int64_t>());
  // The published figures: 74.7B parameters, about 4B active.
  EXPECT_NEAR(double(n["params_total"].get<int64_t>()), 74.7e9, 0.15e9);
  EXPECT_NEAR(double(n["params_active_without_embedding"].get<int64_t>()), 4.0e9, 0.5e9);
  // KV cache: 30 full layers hold every token, 30 windowed ones at most their window's keys.
  EXPECT_EQ(n["windowed_attention_layers"], 30);
  const int64_t per_layer_token = n["kv_bytes_per_token_bf16"].get<int64_t>() / 60;
  const json cfg = json::parse(slurp(kRoot + "/configs/models/zaya1-74b-preview.json"));
  const int64_t W = attention_keys(config_from_json(cfg), 0);  // block 0 is windowed
  EXPECT_GT(W, 0);
  for (const auto& [key, T] : {std::pair<const char*, int64_t>{"kv_bytes_bf16_at_32k", 32768},
                               {"kv_bytes_bf16_at_128k", 131072}})
    EXPECT_EQ(n[key].get<int64_t>(), per_layer_token * (30 * T + 30 * std::min(T, W))) << key;
  // Weights per format: bf16 is 2 bytes a parameter; Q8_0 keeps 34 bytes per 32 weights for all
  // but the vectors (f32) and conv kernels (f16), so its file is within 1% of 34/32 bytes a weight;
  // each smaller preset is smaller.
  EXPECT_EQ(n["weight_bytes"], l["weight_bytes"]);
  const json& wb = n["weight_bytes"];
  const double total = double(n["params_total"].get<int64_t>());
  EXPECT_EQ(wb["bf16"].get<double>(), 2 * total);
  EXPECT_NEAR(wb["q8_0"].get<double>(), total * 34 / 32, 0.01 * total);
  EXPECT_GT(wb["q8_0"].get<double>(), wb["q6_k"].get<double>());
  EXPECT_GT(wb["q6_k"].get<double>(), wb["q5_k_m"].get<double>());
  EXPECT_GT(wb["q5_k_m"].get<double>(), wb["q4_k_m"].get<double>());
  std::printf("74B weights: bf16 %.1f GiB, q8_0 %.1f, q4_k_m %.1f\n",
              wb["bf16"].get<double>() / (1 << 30), wb["q8_0"].get<double>() / (1 << 30),
              wb["q4_k_m"].get<double>() / (1 << 30));
}
