// The whole model against the PyTorch twin's committed vectors (tests/fixtures/model/<case>/):
// logits within 1e-4 of the largest |logit|, loss within 1e-5, every gradient within 1e-3
// relative L2 (docs/testing.md). Plus properties the twin cannot see: determinism, independence of
// the batch split, bf16 weights.
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/transformer.h"
#include "test_util.h"
#include "twin_cases.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

struct EvalRun {
  double loss;
  std::vector<float> logits;
};

// Forward (and backward of the mean loss into m's gradients) over rows [0, B) in chunks; the
// logits are kept (and returned) unless keep_logits is false (the training path).
EvalRun evaluate(Model& m, const TokenLines& tl, int64_t rows_per_chunk, bool backward,
                 bool keep_logits = true) {
  const int64_t B = tl.rows, T = tl.cols, V = m.config().vocab_size;
  EvalRun run{0, std::vector<float>(keep_logits ? size_t(B * T * V) : 0)};
  m.zero_grads();
  for (int64_t r0 = 0; r0 < B; r0 += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, B - r0);
    Activations a(m.config(), rows, T, Device::Cpu, keep_logits);
    run.loss += model_forward(m, a, tl.ids.data() + r0 * T) * double(rows) / double(B);
    if (keep_logits) std::memcpy(run.logits.data() + r0 * T * V, a.logits.data, a.logits.nbytes());
    if (backward) model_backward(m, a, 1.0 / double(B * (T - 1)));
  }
  return run;
}

class TwinCase : public ::testing::TestWithParam<std::string> {};

TEST_P(TwinCase, LogitsLossAndEveryGradientMatchTheTwin) {
  const fs::path dir = case_dir(GetParam());
  Model m = Model::load_dir(dir.string());
  const TokenLines tl = read_token_lines((dir / "tokens.txt").string(), m.config().vocab_size);
  const EvalRun run = evaluate(m, tl, tl.rows, true);
  const SafeTensors want = SafeTensors::open_file((dir / "expected.safetensors").string());

  std::vector<double> logits(run.logits.size()), loss(1);
  want.read_into("logits", Tensor(logits.data(), {tl.rows, tl.cols, m.config().vocab_size}));
  want.read_into("loss", Tensor(loss.data(), {1}));
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(logits[i]));
    max_diff = std::max(max_diff, std::fabs(logits[i] - double(run.logits[i])));
  }
  EXPECT_LE(max_diff, kModelLogitRel * max_ref) << "largest |logit| " << max_ref;
  EXPECT_NEAR(run.loss, loss[0], kModelLossAbs);

  int checked = 0;
  for (const ParamSpec& s : m.layout().specs) {
    if (!s.trainable()) continue;
    ASSERT_NE(want.find(s.name), nullptr) << "twin has no gradient for " << s.name;
    std::vector<double> ref(size_t(s.numel()));
    Tensor dst(ref.data(), {s.numel()});
    dst.ndim = int(s.shape.size());
    for (int i = 0; i < dst.ndim; ++i) dst.shape[i] = s.shape[size_t(i)];
    want.read_into(s.name, dst);
    const float* got = m.grads() + s.offset;
    double norm = 0;
    for (double r : ref) norm += r * r;
    if (norm == 0 && s.kind == ParamKind::Expert) {  // an expert that received no token
      for (int64_t i = 0; i < s.numel(); ++i) EXPECT_EQ(got[i], 0.0f) << s.name;
    } else if (norm == 0) {  // zero in exact arithmetic (e.g. q/k when only t = 0 is scored)
      for (int64_t i = 0; i < s.numel(); ++i) EXPECT_LE(std::fabs(got[i]), 1e-6f) << s.name;
    } else {
      EXPECT_LE(rel_l2(got, ref.data(), ref.size()), kModelGradRelL2) << s.name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Twin, TwinCase, ::testing::ValuesIn(twin_cases()),
                         [](const auto& info) { return info.param; });

TEST(Model, TwinVectorsArePresent) {
  EXPECT_GE(twin_cases().size(), 4u);
}

TEST(Model, SameInputsGiveTheSameBits) {
  for (const std::string& name : twin_cases()) {
    Model m = Model::load_dir(case_dir(name).string());
    const TokenLines tl =
        read_token_lines((case_dir(name) / "tokens.txt").string(), m.config().vocab_size);
    const EvalRun a = evaluate(m, tl, tl.rows, true);
    std::vector<float> grads_a(m.grads(), m.grads() + m.layout().total);
    const EvalRun b = evaluate(m, tl, tl.rows, true);
    EXPECT_EQ(a.loss, b.loss) << name;
    EXPECT_EQ(0, std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * 4)) << name;
    EXPECT_EQ(0, std::memcmp(grads_a.data(), m.grads(), grads_a.size() * 4)) << name;
  }
}

