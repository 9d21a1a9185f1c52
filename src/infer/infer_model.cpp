// InferModel loading: every tensor of the one parameter list (model/param_layout.h) is resolved to
// a view — of the file mapping (F32/BF16 matrices and conv weights of a model directory; every
// matrix of a GGUF file, quantized or not), of an in-memory Model, or of an owned copy (vectors
// widened to F32, F16/F64 matrices of a directory converted, BF16 conversions of an F32 model).
#include "infer/infer_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "checkpoint/model_path.h"
#include "core/assert.h"
#include "core/rng.h"
#include "infer/gguf_model.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "model/param_names.h"
#include "ops/ops.h"
#include "quant/formats.h"

namespace zaya {

namespace {

// Weights kept in their stored dtype (F32 or BF16): matrices, experts, the embedding and the conv
// weights. Vectors (norms, biases, scales) are widened to F32.
bool keeps_dtype(ParamKind k) {
  return k == ParamKind::Matrix || k == ParamKind::Expert || k == ParamKind::Embedding ||
         k == ParamKind::Conv;
}

Tensor shaped(void* data, DType t, const std::vector<int64_t>& shape) {
  Tensor v(data, t, {});
  v.ndim = int(shape.size());
  for (int i = 0; i < v.ndim; ++i) v.shape[size_t(i)] = shape[size_t(i)];
  return v;
}

}  // namespace

InferModel InferModel::load_dir(const std::string& dir, bool to_bf16) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("model directory '{}' does not exist", dir);
  const std::string cfg = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg)) fail("{}: no config.json in the model directory", dir);
  InferModel m;
  m.config_ = load_config(cfg);
  m.source_ = dir;
  auto st = std::make_shared<const SafeTensors>(open_model_tensors(dir, m.config_));
  m.file_ = st;
  const ParamLayout layout = make_param_layout(m.config_);
  ResolveParam resolve = [&](const ParamSpec& s) -> Tensor {
    const SafeTensorInfo* info = st->find(s.name);
    if (!info)
      fail("{}: missing tensor '{}'; config.json and the weights disagree", dir,
           stored_name(m.config_, s.name));
    if (info->shape != s.shape) {
      std::string want;
      for (int64_t d : s.shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      fail("{}: tensor '{}' has the wrong shape for config.json (expected [{}])", info->file,
           stored_name(m.config_, s.name), want);
    }
    const auto addr = reinterpret_cast<uintptr_t>(info->data);
    // Matrices are used in place when the kernels can read them: BF16, or F32 that is 4-aligned
    // (unless they are to become BF16).
    if (keeps_dtype(s.kind) &&
        (info->dtype == DType::BF16 ||
         (!to_bf16 && info->dtype == DType::F32 && addr % alignof(float) == 0))) {
      return shaped(const_cast<void*>(info->data), info->dtype, s.shape);
    }
    auto buf = std::make_shared<Buffer>(size_t(s.numel()) * sizeof(float));
    Tensor t = shaped(buf->data(), DType::F32, s.shape);
    st->read_into(s.name, t);  // widens BF16/F16/F64 and checks the dtype is a float
    if (to_bf16 && keeps_dtype(s.kind)) {
      return m.owned_bf16_copy(t);  // the F32 buffer is dropped here
    }
    m.owned_.push_back(buf);
    return t;
  };
  m.bind(layout, resolve);
  return m;
}

InferModel InferModel::load_gguf(const std::string& path, bool to_bf16) {
  return load_gguf(std::make_shared<const GgufModel>(open_gguf_model(path)), to_bf16);
}

InferModel InferModel::load_gguf(std::shared_ptr<const GgufModel> g, bool to_bf16) {
  InferModel m;
  m.config_ = g->config;
  m.source_ = g->file->path();
  m.gguf_ = g;
  const ParamLayout layout = make_param_layout(m.config_);
  ResolveParam resolve = [&](const ParamSpec& s) -> Tensor {
    const Tensor stored = g->tensor(s);
    const bool matrix = s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert ||
                        s.kind == ParamKind::Embedding;
    // Matrices as stored (the kernels read every weight type from the mapping), unless an F32
    // one is to become BF16.
    if (matrix && !(to_bf16 && stored.dtype == DType::F32)) return stored;
    // Vectors and conv weights (and the F32 matrices of to_bf16): F32, owned.
    auto buf = std::make_shared<Buffer>(size_t(s.numel()) * sizeof(float));
    Tensor t = shaped(buf->data(), DType::F32, s.shape);
    quant::dequantize_row(stored.dtype, stored.data, static_cast<float*>(t.data), s.numel());
    if (matrix) return m.owned_bf16_copy(t);  // the F32 buffer is dropped here
    m.owned_.push_back(buf);
    return t;
  };
  m.bind(layout, resolve);
  return m;
}

