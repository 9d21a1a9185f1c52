// Both checkpoint layouts in io: the native ↔ original name map (every parameter of several
// configs maps to a distinct native name and back), the three config schemas (detected, parsed,
// converted both ways with the shared fields kept), model directories written in either layout
// and read back bit-exact (experts as views of the stacked tensors, sharding, BF16 kept), and the
// bad inputs each giving a message naming what is wrong.
#include "io/hf_native_layout.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "core/assert.h"
#include "io/model_dir.h"
#include "model/inspect.h"
#include "model/param_layout.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kModels = fs::path(ZAYA_TEST_FIXTURES) / "model";
const fs::path kConfigs = fs::path(ZAYA_TEST_FIXTURES) / "configs";

fs::path scratch(const std::string& name) {
  fs::path p =
      fs::path(::testing::TempDir()) / ("zaya_native_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

json read_json(const fs::path& path) {
  std::ifstream f(path);
  return json::parse(f);
}

// Every parameter of `c`, as stored in `st` (original names), in layout order.
std::vector<std::pair<std::string, Tensor>> tensors_of(const ZayaConfig& c, const SafeTensors& st) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const ParamSpec& s : make_param_layout(c).specs) {
    const SafeTensorInfo& info = st.at(s.name);
    EXPECT_EQ(info.shape, s.shape) << s.name;
    Tensor t(const_cast<void*>(info.data), info.dtype, {});
    t.ndim = int(info.shape.size());
    for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = info.shape[size_t(k)];
    out.emplace_back(s.name, t);
  }
  return out;
}

// Same names, dtypes, shapes and bytes.
void expect_same_tensors(const SafeTensors& a, const SafeTensors& b, const ZayaConfig& c) {
  for (const ParamSpec& s : make_param_layout(c).specs) {
    const SafeTensorInfo* x = a.find(s.name);
    const SafeTensorInfo* y = b.find(s.name);
    ASSERT_TRUE(x && y) << s.name;
    EXPECT_EQ(x->dtype, y->dtype) << s.name;
    EXPECT_EQ(x->shape, y->shape) << s.name;
    ASSERT_EQ(x->nbytes, y->nbytes) << s.name;
    EXPECT_EQ(std::memcmp(x->data, y->data, x->nbytes), 0) << s.name;
  }
}

// ZAYA1-8B's shapes in transformers' native schema (the hub config's fields).
json native_8b_config() {
  return json::parse(R"({
    "architectures": ["ZayaForCausalLM"], "model_type": "zaya", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 2, "cca_time0": 2, "cca_time1": 2, "dtype": "bfloat16",
    "eos_token_id": 106, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "layer_types": ["hybrid","hybrid","hybrid","hybrid","hybrid",
    "hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid",
    "hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid",
    "hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid","hybrid",
    "hybrid","hybrid","hybrid","hybrid","hybrid"], "lm_head_bias": false,
    "max_position_embeddings": 131072, "moe_intermediate_size": 2048, "num_attention_heads": 8,
    "num_experts": 16, "num_experts_per_tok": 1, "num_hidden_layers": 40, "num_key_value_heads": 2,
    "output_router_logits": false, "pad_token_id": 0, "rms_norm_eps": 1e-05,
    "rope_parameters": {"hybrid": {"partial_rotary_factor": 0.5, "rope_theta": 5000000.0,
    "rope_type": "default"}, "rope_type": "default"}, "router_hidden_size": 256,
    "sliding_window": null, "tie_word_embeddings": true, "transformers_version": "5.0.0",
    "use_cache": true, "vocab_size": 262272})");
}

const char* const kNativeCases[] = {"tiny_a", "gqa4_c", "skip_e", "t2_h"};

}  // namespace

