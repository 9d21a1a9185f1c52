// Test-only writers of ZAYA1 GGUF files as the llama.cpp forks' converters write them
// (docs/gguf.md): scheme A (the early naming: "_b.bias" biases, cca_conv_dw, zaya_router_*, no
// zaya.expert_feed_forward_length), scheme B (the later naming: ssm_conv1d, ffn_gate_inp,
// ffn_norm, ffn_gate; router down projection and depthwise kernel forced to F32), and the
// incompatible 40-block layout ("scheme C": one block per attention + MoE pair, tap-major grouped
// convolution) that zaya must refuse. No community file could be downloaded here, so these
// writers are the stand-in: they spell out the published names, GGML shapes, metadata keys and
// dtype rules on their own — from a zaya model's tensors under their original (legacy Hugging Face)
// names, as the converters read them — and share nothing with the reader's name map, so a mistake
// in either shows up as a mismatch.
#pragma once
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/gguf.h"
#include "model/model.h"

namespace zaya::test {

enum class CommunityScheme { A, B, C };

struct CommunityOptions {
  // The converter's --outtype for the tensors the dtype rule does not force to F32: F32, F16 or
  // BF16.
  DType outtype = DType::F32;
  // Tensors left out (a truncated or partial conversion).
  std::set<std::string> drop = {};
  // general.architecture (another one for the refusal tests).
  std::string architecture = "zaya";
  // When not empty: tokenizer.ggml.tokens, with scores 0 and token type 1 (normal) each.
  std::vector<std::string> tokens = {};
};

// One tensor of a community file: its name, GGML shape and stored bytes.
struct CommunityTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> ne;
  std::string bytes;
};

namespace community_detail {

// The legacy Hugging Face name's suffix after "model.layers.{i}." → the scheme A and B names.
struct Role {
  const char* legacy;
  const char* a;
  const char* b;
};
inline const Role kLayerRoles[] = {
    {"input_norm.weight", "attn_norm.weight", "attn_norm.weight"},
    {"res_scale.hidden_states_scale", "res_scale_hs.weight", "res_scale_hs.weight"},
    {"res_scale.hidden_states_bias", "res_scale_hs_b.bias", "res_scale_hs.bias"},
    {"res_scale.residual_scale", "res_scale_res.weight", "res_scale_res.weight"},
    {"res_scale.residual_bias", "res_scale_res_b.bias", "res_scale_res.bias"},
    {"self_attn.qkv.linear_q.weight", "attn_q.weight", "attn_q.weight"},
    {"self_attn.qkv.linear_k.weight", "attn_k.weight", "attn_k.weight"},
    {"self_attn.qkv.val_proj1.weight", "cca_val_proj1.weight", "cca_val_proj1.weight"},
    {"self_attn.qkv.val_proj2.weight", "cca_val_proj2.weight", "cca_val_proj2.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight", "attn_output.weight"},
    {"self_attn.qkv.conv_qk.0.weight", "cca_conv_dw.weight", "ssm_conv1d.weight"},
    {"self_attn.qkv.conv_qk.0.bias", "cca_conv_dw_b.bias", "ssm_conv1d.bias"},
    {"self_attn.qkv.conv_qk.1.weight", "cca_conv_grp.weight", "cca_conv_grp.weight"},
    {"self_attn.qkv.conv_qk.1.bias", "cca_conv_grp.bias", "cca_conv_grp.bias"},
    {"self_attn.qkv.temp", "cca_k_scale.weight", "cca_k_scale.weight"},
    {"zaya_block.router.down_proj.weight", "zaya_router_down.weight", "ffn_gate_inp.weight"},
    {"zaya_block.router.down_proj.bias", "zaya_router_down_b.bias", "ffn_gate_inp.bias"},
    {"zaya_block.router.rmsnorm_eda.weight", "zaya_router_norm.weight", "ffn_norm.weight"},
    {"zaya_block.router.router_mlp.0.weight", "zaya_router_mlp0.weight", "ffn_gate.weight"},
    {"zaya_block.router.router_mlp.0.bias", "zaya_router_mlp0_b.bias", "ffn_gate.bias"},
    {"zaya_block.router.router_mlp.2.weight", "zaya_router_mlp2.weight", "zaya_router_mlp2.weight"},
    {"zaya_block.router.router_mlp.2.bias", "zaya_router_mlp2_b.bias", "zaya_router_mlp2.bias"},
    {"zaya_block.router.router_mlp.4.weight", "zaya_router_mlp4.weight", "zaya_router_mlp4.weight"},
    {"zaya_block.router.balancing_biases", "zaya_router_biases.weight",
     "zaya_router_biases.weight"},
    {"zaya_block.router.router_states_scale", "zaya_router_eda.weight", "zaya_router_eda.weight"},
};
inline const Role kGlobalRoles[] = {
    {"model.embed_tokens.weight", "token_embd.weight", "token_embd.weight"},
    {"model.final_norm.weight", "output_norm.weight", "output_norm.weight"},
    {"model.res_scale.hidden_states_scale", "res_scale_hs.weight", "res_scale_hs.weight"},
    {"model.res_scale.hidden_states_bias", "res_scale_hs_b.bias", "res_scale_hs.bias"},
    {"model.res_scale.residual_scale", "res_scale_res.weight", "res_scale_res.weight"},
    {"model.res_scale.residual_bias", "res_scale_res_b.bias", "res_scale_res.bias"},
};

inline bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// The converters' dtype rule: F32 for 1-D tensors, *_norm.weight, everything not ending in
// ".weight" (the biases), and — scheme B only — the router's down projection (ffn_gate_inp) and
// the depthwise kernel (ssm_conv1d); the rest gets --outtype.
inline DType stored_dtype(const std::string& name, size_t n_dims, bool scheme_b, DType outtype) {
  if (n_dims <= 1 || ends_with(name, "_norm.weight") || !ends_with(name, ".weight"))
    return DType::F32;
  if (scheme_b &&
      (ends_with(name, ".ffn_gate_inp.weight") || ends_with(name, ".ssm_conv1d.weight")))
    return DType::F32;
  return outtype;
}

// n F32 values as dtype t's bytes (F32, F16 or BF16).
inline std::string encode(const float* x, size_t n, DType t) {
  std::string out;
  if (t == DType::F32) {
    out.assign(reinterpret_cast<const char*>(x), n * 4);
    return out;
  }
  out.resize(n * 2);
  for (size_t k = 0; k < n; ++k) {
    const uint16_t h = t == DType::F16 ? f32_to_f16(x[k]) : f32_to_bf16(x[k]);
    std::memcpy(&out[2 * k], &h, 2);
  }
  return out;
}

inline uint32_t file_type(DType outtype) {  // llama.cpp's LLAMA_FTYPE_ALL_F32 / MOSTLY_F16 / BF16
  return outtype == DType::F32 ? 0 : outtype == DType::F16 ? 1 : 32;
}

}  // namespace community_detail

