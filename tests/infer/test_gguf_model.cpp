// ZAYA1 GGUF files as zaya's model (infer/gguf_model.h): files in both community namings
// (written by tests/gguf_community.h from the published names, not from the reader's map) open
// with the right scheme and config, and every zaya parameter maps to bytes equal to the model's
// (F32 files) or to the model's rounded to the stored dtype (BF16/F16 files, with the converters'
// F32 exceptions); zaya's own files (gguf_name + set_model_keys) round-trip the config exactly;
// the 40-block layout, other architectures, incomplete files and wrong shapes are refused with
// messages naming what was found.
#include "infer/gguf_model.h"

#include <cstring>
#include <filesystem>

#include "gguf_community.h"
#include "model/model.h"
#include "model/param_names.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// The tiny test model in the native layout (ZAYA1-8B's family; what a community file holds).
Model tiny_native_model(uint64_t seed = 3) {
  ZayaConfig c = with_semantics(load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json"),
                                Semantics::Native);
  c.bos_token_id = 2;
  c.eos_token_id = 106;
  c.pad_token_id = 0;
  Model m(c);
  m.init_random(seed, 0.2);
  return m;
}

// The fields that define the model (a config derived from GGUF keys has none of the extras).
void expect_same_model(const ZayaConfig& a, const ZayaConfig& b) {
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.zaya_layers, b.zaya_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.cca_num_q_heads, b.cca_num_q_heads);
  EXPECT_EQ(a.num_query_groups_list, b.num_query_groups_list);
  EXPECT_EQ(a.ffn_hidden_size_list, b.ffn_hidden_size_list);
  EXPECT_EQ(a.zaya_mlp_expansion, b.zaya_mlp_expansion);
  EXPECT_EQ(a.moe_router_topk, b.moe_router_topk);
  EXPECT_EQ(a.zaya_use_mod, b.zaya_use_mod);
  EXPECT_EQ(a.zaya_use_eda, b.zaya_use_eda);
  EXPECT_EQ(a.norm_epsilon, b.norm_epsilon);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.partial_rotary_factor, b.partial_rotary_factor);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.semantics, b.semantics);
}

// The model's parameter `spec` as the dtype t stores it.
std::string expected_bytes(const Model& m, const ParamSpec& spec, DType t) {
  const Tensor v = spec.view(m.params());
  return community_detail::encode(static_cast<const float*>(v.data), size_t(spec.numel()), t);
}

bool is_matrix(const ParamSpec& s) {
  return s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert ||
         s.kind == ParamKind::Embedding || s.kind == ParamKind::Conv;
}

}  // namespace

TEST(GgufModel, CommunitySchemesMapEveryParameterToTheModelsBytes) {
  const Model m = tiny_native_model();
  for (CommunityScheme s : {CommunityScheme::A, CommunityScheme::B}) {
    for (DType outtype : {DType::F32, DType::BF16, DType::F16}) {
      const bool A = s == CommunityScheme::A;
      SCOPED_TRACE(std::string(A ? "scheme A " : "scheme B ") + std::string(dtype_name(outtype)));
      ScratchDir dir;
      const std::string path = dir / "zaya.gguf";
      write_community_gguf(path, m, s, {.outtype = outtype});
      const GgufModel g = open_gguf_model(path);
      EXPECT_EQ(g.scheme, A ? GgufScheme::A : GgufScheme::B);
      expect_same_model(g.config, m.config());
      ASSERT_EQ(make_param_layout(g.config).specs.size(), m.layout().specs.size());
      for (const ParamSpec& spec : m.layout().specs) {
        const Tensor t = g.tensor(spec);
        const std::string name = g.tensor_name(spec);
        // The converters' dtype rule: vectors F32; scheme B also keeps the depthwise kernel and
        // the router's down projection F32; every other matrix and conv kernel is --outtype.
        const bool forced = !A && (spec.name.find("conv_qk.0.weight") != std::string::npos ||
                                   spec.name.find("router.down_proj.weight") != std::string::npos);
        const DType want = is_matrix(spec) && !forced ? outtype : DType::F32;
        EXPECT_EQ(t.dtype, want) << spec.name << " as " << name;
        ASSERT_EQ(t.ndim, int(spec.shape.size())) << spec.name;
        for (int k = 0; k < t.ndim; ++k) EXPECT_EQ(t.shape[size_t(k)], spec.shape[size_t(k)]);
        const std::string bytes = expected_bytes(m, spec, t.dtype);
        ASSERT_EQ(t.nbytes(), bytes.size()) << spec.name;
        EXPECT_EQ(std::memcmp(t.data, bytes.data(), bytes.size()), 0)
            << spec.name << " as " << name;
      }
    }
  }
}