TEST(NativeNames, EveryParameterMapsToADistinctNameAndBack) {
  for (const char* name : kNativeCases) {
    const ZayaConfig c = load_config((kModels / name / "config.json").string());
    std::set<std::pair<std::string, int64_t>> seen;
    for (const ParamSpec& s : make_param_layout(c).specs) {
      const NativeRef r = native_ref(s.name, c.num_layers());
      // Only the embedding and pair 0's o_proj keep their names.
      if (r.name == s.name) {
        EXPECT_TRUE(s.name == "model.embed_tokens.weight" ||
                    s.name == "model.layers.0.self_attn.o_proj.weight")
            << s.name;
      }
      EXPECT_TRUE(seen.insert({r.name, r.expert}).second) << "duplicate " << r.name;
      EXPECT_EQ(original_name(r.name, c.num_layers(), r.expert), s.name);
      EXPECT_EQ(is_stacked_expert(r.name), r.expert >= 0) << r.name;
    }
  }
}

TEST(NativeNames, ResidualScalesFollowTheOutputTheyMerge) {
  const int64_t L = 4;  // two pairs
  EXPECT_EQ(native_ref("model.layers.0.res_scale.hidden_states_scale", L).name,
            "model.input_hidden_states_scale");
  EXPECT_EQ(native_ref("model.layers.1.res_scale.residual_bias", L).name,
            "model.layers.0.post_attention_residual_scale.residual_bias");
  EXPECT_EQ(native_ref("model.layers.2.res_scale.residual_scale", L).name,
            "model.layers.0.post_mlp_residual_scale.residual_scale");
  EXPECT_EQ(native_ref("model.res_scale.hidden_states_bias", L).name,
            "model.layers.1.post_mlp_residual_scale.hidden_states_bias");
  EXPECT_EQ(native_ref("model.layers.3.input_norm.weight", L).name,
            "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(native_ref("model.layers.2.self_attn.qkv.val_proj2.weight", L).name,
            "model.layers.1.self_attn.qkv_proj.v_proj_delayed.weight");
  const NativeRef e =
      native_ref("model.layers.3.zaya_block.experts.local_experts.2.linear_fc2.weight", L);
  EXPECT_EQ(e.name, "model.layers.1.mlp.experts.down_proj");
  EXPECT_EQ(e.expert, 2);
  EXPECT_EQ(native_ref("model.final_norm.weight", L).name, "model.norm.weight");
  EXPECT_EQ(native_ref("lm_head.weight", L).name, "lm_head.weight");
}