// The tensors of `m` as a scheme-s converter writes them, in the model's order (experts stacked
// where their first tensor is).
inline std::vector<CommunityTensor> community_tensors(const Model& m, CommunityScheme s,
                                                      DType outtype) {
  using namespace community_detail;
  const ZayaConfig& c = m.config();
  const bool B = s != CommunityScheme::A;
  const int64_t C = c.conv_channels(), d = c.head_dim();
  std::vector<CommunityTensor> out;
  std::set<std::string> stacked;
  for (const ParamSpec& spec : m.layout().specs) {
    const Tensor v = spec.view(m.params());
    const float* x = static_cast<const float*>(v.data);
    std::vector<int64_t> ne(spec.shape.rbegin(), spec.shape.rend());
    std::string name;
    int64_t block = spec.layer;
    if (spec.layer < 0) {
      for (const Role& r : kGlobalRoles)
        if (spec.name == r.legacy) name = B ? r.b : r.a;
    } else {
      const std::string prefix = "model.layers." + std::to_string(spec.layer) + ".";
      const std::string suffix = spec.name.substr(prefix.size());
      for (const Role& r : kLayerRoles)
        if (suffix == r.legacy) name = B ? r.b : r.a;
      if (suffix.rfind("zaya_block.experts.local_experts.", 0) == 0) {
        // torch.stack(dim=0) of every expert's fc1 [2I, D] (fc2 [D, I]): ne {D, 2I, E}.
        const bool fc1 = ends_with(suffix, "linear_fc1.weight");
        name = fc1 ? "ffn_gate_up_exps.weight" : "ffn_down_exps.weight";
        if (!stacked.insert(std::to_string(spec.layer) + name).second) continue;
        ne.push_back(c.num_experts(spec.layer));
        const size_t n = size_t(spec.numel() * c.num_experts(spec.layer));
        // The experts of one kind lie back to back in the parameter arena.
        CommunityTensor t{"", DType::F32, ne, ""};
        if (s == CommunityScheme::C) block = spec.layer / 2;
        t.name = "blk." + std::to_string(block) + "." + name;
        t.dtype = stored_dtype(t.name, 3, B, outtype);
        t.bytes = encode(x, n, t.dtype);
        out.push_back(std::move(t));
        continue;
      }
    }
    ZAYA_ASSERT(!name.empty(), "no community name for {}", spec.name);
    std::vector<float> tmp;
    if (spec.name.find("conv_qk.0.weight") != std::string::npos) {
      ne = {2, C};  // squeeze(1) of [C, 1, 2]: the same bytes
    } else if (s == CommunityScheme::C && spec.name.find("conv_qk.1.weight") != std::string::npos) {
      // The 40-block converter permutes [C, d, 2] with (2, 0, 1): [2, C, d], ne {d, C, 2}.
      tmp.resize(size_t(spec.numel()));
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t j = 0; j < d; ++j)
          for (int64_t t = 0; t < 2; ++t)
            tmp[size_t((t * C + ch) * d + j)] = x[(ch * d + j) * 2 + t];
      x = tmp.data();
      ne = {d, C, 2};
    }
    if (spec.layer >= 0) {
      if (s == CommunityScheme::C) {
        // One block per pair: the MoE sub-layer's own norm and merge get their own names.
        block = spec.layer / 2;
        if (spec.layer % 2 == 1) {
          if (name == "attn_norm.weight") name = "post_attention_norm.weight";
          if (name == "res_scale_hs.weight") name = "res_scale_hs_mlp.weight";
          if (name == "res_scale_hs.bias") name = "res_scale_hs_mlp.bias";
          if (name == "res_scale_res.weight") name = "res_scale_res_mlp.weight";
          if (name == "res_scale_res.bias") name = "res_scale_res_mlp.bias";
        }
      }
      name = "blk." + std::to_string(block) + "." + name;
      // The first merge's scale and bias are global there.
      if (s == CommunityScheme::C && name == "blk.0.res_scale_hs.weight")
        name = "input_hidden_states_scale.weight";
      if (s == CommunityScheme::C && name == "blk.0.res_scale_hs.bias")
        name = "input_hidden_states_scale.bias";
    }
    CommunityTensor t;
    t.name = name;
    t.ne = ne;
    t.dtype = stored_dtype(name, ne.size(), B, outtype);
    t.bytes = encode(x, size_t(spec.numel()), t.dtype);
    out.push_back(std::move(t));
  }
  return out;
}