TEST(GgufModel, ConvKernelsAndStackedExpertsKeepZayasMemoryOrder) {
  const Model m = tiny_native_model();
  const ZayaConfig& c = m.config();
  ScratchDir dir;
  write_community_gguf(dir / "b.gguf", m, CommunityScheme::B);
  const GgufModel g = open_gguf_model(dir / "b.gguf");
  const GgufFile& f = *g.file;
  const int64_t C = c.conv_channels(), d = c.head_dim(), D = c.hidden_size;
  // Depthwise [C, 1, 2] ↔ ne {2, C}: element (tap t, channel ch) is at t + 2·ch.
  const GgufTensor* dw = f.tensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(dw, nullptr);
  EXPECT_EQ(dw->ne, (std::vector<int64_t>{2, C}));
  const float* w0 = m.param(names::layer(0).conv0_w).ptr<float>();
  const float* g0 = static_cast<const float*>(dw->data);
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t t = 0; t < 2; ++t) EXPECT_EQ(g0[t + 2 * ch], w0[ch * 2 + t]);
  // Grouped [C, d, 2] ↔ ne {2, d, C}: (t, j, ch) at t + 2·(j + d·ch).
  const GgufTensor* grp = f.tensor("blk.0.cca_conv_grp.weight");
  EXPECT_EQ(grp->ne, (std::vector<int64_t>{2, d, C}));
  const float* w1 = m.param(names::layer(0).conv1_w).ptr<float>();
  const float* g1 = static_cast<const float*>(grp->data);
  for (int64_t ch = 0; ch < C; ch += 7)
    for (int64_t j = 0; j < d; ++j)
      for (int64_t t = 0; t < 2; ++t) EXPECT_EQ(g1[t + 2 * (j + d * ch)], w1[(ch * d + j) * 2 + t]);
  // Experts: ffn_gate_up_exps ne {D, 2I, E}; expert e's fc1 [2I, D] (gate rows first) is rows
  // [e·2I, (e+1)·2I) of the [E·2I, D] matrix.
  const GgufTensor* gu = f.tensor("blk.1.ffn_gate_up_exps.weight");
  const int64_t F = c.ffn_hidden_size_list[1], E = c.num_experts(1);
  EXPECT_EQ(gu->ne, (std::vector<int64_t>{D, F, E}));
  const float* gs = static_cast<const float*>(gu->data);
  for (int64_t e = 0; e < E; ++e) {
    const float* fc1 = m.param(names::layer(1).fc1(e)).ptr<float>();
    for (int64_t row : {int64_t(0), F / 2 - 1, F / 2, F - 1})  // last gate row, first up row
      for (int64_t col : {int64_t(0), D - 1})
        EXPECT_EQ(gs[(e * F + row) * D + col], fc1[row * D + col]);
    const Tensor view = g.tensor(m.layout().at(names::layer(1).fc1(e)));
    EXPECT_EQ(view.data, gs + e * F * D);
  }
  const GgufTensor* dn = f.tensor("blk.1.ffn_down_exps.weight");
  EXPECT_EQ(dn->ne, (std::vector<int64_t>{F / 2, D, E}));
}