TEST(NativeConfig, SchemasDetectedAndZaya1ShapesGiveTheSameCounts) {
  ConfigSchema s;
  const ZayaConfig base = load_config((kConfigs / "zaya1-base.json").string(), &s);
  EXPECT_EQ(s, ConfigSchema::OriginalLists);
  EXPECT_EQ(base.semantics, Semantics::Original);
  const ZayaConfig native = config_from_json(native_8b_config(), &s);
  EXPECT_EQ(s, ConfigSchema::Native);
  EXPECT_EQ(native.semantics, Semantics::Native);
  EXPECT_EQ(native.num_layers(), 80);
  EXPECT_EQ(native.head_dim(), 128);
  EXPECT_EQ(native.q_heads(), 8);
  EXPECT_EQ(native.ffn_hidden_size_list[1], 4096);
  EXPECT_EQ(native.rope_theta, 5e6);
  const ModelFacts a = model_facts(base, 4096), b = model_facts(native, 4096);
  EXPECT_EQ(a.params_total, 8'840'488'784);
  EXPECT_EQ(b.params_total, a.params_total);
  EXPECT_EQ(b.params_no_embedding, a.params_no_embedding);
  EXPECT_EQ(b.params_active_no_embedding, a.params_active_no_embedding);
  EXPECT_EQ(b.tensors, a.tensors);
  // The same model in both views: converting ZAYA1-base keeps every count.
  const ZayaConfig base_native =
      config_from_json(config_to_json(with_semantics(base, Semantics::Native)));
  EXPECT_EQ(model_facts(base_native, 4096).params_total, a.params_total);
  EXPECT_EQ(base_native.num_layers(), 80);  // not the stale num_hidden_layers: 120
}

TEST(NativeConfig, RoundTripsKeepTheSharedFields) {
  for (const char* name : kNativeCases) {
    const ZayaConfig orig = load_config((kModels / name / "config.json").string());
    // original → native → original: every struct field but the residual precision flag (native
    // keeps the residual in fp32 always) and the schema-specific leftovers.
    const json nj = config_to_json(with_semantics(orig, Semantics::Native));
    const ZayaConfig n = config_from_json(nj);
    ZayaConfig back = config_from_json(config_to_json(with_semantics(n, Semantics::Original)));
    EXPECT_EQ(back.semantics, Semantics::Original);
    back.residual_in_fp32 = orig.residual_in_fp32;
    back.extra = orig.extra;
    EXPECT_EQ(back, orig) << name;
    // native → original → native: the native file comes back field for field.
    const json nj2 = config_to_json(
        with_semantics(config_from_json(config_to_json(with_semantics(n, Semantics::Original))),
                       Semantics::Native));
    EXPECT_EQ(nj2, nj) << name << "\n" << nj2.dump() << "\n" << nj.dump();
  }
}

TEST(NativeConfig, IntermediateScalarSchemaReadsAsTheLists) {
  json j = read_json(kModels / "tiny_a" / "config.json");
  const ZayaConfig lists = config_from_json(j);
  j["ffn_hidden_size"] = lists.ffn_hidden_size_list[1] / 2;  // expert hidden width I
  j["zaya_mlp_expansion"] = lists.zaya_mlp_expansion[1];
  j["num_query_groups"] = lists.num_key_value_heads;
  for (const char* k : {"ffn_hidden_size_list", "num_query_groups_list"}) j.erase(k);
  j["cca_num_q_heads"] = lists.q_heads();
  ConfigSchema s;
  ZayaConfig scalar = config_from_json(j, &s);
  EXPECT_EQ(s, ConfigSchema::OriginalScalar);
  scalar.extra = lists.extra;
  EXPECT_EQ(scalar, lists);
}

TEST(NativeConfig, BadInputsNameTheField) {
  json mixed = read_json(kModels / "tiny_a" / "config.json");
  mixed["moe_intermediate_size"] = 8;
  const std::string m = error_of([&] { config_from_json(mixed); });
  expect_contains(m, "mixed schemas");
  expect_contains(m, "moe_intermediate_size");
  expect_contains(m, "zaya_layers");

  // A "hybrid_sliding" layer needs its window (ZAYA1-8B's file has sliding_window null).
  json sliding = native_8b_config();
  sliding["layer_types"][3] = "hybrid_sliding";
  const std::string sw = error_of([&] { config_from_json(sliding); });
  expect_contains(sw, "field 'sliding_window'");
  expect_contains(sw, "hybrid_sliding");
  sliding["sliding_window"] = 1024;
  EXPECT_EQ(config_from_json(sliding).window(6), 1024);

  json hd = native_8b_config();
  hd["head_dim"] = 64;
  expect_contains(error_of([&] { config_from_json(hd); }), "field 'head_dim'");
  json eos = native_8b_config();
  eos["eos_token_id"] = json::array({1, 106});
  expect_contains(error_of([&] { config_from_json(eos); }), "field 'eos_token_id'");
  json scalar_mixed = read_json(kModels / "tiny_a" / "config.json");
  scalar_mixed["ffn_hidden_size"] = 8;
  expect_contains(error_of([&] { config_from_json(scalar_mixed); }), "mixed schemas");

  // What only the original schema can express.
  const std::pair<const char*, const char*> original_only[] = {
      {"odd_d", "zaya_layers"},         // odd number of sub-layers
      {"hk3_b", "zaya_layers"},         // 3 and 2 experts
      {"nomod_eps_f", "zaya_use_mod"},  // no skip class
      {"noeda_g", "zaya_use_eda"}};     // no EDA
  for (const auto& [name, field] : original_only) {
    const ZayaConfig c = load_config((kModels / name / "config.json").string());
    const std::string e = error_of([&] { with_semantics(c, Semantics::Native); });
    expect_contains(e, std::string("field '") + field + "'");
  }
  json moe_first = read_json(kModels / "tiny_a" / "config.json");
  moe_first["zaya_use_eda"] = false;
  moe_first["zaya_layers"] = json::array({4, "a", 4, "a"});
  moe_first["cca_num_q_heads"] = json::array({0, 4, 0, 4});
  moe_first["num_query_groups_list"] = json::array({0, 2, 0, 2});
  moe_first["ffn_hidden_size_list"] = json::array({16, 0, 16, 0});
  moe_first["zaya_mlp_expansion"] = json::array({16, 0, 16, 0});
  const ZayaConfig mf = config_from_json(moe_first);
  EXPECT_EQ(mf.semantics, Semantics::Original);
  ZayaConfig mf_eda = mf;
  mf_eda.zaya_use_eda = true;  // only the layout check is left to fail
  expect_contains(error_of([&] { with_semantics(mf_eda, Semantics::Native); }),
                  "starting with attention");
}

TEST(NativeDir, RoundTripsAreBitExactWithExpertViews) {
  for (const char* name : kNativeCases) {
    const fs::path src = kModels / name;
    const ZayaConfig c = load_config((src / "config.json").string());
    const SafeTensors orig = open_model_tensors(src.string(), c);

    const fs::path nd = scratch(std::string(name) + "_native");
    const ZayaConfig nc = with_semantics(c, Semantics::Native);
    save_model_dir(nd.string(), nc, tensors_of(c, orig));
    const ZayaConfig nc_read = load_config((nd / "config.json").string());
    EXPECT_EQ(nc_read.semantics, Semantics::Native);
    const SafeTensors raw = SafeTensors::open_dir(nd.string());
    EXPECT_NE(raw.find("model.layers.0.mlp.experts.gate_up_proj"), nullptr);
    EXPECT_EQ(raw.find("model.layers.1.zaya_block.router.balancing_biases"), nullptr);
    const SafeTensors native = open_model_tensors(nd.string(), nc_read);
    expect_same_tensors(orig, native, c);
    // Per-expert tensors are slices of the mapped stacked tensor, not copies.
    const SafeTensorInfo& stacked = raw.at("model.layers.0.mlp.experts.down_proj");
    const SafeTensorInfo& e1 =
        native.at("model.layers.1.zaya_block.experts.local_experts.1.linear_fc2.weight");
    const SafeTensorInfo& e0 =
        native.at("model.layers.1.zaya_block.experts.local_experts.0.linear_fc2.weight");
    EXPECT_EQ(e1.file, stacked.file);
    EXPECT_EQ(static_cast<const char*>(e1.data) - static_cast<const char*>(e0.data),
              ptrdiff_t(stacked.nbytes / size_t(stacked.shape[0])));

    const fs::path od = scratch(std::string(name) + "_back");
    const ZayaConfig oc = with_semantics(nc_read, Semantics::Original);
    save_model_dir(od.string(), oc, tensors_of(oc, native));
    expect_same_tensors(
        orig, open_model_tensors(od.string(), load_config((od / "config.json").string())), c);

    // native → original → native: the native files' tensors come back byte for byte.
    const fs::path nd2 = scratch(std::string(name) + "_native2");
    const SafeTensors back = open_model_tensors(od.string(), oc);
    save_model_dir(nd2.string(), nc_read, tensors_of(oc, back));
    const SafeTensors raw2 = SafeTensors::open_dir(nd2.string());
    EXPECT_EQ(raw2.names(), raw.names());
    for (const std::string& n : raw.names()) {
      ASSERT_EQ(raw.at(n).nbytes, raw2.at(n).nbytes) << n;
      EXPECT_EQ(raw.at(n).shape, raw2.at(n).shape) << n;
      EXPECT_EQ(std::memcmp(raw.at(n).data, raw2.at(n).data, raw.at(n).nbytes), 0) << n;
    }
  }
}

TEST(NativeDir, ShardsWithAnIndexAndKeepsBf16) {
  const fs::path src = kModels / "tiny_a";
  const ZayaConfig c = load_config((src / "config.json").string());
  const SafeTensors orig = open_model_tensors(src.string(), c);
  // A BF16 copy of every parameter (the balancing biases stay F32, as in released checkpoints).
  std::vector<std::vector<uint16_t>> store;
  std::vector<std::pair<std::string, Tensor>> bf16;
  for (auto [name, t] : tensors_of(c, orig)) {
    if (name.ends_with("balancing_biases")) {
      bf16.emplace_back(name, t);
      continue;
    }
    std::vector<uint16_t>& v = store.emplace_back(size_t(t.numel()));
    for (int64_t k = 0; k < t.numel(); ++k)
      v[size_t(k)] = f32_to_bf16(static_cast<const float*>(t.data)[k]);
    t.data = v.data();
    t.dtype = DType::BF16;
    bf16.emplace_back(name, t);
  }
  const fs::path nd = scratch("sharded");
  save_model_dir(nd.string(), with_semantics(c, Semantics::Native), bf16,
                 /*max_shard_bytes=*/20000);
  EXPECT_FALSE(fs::exists(nd / "model.safetensors"));
  const json index = read_json(nd / "model.safetensors.index.json");
  std::set<std::string> shards;
  for (const auto& [k, v] : index["weight_map"].items()) shards.insert(v.get<std::string>());
  EXPECT_GE(shards.size(), 3u);
  EXPECT_TRUE(shards.count("model-00001-of-0000" + std::to_string(shards.size()) + ".safetensors"));
  const ZayaConfig nc = load_config((nd / "config.json").string());
  const SafeTensors back = open_model_tensors(nd.string(), nc);
  for (const auto& [name, t] : bf16) {
    const SafeTensorInfo& info = back.at(name);
    EXPECT_EQ(info.dtype, t.dtype) << name;
    ASSERT_EQ(info.nbytes, t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(info.data, t.data, t.nbytes()), 0) << name;
  }
}

TEST(NativeDir, WrongStackedShapeIsNamed) {
  const fs::path src = kModels / "tiny_a";
  const ZayaConfig c = load_config((src / "config.json").string());
  const SafeTensors orig = open_model_tensors(src.string(), c);
  const fs::path nd = scratch("bad_stack");
  save_model_dir(nd.string(), with_semantics(c, Semantics::Native), tensors_of(c, orig));
  // Rewrite the file with gate_up_proj of layer 1 cut to 3 experts.
  const SafeTensors raw = SafeTensors::open_dir(nd.string());
  std::vector<std::vector<char>> bytes;
  std::vector<std::pair<std::string, Tensor>> edited;
  for (const std::string& n : raw.names()) {
    const SafeTensorInfo& info = raw.at(n);
    std::vector<int64_t> shape = info.shape;
    size_t nb = info.nbytes;
    if (n == "model.layers.1.mlp.experts.gate_up_proj")
      nb = nb / size_t(shape[0]) * 3, shape[0] = 3;
    const char* p = static_cast<const char*>(info.data);
    std::vector<char>& b = bytes.emplace_back(p, p + nb);
    Tensor t(b.data(), info.dtype, {});
    t.ndim = int(shape.size());
    for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = shape[size_t(k)];
    edited.emplace_back(n, t);
  }
  save_safetensors((nd / "model.safetensors").string(), edited);
  const ZayaConfig nc = load_config((nd / "config.json").string());
  const std::string e = error_of([&] { open_model_tensors(nd.string(), nc); });
  expect_contains(e, "model.layers.1.mlp.experts.gate_up_proj");
  expect_contains(e, "[3,16,64]");
  expect_contains(e, "[4,16,64]");
}

TEST(NativeNames, DocumentedTableIsTheCodesTable) {
  const fs::path doc =
      fs::path(ZAYA_TEST_FIXTURES) / ".." / ".." / "docs" / "checkpoint-layouts.md";
  std::ifstream f(doc);
  ASSERT_TRUE(f.good()) << doc;
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  for (const auto& [orig, native] : native_name_table())
    EXPECT_NE(text.find("| `" + orig + "` | `" + native + "` |"), std::string::npos)
        << orig << " ↔ " << native << " is not in " << doc;
}
