// A ZAYA1 GGUF file as zaya's model (docs/gguf.md): which tensor naming it uses, its config, and
// the view of every zaya parameter (model/param_layout.h) over the file's bytes.
//
// Two namings of the 80-sub-layer layout exist (docs/gguf.md, "The ZAYA1 schemes"): scheme A (the
// early converters: `*_b.bias` bias names, cca_conv_dw, zaya_router_down/norm/mlp0) and scheme B
// (the later ones: plain `.bias`, ssm_conv1d, ffn_gate_inp/ffn_norm/ffn_gate). zaya writes scheme
// B. A 40-block file (one block per attention + MoE pair, tap-major grouped convolution) is a
// different, incompatible layout and is refused, as is a file of another architecture and one
// missing tensors.
//
// Shapes: ggml's ne is the torch shape reversed; the depthwise conv kernel [C,1,2] is stored
// squeezed as ne {2, C}, the grouped one [C,d,2] as ne {2, d, C} (the same bytes); the experts of
// one sub-layer are stacked: ffn_gate_up_exps ne {D, 2I, E} (expert e's fc1 [2I, D], gate rows
// first, is bytes [e·2I·D, (e+1)·2I·D) in its dtype) and ffn_down_exps ne {I, D, E}.
// This lives in infer/ (not io/) because it maps onto model/param_layout.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_words.h"
#include "core/tensor.h"
#include "io/gguf.h"
#include "io/zaya_config.h"
#include "model/param_layout.h"

namespace zaya {

namespace quant {  // quant/policy.h: the caller includes it (it pulls in <regex>)
struct TensorDesc;
struct PolicyOptions;
}  // namespace quant

// The two 80-sub-layer namings (docs/gguf.md).
enum class GgufScheme { A, B };
template <>
struct EnumWords<GgufScheme> {
  static constexpr std::pair<GgufScheme, std::string_view> words[] = {{GgufScheme::A, "A"},
                                                                      {GgufScheme::B, "B"}};
};

struct GgufModel {
  std::shared_ptr<const GgufFile> file;
  GgufScheme scheme = GgufScheme::B;
  // zaya.config_json when present (zaya's own files: exact), else built from the zaya.* keys and
  // the tensors' shapes (vocabulary from token_embd, router width from the router's down
  // projection, experts from the stacked tensors, 80 sub-layers alternating CCA and MoE), with
  // Semantics::Native (docs/gguf.md, "Semantics").
  ZayaConfig config;
  // The view of zaya parameter `spec` (model/param_layout.h names and shapes), in its stored
  // dtype: a Tensor over the file's bytes (an expert: its slice of the stacked tensor). Throws
  // zaya::Error naming the GGUF tensor when it is missing or its shape disagrees. The view's memory
  // is read-only (the mapping): never write through it.
  Tensor tensor(const ParamSpec& spec) const;
  // The GGUF tensor (this file's scheme) that holds `spec`, and the expert slice (-1: whole).
  std::string tensor_name(const ParamSpec& spec, int64_t* expert = nullptr) const;
};

// Opens and validates `path` (io/gguf.h), then refuses non-zaya files, the 40-block layout (naming
// what it is) and incomplete files (naming the first missing tensor and how many are missing).
GgufModel open_gguf_model(const std::string& path);
// The same on a file already read (tests, fuzzing).
GgufModel gguf_model_from(std::shared_ptr<const GgufFile> file);

// The GGUF name (scheme B) and GGML shape of zaya parameter `spec` (for experts: the stacked
// tensor's name and shape, and `expert`; expert slices are written by the caller in expert order).
struct GgufName {
  std::string name;
  std::vector<int64_t> ne;
  int64_t expert = -1;
};
GgufName gguf_name(const ZayaConfig& c, const ParamSpec& spec);
// One tensor of a file zaya writes: its GGUF name and shape (scheme B) and the parameters it holds
// (one, or the experts of a sub-layer in expert order); `layer` the sub-layer, -1 for none.
struct GgufOutTensor {
  std::string name;
  std::vector<int64_t> ne;
  std::vector<const ParamSpec*> parts;
  int64_t layer = -1;
};
// Every tensor of `c`'s GGUF file, in `layout`'s order of first appearance (`layout` must outlive
// the result: parts point into it).
std::vector<GgufOutTensor> gguf_output_tensors(const ZayaConfig& c, const ParamLayout& layout);
// The tensors as the quantization policy sees them (quant/policy.h): name, role, shape, sub-layer.
std::vector<quant::TensorDesc> gguf_tensor_descs(const std::vector<GgufOutTensor>& tensors);
// The tensor data bytes of the file `zaya quantize` writes for `c` with options `o` (the types
// quant::choose_types picks, after its shape fallback): what `zaya inspect` prints per preset.
uint64_t gguf_weight_bytes(const ZayaConfig& c, const quant::PolicyOptions& o);
// The name of `spec`'s tensor in scheme `s` (gguf_name's for B).
std::string gguf_scheme_name(const ZayaConfig& c, const ParamSpec& spec, GgufScheme s);

// The metadata keys a zaya-written file carries (general.*, zaya.* of the community converters,
// plus zaya.config_json — the config.json text), for `zaya quantize`.
void set_model_keys(GgufWriter& w, const ZayaConfig& c);

}  // namespace zaya
