// BF16 weights: a model whose matrices are bf16 decodes like the F32 model whose matrices were
// rounded to bf16 (prefill and incremental decode within 1e-5 relative), and a bf16 checkpoint
// on disk is used straight from its mapping (never widened in memory) with the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "io/safetensors.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"

namespace zaya {
namespace {

constexpr double kDecodeRel = 1e-5;

// The weights a bf16 InferModel keeps in bf16 (the rest is widened to F32).
bool keeps_dtype(const ParamSpec& s) {
  return s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert ||
         s.kind == ParamKind::Embedding || s.kind == ParamKind::Conv;
}

std::string case_dir(const char* name) {
  return std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
}

// Logits [T, V] of the whole sequence, prefilled in chunks of `chunk`.
std::vector<float> decode_all(const InferModel& im, const std::vector<int32_t>& ids,
                              int64_t chunk) {
  const int64_t T = int64_t(ids.size()), V = im.config().vocab_size;
  SequenceCache cache(im.config(), T);
  Decoder dec(im);
  std::vector<float> out(size_t(T * V));
  for (int64_t t = 0; t < T; t += chunk) {
    const int64_t L = std::min(chunk, T - t);
    DecodeItem item{&cache, std::span<const int32_t>(ids).subspan(size_t(t), size_t(L))};
    dec.forward({&item, 1}, Tensor(out.data() + t * V, {L, V}), /*all_positions=*/true);
  }
  return out;
}

TEST(DecodeBf16, MatchesTheRoundedF32Model) {
  for (const char* name : {"tiny_a", "hk3_b", "odd_d"}) {
    const Model m = Model::load_dir(case_dir(name));
    Model rounded = Model::load_dir(case_dir(name));
    for (const ParamSpec& s : rounded.layout().specs) {
      if (!keeps_dtype(s)) continue;
      float* p = rounded.params() + s.offset;
      for (int64_t k = 0; k < s.numel(); ++k) p[k] = bf16_to_f32(f32_to_bf16(p[k]));
    }
    const InferModel bf16 = InferModel::from_model(m, DType::BF16);
    EXPECT_EQ(bf16.matrix_dtype(), DType::BF16);
    std::vector<int32_t> ids;
    for (int t = 0; t < 9; ++t) ids.push_back(int32_t((t * 37 + 5) % m.config().vocab_size));
    Activations a(m.config(), 1, int64_t(ids.size()), Device::Cpu, /*keep_logits=*/true);
    model_forward(rounded, a, ids.data());
    const size_t n = ids.size() * size_t(m.config().vocab_size);
    const float* want = a.logits.ptr<float>();
    double scale = 0;
    for (size_t k = 0; k < n; ++k) scale = std::max(scale, std::fabs(double(want[k])));
    for (int64_t chunk : {9, 1, 4}) {
      const auto got = decode_all(bf16, ids, chunk);
      test::expect_close(got.data(), want, n, kDecodeRel * scale, kDecodeRel, name);
    }
  }
}

TEST(DecodeBf16, CheckpointIsUsedFromItsMapping) {
  const Model m = Model::load_dir(case_dir("tiny_a"));
  test::ScratchDir dir;
  std::filesystem::copy_file(case_dir("tiny_a") + "/config.json", dir / "config.json");
  // Matrices and conv weights as BF16, vectors as F32 (any mix loads: vectors are widened).
  std::vector<std::vector<uint16_t>> halves;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : m.layout().specs) {
    Tensor t = m.param(s.name);
    if (keeps_dtype(s)) {
      halves.emplace_back(size_t(s.numel()));
      for (int64_t k = 0; k < s.numel(); ++k)
        halves.back()[size_t(k)] = f32_to_bf16(t.ptr<float>()[k]);
      t.data = halves.back().data();
      t.dtype = DType::BF16;
    }
    tensors.emplace_back(s.name, t);
  }
  save_safetensors(dir / "model.safetensors", tensors);

  const InferModel mapped = InferModel::load_dir(dir.path);
  EXPECT_EQ(mapped.matrix_dtype(), DType::BF16);
  EXPECT_EQ(mapped.embed.dtype, DType::BF16);
  EXPECT_EQ(mapped.layers[0].attn.wq.dtype, DType::BF16);
  EXPECT_EQ(mapped.layers[0].attn.conv1_w.dtype, DType::BF16);
  EXPECT_EQ(mapped.layers[0].input_norm.dtype, DType::F32);
  // Matrices point into the file mapping, so the process holds no widened copy of them.
  const InferModel copied = InferModel::from_model(m, DType::BF16);
  EXPECT_LT(mapped.total_weight_bytes(), int64_t(m.layout().total * sizeof(float)));
  EXPECT_EQ(mapped.active_weight_bytes(), copied.active_weight_bytes());
  std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6};
  EXPECT_EQ(decode_all(mapped, ids, 3), decode_all(copied, ids, 3));  // same bits
}

// An F32 checkpoint loaded with to_bf16 holds its matrices and conv weights as BF16 rounded like
// from_model's (so the same logits bits) and its vectors as F32.
TEST(DecodeBf16, F32CheckpointRoundedAtLoad) {
  const InferModel rounded = InferModel::load_dir(case_dir("tiny_a"), true);
  EXPECT_EQ(rounded.matrix_dtype(), DType::BF16);
  EXPECT_EQ(rounded.embed.dtype, DType::BF16);
  EXPECT_EQ(rounded.layers[0].attn.conv1_w.dtype, DType::BF16);
  EXPECT_EQ(rounded.layers[0].input_norm.dtype, DType::F32);
  const InferModel plain = InferModel::load_dir(case_dir("tiny_a"));
  EXPECT_EQ(plain.matrix_dtype(), DType::F32);
  const Model m = Model::load_dir(case_dir("tiny_a"));
  const InferModel copied = InferModel::from_model(m, DType::BF16);
  EXPECT_EQ(rounded.total_weight_bytes(), copied.total_weight_bytes());
  std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6};
  EXPECT_EQ(decode_all(rounded, ids, 3), decode_all(copied, ids, 3));  // same bits
}

// A decode token reads every weight except the experts it is not routed to, plus the embedding
// row it looks up: counted here from the config's parameter layout.
TEST(InferModelBytes, ActiveBytesAreEveryWeightButTheUnusedExperts) {
  const ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  const ParamLayout layout = make_param_layout(c);
  int64_t unused = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (!c.is_attention(i)) {
      const int64_t F = c.ffn_hidden_size_list[size_t(i)], D = c.hidden_size;
      unused += (c.num_experts(i) - 1) * (F * D + D * F / 2);
    }
  const InferModel f32 = InferModel::random(c, 1, DType::F32);
  EXPECT_EQ(f32.total_weight_bytes(), int64_t(layout.total * sizeof(float)));
  EXPECT_EQ(f32.active_weight_bytes(),
            int64_t(sizeof(float)) * (int64_t(layout.total) - unused + c.hidden_size));
  // BF16 matrices halve the matrix bytes; vectors (norms, biases, conv) stay F32.
  const InferModel bf16 = InferModel::random(c, 1, DType::BF16);
  EXPECT_LT(bf16.active_weight_bytes(), f32.active_weight_bytes());
  EXPECT_GT(2 * bf16.active_weight_bytes(), f32.active_weight_bytes());
}

}  // namespace
}  // namespace zaya
