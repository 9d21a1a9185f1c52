// InferModel: a ZAYA1 model held for inference. Matrices (projections, router matrices, experts,
// the tied embedding / LM head) stay in their stored dtype — a bf16 checkpoint or a GGUF file's
// block-quantized, F16, BF16 or F32 weights are used straight from the memory mapping, never
// widened in memory — and are read through ops::linear_forward's kernels for that dtype. Small
// vectors (norms, biases, scales, convs, temperatures) are widened to f32 once.
// Shapes: D model, V vocab, C conv channels, d head, Hq/Hk heads, R router, K classes, F expert
// first-projection width (gate ‖ up).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "io/zaya_config.h"
#include "model/param_views.h"

namespace zaya {

class Model;
class SafeTensors;
struct GgufModel;

// The per-tensor views of model/param_views.h: matrices, experts, the embedding and the conv
// weights F32 or BF16; every other tensor F32.
using InferAttention = AttentionParams;
using InferMoe = MoeParams;
using InferLayer = LayerParams;

class InferModel {
 public:
  // config.json + model.safetensors (or index + shards). BF16 and F32 matrices are used from the
  // mapping; F16/F64 ones are converted to F32. With to_bf16, matrices and conv weights stored in
  // another dtype are rounded to owned BF16 copies (an F32 checkpoint from `zaya train` then reads
  // half the bytes per token). Throws zaya::Error naming a missing/mis-shaped tensor or a bad
  // directory.
  static InferModel load_dir(const std::string& dir, bool to_bf16 = false);
  // A GGUF file (docs/quantization.md, "Running a GGUF"): every parameter through
  // GgufModel::tensor. Matrices, experts and the embedding in their stored dtype (block types,
  // F16, BF16, F32) from the mapping; vectors and conv weights widened to owned F32. With
  // to_bf16, F32 matrices become owned BF16 copies (the others stay as stored). Throws zaya::Error
  // naming the file (and the tensor) for a file zaya cannot run.
  static InferModel load_gguf(const std::string& path, bool to_bf16 = false);
  // The same on a file already opened (model_source.h opens it once for the config and the
  // tokenizer too).
  static InferModel load_gguf(std::shared_ptr<const GgufModel> g, bool to_bf16 = false);
  // load_gguf for a GGUF file (model_path.h is_gguf_file), else load_dir.
  static InferModel load(const std::string& path_or_dir, bool to_bf16 = false);
  // From an in-memory model (tests, benchmarks): matrices are views of m's F32 weights (m must
  // outlive this) when matrix_dtype is F32, or owned BF16 copies when it is BF16.
  static InferModel from_model(const Model& m, DType matrix_dtype = DType::F32);
  // A random model for benchmarks, built straight in matrix_dtype (no F32 copy of the matrices):
  // matrices uniform with std `std` from the counter RNG, vectors initialised as docs/model.md §9
  // says. Same values for any thread count; not the training initialisation (Model::init_random).
  static InferModel random(const ZayaConfig& c, uint64_t seed, DType matrix_dtype,
                           double std = 0.02);

  const ZayaConfig& config() const { return config_; }
  const std::string& source() const { return source_; }
  // The matrices' dtype: the one holding most of their bytes (a Q4_K_M file's Q4_K, with its
  // Q6_K and F32 tensors beside), F32 when every matrix is F32.
  DType matrix_dtype() const { return matrix_dtype_; }

  // Bytes of weights one decode token reads when it is routed to an expert in every MoE layer:
  // every weight (attention and its conv, norms, residual scales, the router, the LM head, i.e.
  // the whole tied embedding) but the experts it is not routed to, plus one embedding row. What a
  // step really reads is Decoder::weight_bytes_read() (tokens routed to the skip class read no
  // expert; a batch may read several).
  int64_t active_weight_bytes() const;
  // Bytes of every weight but the experts (the embedding table counted once).
  int64_t dense_weight_bytes() const;
  // Bytes of one embedding row (what looking up one token reads).
  int64_t embedding_row_bytes() const { return int64_t(embed.nbytes() / size_t(embed.shape[0])); }
  // Bytes of all weights held (mapped or owned).
  int64_t total_weight_bytes() const { return total_bytes_; }

  Tensor embed;  // [V, D]
  std::vector<InferLayer> layers;
  ResScale final_res;
  Tensor final_norm;  // [D]

 private:
  Tensor owned_bf16_copy(const Tensor& f32);  // f32 rounded to a BF16 buffer this model owns
  ZayaConfig config_;
  std::string source_;
  DType matrix_dtype_ = DType::F32;
  int64_t total_bytes_ = 0;  // of every tensor as bound (mapped or owned)
  // Binds every tensor through resolve (model/param_views.h), counting the bytes it holds.
  void bind(const ParamLayout& layout, const ResolveParam& resolve);
  std::shared_ptr<const SafeTensors> file_;     // keeps the mapping alive
  std::shared_ptr<const GgufModel> gguf_;       // the same for a GGUF file
  std::vector<std::shared_ptr<Buffer>> owned_;  // widened vectors and converted matrices
};

}  // namespace zaya
