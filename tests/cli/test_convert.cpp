// `zaya convert` end to end: a twin model converted to the native layout gives bit-identical
// `zaya eval` logits and gradients where the skip class never wins, and on skip_e (where it does)
// the native result of the twin run with native semantics (and a different loss than the original,
// with a warning from convert); `zaya inspect` shows the layout and schema and gives ZAYA1-base's
// counts for a native config with ZAYA1-8B's shapes; `checkpoint.layout = "native"` training
// writes a native model directory; bad input gives one clear error line.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "infer/whole_model_dir.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "train/tiny_data.h"
#include "twin_eval.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const fs::path kModels = fs::path(ZAYA_TEST_FIXTURES) / "model";

fs::path scratch(const std::string& name) {
  fs::path p =
      fs::path(::testing::TempDir()) / ("zaya_convert_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

CliResult run(const std::string& args) {
  return run_zaya_in(scratch("run").string(), args);
}

void expect_same_file_tensors(const fs::path& a, const fs::path& b) {
  const SafeTensors x = SafeTensors::open_file(a.string()), y = SafeTensors::open_file(b.string());
  ASSERT_EQ(x.names(), y.names());
  for (const std::string& n : x.names()) {
    ASSERT_EQ(x.at(n).nbytes, y.at(n).nbytes) << n;
    EXPECT_EQ(std::memcmp(x.at(n).data, y.at(n).data, x.at(n).nbytes), 0) << n;
  }
}

}  // namespace

TEST(CliConvert, NativeEvalIsBitIdenticalWhereSkipNeverWins) {
  for (const char* name : {"tiny_a", "gqa4_c", "t2_h"}) {
    const fs::path src = kModels / name, dir = scratch(std::string("parity_") + name);
    const CliResult c = run("convert --to native " + src.string() + " " + (dir / "n").string());
    ASSERT_EQ(c.code, 0) << c.err;
    // The warning is about what the biases allow for some input, not these tokens.
    std::printf("%s: convert %s\n", name, c.err.empty() ? "printed no warning" : c.err.c_str());
    const double lo = eval_loss(dir, src, src / "tokens.txt", dir / "lo.st", dir / "go.st");
    const double ln = eval_loss(dir, dir / "n", src / "tokens.txt", dir / "ln.st", dir / "gn.st");
    EXPECT_EQ(lo, ln) << name;
    expect_same_file_tensors(dir / "lo.st", dir / "ln.st");
    expect_same_file_tensors(dir / "go.st", dir / "gn.st");
    // And back: the original layout again, same tensors as the source.
    ASSERT_EQ(
        run("convert --to original " + (dir / "n").string() + " " + (dir / "o").string()).code, 0);
    const SafeTensors a = SafeTensors::open_dir(src.string());
    const SafeTensors b = SafeTensors::open_dir((dir / "o").string());
    ASSERT_EQ(a.names(), b.names());
    for (const std::string& n : a.names())
      EXPECT_EQ(std::memcmp(a.at(n).data, b.at(n).data, a.at(n).nbytes), 0) << n;
  }
}

TEST(CliConvert, SkipClassDifferenceMatchesTheNativeTwin) {
  const fs::path src = kModels / "skip_e", dir = scratch("skip");
  const CliResult c = run("convert --to native " + src.string() + " " + (dir / "n").string());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("skip class win for some inputs in MoE sub-layer(s) 1"), std::string::npos)
      << c.err;
  const double lo = eval_loss(dir, src, src / "tokens.txt", dir / "lo.st", dir / "go.st");
  const double ln = eval_loss(dir, dir / "n", src / "tokens.txt", dir / "ln.st", dir / "gn.st");
  std::printf("skip_e loss: original %.8f, native %.8f\n", lo, ln);
  expect_eval_matches_twin(lo, dir / "lo.st", dir / "go.st", src / "expected.safetensors");
  expect_eval_matches_twin(ln, dir / "ln.st", dir / "gn.st", src / "expected_native.safetensors");
  EXPECT_GT(std::abs(lo - ln), 100 * kModelLossAbs);  // the semantics really differ here
}