// Writes `m` to `path` as a scheme-s community converter would (metadata keys of docs/gguf.md).
inline void write_community_gguf(const std::string& path, const Model& m, CommunityScheme s,
                                 const CommunityOptions& o = {}) {
  using namespace community_detail;
  const ZayaConfig& c = m.config();
  const bool A = s == CommunityScheme::A;
  GgufWriter w(path);
  auto u32 = [](int64_t v) { return GgufValue::u32(uint32_t(v)); };
  int64_t moe = 1;
  w.set("general.architecture", GgufValue::str(o.architecture));
  w.set("general.name", GgufValue::str("ZAYA1-8B"));
  w.set("general.file_type", u32(file_type(o.outtype)));
  w.set("zaya.block_count", u32(s == CommunityScheme::C ? c.num_layers() / 2 : c.num_layers()));
  w.set("zaya.context_length", u32(c.max_position_embeddings));
  w.set("zaya.embedding_length", u32(c.hidden_size));
  w.set("zaya.feed_forward_length", u32(c.ffn_hidden_size_list[moe] / 2));
  w.set("zaya.attention.head_count", u32(c.q_heads()));
  w.set("zaya.attention.head_count_kv", u32(c.kv_heads()));
  w.set("zaya.attention.key_length", u32(c.head_dim()));
  w.set("zaya.attention.value_length", u32(c.head_dim()));
  w.set("zaya.rope.dimension_count", u32(c.rotary_dim()));
  w.set("zaya.rope.freq_base", GgufValue::f32(float(c.rope_theta)));
  w.set("zaya.attention.layer_norm_rms_epsilon", GgufValue::f32(float(c.norm_epsilon)));
  if (!A) w.set("zaya.attention.layer_norm_epsilon", GgufValue::f32(float(c.norm_epsilon)));
  w.set("zaya.expert_count", u32(c.num_experts(moe)));
  w.set("zaya.expert_used_count", u32(c.moe_router_topk));
  if (!A) w.set("zaya.expert_feed_forward_length", u32(c.zaya_mlp_expansion[moe]));
  w.set("zaya.ssm.conv_kernel", u32(2));
  // Unreliable in the real files (the embedding is trimmed to the tokenizer): A writes the
  // untrimmed size.
  w.set("zaya.vocab_size", u32(A ? c.vocab_size + 128 : c.vocab_size));
  w.set("tokenizer.ggml.model", GgufValue::str("gemma4"));
  w.set("tokenizer.ggml.bos_token_id", u32(c.bos_token_id));
  w.set("tokenizer.ggml.eos_token_id", u32(c.eos_token_id));
  w.set("tokenizer.ggml.padding_token_id", u32(c.pad_token_id));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  w.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(false));
  if (!o.tokens.empty()) {
    std::vector<GgufValue> toks, scores, types;
    for (const std::string& t : o.tokens) {
      toks.push_back(GgufValue::str(t));
      scores.push_back(GgufValue::f32(0));
      types.push_back(GgufValue::i32(1));
    }
    w.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::String, std::move(toks)));
    w.set("tokenizer.ggml.scores", GgufValue::array(GgufType::F32, std::move(scores)));
    w.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
  }
  std::vector<CommunityTensor> ts = community_tensors(m, s, o.outtype);
  std::erase_if(ts, [&](const CommunityTensor& t) { return o.drop.count(t.name) > 0; });
  for (const CommunityTensor& t : ts) w.add_tensor(t.name, t.dtype, t.ne);
  for (const CommunityTensor& t : ts) w.write_tensor(t.name, t.bytes.data(), t.bytes.size());
  w.finish();
}

}  // namespace zaya::test
