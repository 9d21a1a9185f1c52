// The one parameter list of a ZAYA1 model (docs/model.md §2): every tensor's name, shape, kind and
// offset in the parameter arena. It drives load, save, zeroing, initialisation, optimizer grouping
// and gradient reduction; nothing else enumerates parameters.
//
// Layout: tensors are packed without padding in list order, and the order keeps together what
// one GEMM reads: linear_q ‖ linear_k (= W_qk [C, D]), val_proj1 ‖ val_proj2 (= W_v [H_k·d, D]),
// the fc1 of all experts of a layer ([E, F, D]) and their fc2 ([E, D, F/2]).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "io/zaya_config.h"

namespace zaya {

enum class ParamKind {
  Matrix,     // 2-D hidden weight (Muon): q/k/value/o projections, router matrices
  Expert,     // one expert's fc1/fc2 (Muon, each expert its own matrix)
  Embedding,  // the tied embedding / LM head (AdamW)
  Vector,     // norms, biases, residual scales, EDA scales, temperatures (AdamW, no decay)
  Conv,       // conv weights (AdamW)
  Buffer,     // balancing biases: stored with the weights, never trained by gradient
};

enum class ParamInit { Normal, Zero, One, BalancingBias };

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  ParamKind kind;
  ParamInit init;
  int64_t layer = -1;  // the sub-layer it belongs to; −1 for the embedding and the final merge
  size_t offset = 0;   // in elements from the arena base
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  bool trainable() const { return kind != ParamKind::Buffer; }
  // This tensor's view in an arena of the layout (weights or gradients) on `device`.
  Tensor view(float* base, Device device = Device::Cpu) const {
    Tensor t(base + offset, {numel()});
    t.device = device;
    t.ndim = int(shape.size());
    for (int i = 0; i < t.ndim; ++i) t.shape[i] = shape[size_t(i)];
    return t;
  }
};

struct ParamLayout {
  std::vector<ParamSpec> specs;
  std::unordered_map<std::string, size_t> index;  // name → position in specs
  size_t total = 0;                               // elements

  const ParamSpec& at(const std::string& name) const;
};

// Throws zaya::Error if the config cannot be laid out (e.g. an odd value width).
ParamLayout make_param_layout(const ZayaConfig& c);

}  // namespace zaya