TEST(GgufModel, ConfigComesFromTheKeysAndShapes) {
  const Model m = tiny_native_model();
  ScratchDir dir;
  write_community_gguf(dir / "a.gguf", m, CommunityScheme::A);
  const GgufModel g = open_gguf_model(dir / "a.gguf");
  // Scheme A has no zaya.expert_feed_forward_length and a zaya.vocab_size that is not the
  // embedding's: the router width comes from the down projection, the vocabulary from token_embd.
  EXPECT_EQ(g.file->find("zaya.expert_feed_forward_length"), nullptr);
  EXPECT_NE(g.file->get_int("zaya.vocab_size"), m.config().vocab_size);
  EXPECT_EQ(g.config.vocab_size, m.config().vocab_size);
  EXPECT_EQ(g.config.zaya_mlp_expansion, m.config().zaya_mlp_expansion);
  EXPECT_EQ(g.config.semantics, Semantics::Native);
  EXPECT_EQ(g.config.norm_epsilon, 1e-5);  // the f32 key as its decimal
  // The derived config is a whole one: it writes back as a native config.json.
  expect_same_model(config_from_json(config_to_json(g.config)), g.config);
}

TEST(GgufModel, ZayasOwnFilesRoundTripTheConfigExactly) {
  for (Semantics sem : {Semantics::Original, Semantics::Native}) {
    SCOPED_TRACE(semantics_name(sem));
    ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
    c = with_semantics(c, sem);
    Model m(c);
    m.init_random(5, 0.2);
    ScratchDir dir;
    const std::string path = dir / "own.gguf";
    {
      // What zaya quantize does (here without quantizing): scheme B names, experts in order.
      GgufWriter w(path);
      set_model_keys(w, c);
      std::vector<std::pair<std::string, std::vector<const ParamSpec*>>> order;
      for (const ParamSpec& spec : m.layout().specs) {
        const GgufName n = gguf_name(c, spec);
        if (order.empty() || order.back().first != n.name) {
          w.add_tensor(n.name, DType::F32, n.ne);
          order.push_back({n.name, {}});
        }
        EXPECT_EQ(n.expert, spec.kind == ParamKind::Expert ? int64_t(order.back().second.size())
                                                           : int64_t(-1));
        order.back().second.push_back(&spec);
      }
      for (const auto& [name, specs] : order)
        for (const ParamSpec* spec : specs)
          w.write_tensor(name, spec->view(m.params()).data, size_t(spec->numel()) * 4);
      w.finish();
    }
    const GgufModel g = open_gguf_model(path);
    EXPECT_EQ(g.scheme, GgufScheme::B);
    // zaya.config_json is config.json's text: the config reads back as from a model directory.
    EXPECT_EQ(g.config, config_from_json(config_to_json(c)));
    EXPECT_EQ(g.config.semantics, sem);
    for (const ParamSpec& spec : m.layout().specs) {
      const Tensor t = g.tensor(spec);
      EXPECT_EQ(std::memcmp(t.data, spec.view(m.params()).data, size_t(spec.numel()) * 4), 0)
          << spec.name;
    }
    // The community keys are there too.
    EXPECT_EQ(g.file->get_int("zaya.block_count"), c.num_layers());
    EXPECT_EQ(g.file->get_int("zaya.expert_feed_forward_length"), c.zaya_mlp_expansion[1]);
    EXPECT_EQ(g.file->get_str("general.architecture"), "zaya");
  }
}

TEST(GgufModel, RefusesTheFortyBlockLayout) {
  const Model m = tiny_native_model();
  ScratchDir dir;
  write_community_gguf(dir / "c.gguf", m, CommunityScheme::C);
  const std::string msg = error_of([&] { open_gguf_model(dir / "c.gguf"); });
  expect_contains(msg, dir / "c.gguf");
  expect_contains(msg, "40-block ZAYA1 GGUF (zaya.block_count 2)");
  expect_contains(msg, "input_hidden_states_scale.weight");
  // Without its telltale names, the tap-major grouped kernel alone gives it away.
  write_community_gguf(
      dir / "c2.gguf", m, CommunityScheme::C,
      {.drop = {"input_hidden_states_scale.weight", "input_hidden_states_scale.bias"}});
  expect_error([&] { open_gguf_model(dir / "c2.gguf"); },
               {"40-block", "'blk.0.cca_conv_grp.weight' is tap-major ({8, 48, 2}"});
}