TEST(CliConvert, InspectShowsLayoutAndZaya18BShapesCountLikeZaya1Base) {
  const fs::path dir = scratch("inspect");
  json j = {{"hidden_size", 2048},
            {"vocab_size", 262272},
            {"num_hidden_layers", 40},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 2},
            {"head_dim", 128},
            {"moe_intermediate_size", 2048},
            {"num_experts", 16},
            {"router_hidden_size", 256},
            {"rms_norm_eps", 1e-5},
            {"eos_token_id", 106},
            {"model_type", "zaya"},
            {"rope_parameters",
             {{"hybrid",
               {{"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}}}}}};
  std::ofstream(dir / "native.json") << j.dump();
  const CliResult n = run("inspect --json " + (dir / "native.json").string());
  const CliResult o = run("inspect --json " +
                          (fs::path(ZAYA_TEST_FIXTURES) / "configs" / "zaya1-base.json").string());
  ASSERT_EQ(n.code, 0) << n.err;
  ASSERT_EQ(o.code, 0) << o.err;
  const json jn = json::parse(n.out), jo = json::parse(o.out);
  EXPECT_EQ(jn["layout"], "native");
  EXPECT_EQ(jo["layout"], "original");
  EXPECT_NE(jn["schema"].get<std::string>().find("native"), std::string::npos);
  for (const char* k :
       {"params_total", "params_without_embedding", "params_active_without_embedding",
        "buffer_values", "tensors", "kv_bytes_per_token_bf16"})
    EXPECT_EQ(jn[k], jo[k]) << k;
  EXPECT_EQ(jn["params_total"], 8840488784);
  const CliResult text = run("inspect " + (kModels / "tiny_a").string());
  EXPECT_NE(text.out.find("schema                 original (per-sub-layer lists"),
            std::string::npos)
      << text.out;
}

TEST(CliConvert, NativeCheckpointLayoutTrainsAndSavesNative) {
  const ScratchDir dir;
  const std::string shards = make_tiny_dataset(dir);
  std::ofstream(dir / "run.toml") << "[model]\nconfig = \"" << ZAYA_TEST_FIXTURES
                                  << "/configs/tiny.json\"\n[data]\ndataset = \"" << shards
                                  << "\"\nseq_len = 16\n[train]\nmicro_batch = 2\nsteps = 2\n"
                                  << "eval_every = 0\neval_batches = 1\nsample_tokens = 0\n"
                                  << "[checkpoint]\nkeep_last = 0\nasync = false\n";
  const std::string base =
      "train --config " + dir / "run.toml" + " --set checkpoint.dir=" + dir / "ckpt";
  const CliResult t = run(base + " --set checkpoint.layout=native");
  ASSERT_EQ(t.code, 0) << t.err << t.out;
  const fs::path model = fs::path(dir / "ckpt") / "step_00000002" / "model";
  const json cfg = json::parse(slurp((model / "config.json").string()));
  EXPECT_EQ(cfg["num_hidden_layers"], 2);
  EXPECT_TRUE(cfg.contains("layer_types"));
  const SafeTensors st = SafeTensors::open_dir(model.string());
  EXPECT_NE(st.find("model.layers.1.mlp.experts.gate_up_proj"), nullptr);
  // The trained model loads and evaluates as native; resuming with the other layout is refused.
  const CliResult inspect = run("inspect --json " + model.string());
  EXPECT_EQ(json::parse(inspect.out)["layout"], "native") << inspect.err;
  expect_user_error(run(base + " --set train.steps=3 --set checkpoint.layout=original"),
                    "checkpoint.layout");
  // Resuming with the same layout continues it.
  const CliResult r = run(base + " --set train.steps=3 --set checkpoint.layout=native");
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path model3 = fs::path(dir / "ckpt") / "step_00000003" / "model";
  EXPECT_TRUE(json::parse(slurp((model3 / "config.json").string())).contains("layer_types"));
}

TEST(CliConvert, BadInputIsOneClearError) {
  const fs::path dir = scratch("bad");
  expect_user_error(
      run("convert --to native " + (kModels / "odd_d").string() + " " + (dir / "x").string()),
      "field 'zaya_layers'");
  fs::create_directories(dir / "full");
  std::ofstream(dir / "full" / "f") << "x";
  expect_user_error(
      run("convert --to native " + (kModels / "tiny_a").string() + " " + (dir / "full").string()),
      "not an empty directory");
  // A native directory with a residual scale missing.
  ASSERT_EQ(
      run("convert --to native " + (kModels / "tiny_a").string() + " " + (dir / "n").string()).code,
      0);
  {
    const SafeTensors st = SafeTensors::open_dir((dir / "n").string());
    std::vector<std::pair<std::string, Tensor>> keep;
    std::vector<std::vector<char>> bytes;
    for (const std::string& n : st.names()) {
      if (n == "model.layers.0.post_mlp_residual_scale.residual_scale") continue;
      const SafeTensorInfo& info = st.at(n);
      const char* p = static_cast<const char*>(info.data);
      std::vector<char>& b = bytes.emplace_back(p, p + info.nbytes);
      Tensor t(b.data(), info.dtype, {});
      t.ndim = int(info.shape.size());
      for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = info.shape[size_t(k)];
      keep.emplace_back(n, t);
    }
    save_safetensors((dir / "m.safetensors").string(), keep);
  }
  fs::rename(dir / "m.safetensors", dir / "n" / "model.safetensors");
  expect_user_error(run("eval --model " + (dir / "n").string() + " --tokens " +
                        (kModels / "tiny_a" / "tokens.txt").string()),
                    "missing tensor 'model.layers.0.post_mlp_residual_scale.residual_scale'");
  // A config mixing the schemas.
  fs::create_directories(dir / "mixed");
  json cfg = json::parse(slurp((kModels / "tiny_a" / "config.json").string()));
  cfg["layer_types"] = json::array({"hybrid", "hybrid"});
  std::ofstream(dir / "mixed" / "config.json") << cfg.dump();
  expect_user_error(run("inspect " + (dir / "mixed").string()), "mixed schemas");
}

// IN may be a run or a checkpoint, as --model may (checkpoint/model_path.h): the model picked is
// named on stderr, and the model directory's other files (tokenizer, its config, the generation
// config) come along; a wrong IN is named as IN.
TEST(CliConvert, InMayBeARunOrACheckpoint) {
  const ScratchDir dir;
  const std::string run_dir = dir / "runs/tiny";
  save_whole_run(run_dir, {3}, 32);
  const CliResult r = run("convert --to native " + run_dir + " " + dir / "native");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string picked = run_dir + "/step_00000003/model";
  const std::string why = "(the newest valid checkpoint of " + run_dir + ": step 3)";
  EXPECT_NE(r.err.find("convert: model " + picked + " " + why), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find(run_dir + "/step_00000003/model (original "), 0u) << r.out;
  EXPECT_NE(r.out.find(" → " + dir / "native (native layout)"), std::string::npos) << r.out;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    EXPECT_EQ(slurp(dir / ("native/" + std::string(f))),
              slurp(run_dir + "/step_00000003/model/" + f))
        << f;
  EXPECT_TRUE(json::parse(slurp(dir / "native/config.json")).contains("layer_types"));
  expect_user_error(run("convert --to native " + run_dir + "/step_3 " + dir / "x"),
                    "IN " + run_dir + "/step_3: no such file or directory; did you mean " +
                        run_dir + "/step_00000003? (a checkpoint)");
}