InferModel InferModel::load(const std::string& path_or_dir, bool to_bf16) {
  return is_gguf_file(path_or_dir) ? load_gguf(path_or_dir, to_bf16)
                                   : load_dir(path_or_dir, to_bf16);
}

Tensor InferModel::owned_bf16_copy(const Tensor& f32) {
  auto buf = std::make_shared<Buffer>(f32.numel() * sizeof(uint16_t));
  owned_.push_back(buf);
  Tensor t = f32;
  t.data = buf->data();
  t.dtype = DType::BF16;
  ops::convert(t, f32);
  return t;
}

InferModel InferModel::from_model(const Model& src, DType matrix_dtype) {
  ZAYA_CHECK_INPUT(matrix_dtype == DType::F32 || matrix_dtype == DType::BF16,
                   "inference matrices are F32 or BF16, not {}", dtype_name(matrix_dtype));
  InferModel m;
  m.config_ = src.config();
  m.source_ = "(in memory)";
  ResolveParam resolve = [&](const ParamSpec& s) -> Tensor {
    const Tensor f32 = src.param(s.name);
    if (!keeps_dtype(s.kind) || matrix_dtype == DType::F32) return f32;
    return m.owned_bf16_copy(f32);
  };
  m.bind(src.layout(), resolve);
  m.matrix_dtype_ = matrix_dtype;
  return m;
}

InferModel InferModel::random(const ZayaConfig& c, uint64_t seed, DType matrix_dtype, double std) {
  ZAYA_CHECK_INPUT(matrix_dtype == DType::F32 || matrix_dtype == DType::BF16,
                   "inference matrices are F32 or BF16, not {}", dtype_name(matrix_dtype));
  validate_config(c);
  InferModel m;
  m.config_ = c;
  m.source_ = "(random)";
  const ParamLayout layout = make_param_layout(c);
  const double half_width = std * std::sqrt(3.0);  // uniform on [−a, a] has std a/√3
  uint64_t stream = 0;
  ResolveParam resolve = [&](const ParamSpec& s) -> Tensor {
    const DType t = keeps_dtype(s.kind) ? matrix_dtype : DType::F32;
    auto buf = std::make_shared<Buffer>(size_t(s.numel()) * dtype_size(t));
    m.owned_.push_back(buf);
    const Tensor v = shaped(buf->data(), t, s.shape);
    const uint64_t this_stream = stream++;
    if (s.init == ParamInit::Normal) {
      ops::fill_uniform(v, seed, this_stream, half_width);
    } else {  // vectors: ones, zeros (Buffer starts zeroed), balancing biases (skip class −1)
      ZAYA_ASSERT(t == DType::F32, "non-random init of a matrix {}", s.name);
      if (s.init == ParamInit::One) ops::fill(v, 1.0);
      if (s.init == ParamInit::BalancingBias && c.zaya_use_mod)
        ops::fill(v.view({s.numel()}).rows(s.numel() - 1, s.numel()), -1.0);
    }
    return shaped(buf->data(), t, s.shape);
  };
  m.bind(layout, resolve);
  return m;
}

int64_t InferModel::active_weight_bytes() const {
  int64_t bytes = dense_weight_bytes() + embedding_row_bytes();
  for (const InferLayer& l : layers)
    if (!l.moe.fc1.empty()) bytes += int64_t(l.moe.fc1[0].nbytes() + l.moe.fc2[0].nbytes());
  return bytes;
}

int64_t InferModel::dense_weight_bytes() const {
  int64_t bytes = total_weight_bytes();
  for (const InferLayer& l : layers)
    for (size_t e = 0; e < l.moe.fc1.size(); ++e)
      bytes -= int64_t(l.moe.fc1[e].nbytes() + l.moe.fc2[e].nbytes());
  return bytes;
}

void InferModel::bind(const ParamLayout& layout, const ResolveParam& resolve) {
  total_bytes_ = 0;
  // Bytes of matrices (projections, experts, the embedding) per dtype: the dominant one names the
  // model's matrix dtype.
  std::vector<std::pair<DType, int64_t>> matrix_bytes;
  ParamViews v = bind_params(config_, layout, [&](const ParamSpec& s) {
    const Tensor t = resolve(s);
    total_bytes_ += int64_t(t.nbytes());
    if (s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert ||
        s.kind == ParamKind::Embedding) {
      auto it = std::find_if(matrix_bytes.begin(), matrix_bytes.end(),
                             [&](const auto& e) { return e.first == t.dtype; });
      if (it == matrix_bytes.end()) it = matrix_bytes.insert(it, {t.dtype, 0});
      it->second += int64_t(t.nbytes());
    }
    return t;
  });
  matrix_dtype_ = DType::F32;
  int64_t most = -1;
  for (const auto& [t, bytes] : matrix_bytes)
    if (bytes > most) matrix_dtype_ = t, most = bytes;
  embed = v.embed;
  layers = std::move(v.layers);
  final_res = v.final_res;
  final_norm = v.final_norm;
}

}  // namespace zaya