TEST(GgufModel, RefusesOtherArchitecturesAndIncompleteFiles) {
  const Model m = tiny_native_model();
  ScratchDir dir;
  write_community_gguf(dir / "llama.gguf", m, CommunityScheme::B, {.architecture = "llama"});
  expect_error([&] { open_gguf_model(dir / "llama.gguf"); },
               {dir / "llama.gguf", "general.architecture is 'llama', not 'zaya'"});

  write_community_gguf(dir / "one.gguf", m, CommunityScheme::B, {.drop = {"blk.2.attn_q.weight"}});
  expect_error([&] { open_gguf_model(dir / "one.gguf"); },
               {dir / "one.gguf", "incomplete ZAYA1 GGUF (scheme B)",
                "tensor 'blk.2.attn_q.weight' is missing ("});
  write_community_gguf(dir / "three.gguf", m, CommunityScheme::A,
                       {.drop = {"blk.3.ffn_down_exps.weight", "output_norm.weight",
                                 "blk.1.zaya_router_mlp2_b.bias"}});
  expect_error([&] { open_gguf_model(dir / "three.gguf"); },
               {"scheme A", "'blk.1.zaya_router_mlp2_b.bias' is missing, and 2 more"});
  // A conversion that kept only the global tensors (what a converter that skips every unknown
  // name leaves of a checkpoint it cannot read).
  std::set<std::string> blocks;
  for (const CommunityTensor& t : community_tensors(m, CommunityScheme::B, DType::F32))
    if (t.name.rfind("blk.", 0) == 0) blocks.insert(t.name);
  write_community_gguf(dir / "globals.gguf", m, CommunityScheme::B, {.drop = blocks});
  expect_error([&] { open_gguf_model(dir / "globals.gguf"); },
               {"no ZAYA1 CCA or router tensors of either naming"});
  // A file cut short is the container's error.
  write_community_gguf(dir / "cut.gguf", m, CommunityScheme::B);
  std::filesystem::resize_file(dir / "cut.gguf", std::filesystem::file_size(dir / "cut.gguf") / 2);
  expect_error([&] { open_gguf_model(dir / "cut.gguf"); }, {dir / "cut.gguf", "runs past the end"});
}

TEST(GgufModel, RefusesWrongShapes) {
  const Model m = tiny_native_model();
  ZayaConfig other = m.config();
  other.vocab_size = 500;
  ScratchDir dir;
  const std::string path = dir / "shape.gguf";
  {
    // A zaya file whose config_json disagrees with its embedding.
    GgufWriter w(path);
    set_model_keys(w, other);
    std::vector<CommunityTensor> ts = community_tensors(m, CommunityScheme::B, DType::F32);
    for (const CommunityTensor& t : ts) w.add_tensor(t.name, t.dtype, t.ne);
    for (const CommunityTensor& t : ts) w.write_tensor(t.name, t.bytes.data(), t.bytes.size());
    w.finish();
  }
  expect_error(
      [&] { open_gguf_model(path); },
      {path, "tensor 'token_embd.weight' has shape {64, 512} but the model needs {64, 500}"});
}

TEST(GgufModel, ZayaOneShapesNeedTheConvertersTensorCount) {
  // The 80-sub-layer ZAYA1 stack: 6 global tensors, 15 per CCA block (blk.0 has no residual
  // pair), 17 per MoE block (blk.1 has no EDA scale) = 1283 tensors, as a whole conversion holds.
  const ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/zaya1-base.json");
  ASSERT_EQ(c.num_layers(), 80);
  const ParamLayout layout = make_param_layout(c);
  std::set<std::string> tensors;
  for (const ParamSpec& spec : layout.specs) tensors.insert(gguf_name(c, spec).name);
  EXPECT_EQ(tensors.size(), 1283u);
  const ParamSpec& fc1 = layout.at(names::layer(79).fc1(15));
  const GgufName n = gguf_name(c, fc1);
  EXPECT_EQ(n.name, "blk.79.ffn_gate_up_exps.weight");
  EXPECT_EQ(n.ne, (std::vector<int64_t>{2048, 4096, 16}));
  EXPECT_EQ(n.expert, 15);
}