// Training keeps no [N,V] logits (the fused LM head): its loss and gradients are the same bits as
// with the logits kept, and the activations are smaller by exactly that buffer.
TEST(Model, LogitsAreKeptOnlyWhenAsked) {
  for (const std::string& name : twin_cases()) {
    Model m = Model::load_dir(case_dir(name).string());
    const ZayaConfig& c = m.config();
    const TokenLines tl = read_token_lines((case_dir(name) / "tokens.txt").string(), c.vocab_size);
    const EvalRun kept = evaluate(m, tl, tl.rows, true);
    std::vector<float> grads_kept(m.grads(), m.grads() + m.layout().total);
    const EvalRun lean = evaluate(m, tl, tl.rows, true, /*keep_logits=*/false);
    EXPECT_EQ(kept.loss, lean.loss) << name;
    EXPECT_EQ(0, std::memcmp(grads_kept.data(), m.grads(), grads_kept.size() * 4)) << name;
    EXPECT_TRUE(Activations(c, tl.rows, tl.cols).logits.data == nullptr) << name;
    EXPECT_GE(Activations::bytes_needed(c, tl.rows, tl.cols, true) -
                  Activations::bytes_needed(c, tl.rows, tl.cols),
              size_t(tl.rows * tl.cols * c.vocab_size) * sizeof(float))
        << name;
  }
}

TEST(Model, RowChunkingDoesNotChangeResults) {
  for (const std::string& name : twin_cases()) {
    Model m = Model::load_dir(case_dir(name).string());
    const TokenLines tl =
        read_token_lines((case_dir(name) / "tokens.txt").string(), m.config().vocab_size);
    if (tl.rows < 2) continue;
    const EvalRun whole = evaluate(m, tl, tl.rows, true);
    std::vector<float> grads_whole(m.grads(), m.grads() + m.layout().total);
    const EvalRun split = evaluate(m, tl, 1, true);
    EXPECT_NEAR(whole.loss, split.loss, 1e-6) << name;
    expect_close(split.logits, whole.logits, 1e-5, 1e-5, name.c_str());
    EXPECT_LE(rel_l2(m.grads(), grads_whole.data(), grads_whole.size()), 1e-5) << name;
  }
}

TEST(Model, Bf16WeightsLoadAndEvaluateInF32) {
  const std::vector<std::string> names = twin_cases();
  ASSERT_FALSE(names.empty());
  const fs::path dir = case_dir(names.front());
  Model m = Model::load_dir(dir.string());
  // Write the same model with bf16 tensors (balancing biases stay F32, as in ZAYA1-base).
  const fs::path tmp =
      fs::path(::testing::TempDir()) / ("zaya_bf16_model_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  fs::copy_file(dir / "config.json", tmp / "config.json", fs::copy_options::overwrite_existing);
  std::vector<std::vector<uint16_t>> store;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : m.layout().specs) {
    Tensor p = m.param(s.name);
    if (!s.trainable()) {
      tensors.emplace_back(s.name, p);
      continue;
    }
    store.emplace_back(size_t(s.numel()));
    for (int64_t i = 0; i < s.numel(); ++i)
      store.back()[size_t(i)] = f32_to_bf16(p.ptr<float>()[i]);
    Tensor t = p;
    t.data = store.back().data();
    t.dtype = DType::BF16;
    tensors.emplace_back(s.name, t);
  }
  save_safetensors((tmp / "model.safetensors").string(), tensors);
  Model mb = Model::load_dir(tmp.string());
  for (const ParamSpec& s : m.layout().specs)
    for (int64_t i = 0; i < s.numel(); ++i) {
      const float want = s.trainable() ? bf16_to_f32(f32_to_bf16(m.params()[s.offset + i]))
                                       : m.params()[s.offset + i];
      ASSERT_EQ(mb.params()[s.offset + i], want) << s.name;
    }
  const TokenLines tl = read_token_lines((dir / "tokens.txt").string(), m.config().vocab_size);
  const double loss_f32 = evaluate(m, tl, tl.rows, false).loss;
  const double loss_bf16 = evaluate(mb, tl, tl.rows, false).loss;
  EXPECT_TRUE(std::isfinite(loss_bf16));
  EXPECT_NEAR(loss_bf16, loss_f32, 0.05 * std::fabs(loss_f32));  // bf16 rounding of the weights
}

}  // namespace
