// Sliding-window CCA sub-layers in the whole model (src/model/attention.cpp with
// attention_keys(c, i) and rope_theta_of(i), docs/model.md §4.9), on the weights of a committed
// twin case: windows of T keys or more, with the windowed θ equal to the full one, give the full
// model's bits; a window shorter than T, or a windowed θ of its own, changes the logits, and the θ
// acts only on windowed sub-layers; the gradient of a windowed model (mixed windows, W = 1, its own
// θ) agrees with a central difference of the loss along the gradient, so the backward uses the
// forward's window and tables. And the float64 twin's windowed cases (tests/fixtures/model_swa/:
// mixed full and windowed sub-layers, W = 1, windows below and above T, GQA, a windowed θ of its
// own): logits within 1e-4 of the largest |logit|, loss within 1e-5, every gradient within 1e-3
// relative L2, as for the full-attention cases.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/file.h"
#include "io/json_parse.h"
#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/attention_window.h"
#include "model/transformer.h"
#include "test_util.h"
#include "twin_cases.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct ModelRun {
  double loss;
  std::vector<float> logits, grads;
};

// The mean loss, the logits and (with backward) every gradient of model m on all rows of tl.
ModelRun evaluate(Model& m, const TokenLines& tl, bool backward = true) {
  const int64_t B = tl.rows, T = tl.cols;
  Activations a(m.config(), B, T, Device::Cpu, true);
  m.zero_grads();
  ModelRun r;
  r.loss = model_forward(m, a, tl.ids.data());
  r.logits.assign(a.logits.ptr<float>(), a.logits.ptr<float>() + a.logits.numel());
  if (backward) {
    model_backward(m, a, 1.0 / double(B * (T - 1)));
    r.grads.assign(m.grads(), m.grads() + m.grads_bytes() / sizeof(float));
  }
  return r;
}

// A model of config c holding the weights of `from` (same shapes: only windows and θ differ).
Model with_config(const Model& from, const ZayaConfig& c) {
  Model m(c);
  ZAYA_ASSERT(m.params_bytes() == from.params_bytes(), "the window changed the parameter layout");
  std::memcpy(m.params(), from.params(), from.params_bytes());
  return m;
}

struct Case {
  Model base;
  TokenLines tl;
};
Case load_case(const std::string& name) {
  Model m = Model::load_dir(case_dir(name).string());
  TokenLines tl = read_token_lines((case_dir(name) / "tokens.txt").string(), m.config().vocab_size);
  return {std::move(m), std::move(tl)};
}

// Per sub-layer windows: `attn` for the attention sub-layers in order (repeating the last), 0 for
// MoE sub-layers.
std::vector<int64_t> windows(const ZayaConfig& c, const std::vector<int64_t>& attn) {
  std::vector<int64_t> w(size_t(c.num_layers()), 0);
  size_t j = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i)) w[size_t(i)] = attn[std::min(j++, attn.size() - 1)];
  return w;
}

}  // namespace

TEST(AttentionWindow, AttentionKeysIsTheConfigWindow) {
  ZayaConfig c;
  c.zaya_layers = {0, 4, 0, 4};
  EXPECT_EQ(attention_keys(c, 0), 0);  // no swa_layers: every layer full
  c.swa_layers = {4097, 0, 0, 0};
  EXPECT_EQ(attention_keys(c, 0), 4097);  // transformers: sliding_window keys, itself included
  EXPECT_EQ(attention_keys(c, 2), 0);
}

TEST(AttentionWindow, WindowOfTOrMoreIsTheFullModel) {
  Case k = load_case("tiny_a");
  const ModelRun full = evaluate(k.base, k.tl);
  ZayaConfig c = k.base.config();
  c.swa_layers = windows(c, {k.tl.cols, k.tl.cols + 100});
  c.swa_rope_theta = c.rope_theta;
  Model m = with_config(k.base, c);
  const ModelRun win = evaluate(m, k.tl);
  EXPECT_EQ(win.loss, full.loss);
  EXPECT_EQ(win.logits, full.logits);
  EXPECT_EQ(win.grads, full.grads);
}

TEST(AttentionWindow, ShortWindowsAndTheirThetaChangeTheLogits) {
  Case k = load_case("tiny_a");
  const ModelRun full = evaluate(k.base, k.tl, false);
  ZayaConfig c = k.base.config();
  c.swa_layers = windows(c, {3});
  Model short_window = with_config(k.base, c);
  EXPECT_NE(evaluate(short_window, k.tl, false).logits, full.logits);
  // Windows that hide nothing, but with their own θ: the windowed layers rotate differently.
  c.swa_layers = windows(c, {k.tl.cols});
  c.swa_rope_theta = 500;
  Model theta = with_config(k.base, c);
  EXPECT_NE(evaluate(theta, k.tl, false).logits, full.logits);
  // The windowed θ without a windowed layer acts nowhere.
  c.swa_layers.clear();
  Model none = with_config(k.base, c);
  EXPECT_EQ(evaluate(none, k.tl, false).logits, full.logits);
}

// The analytic gradient g of a windowed model against (L(θ + h·ĝ) − L(θ − h·ĝ)) / 2h ≈ ‖g‖. A
// backward that used another window or other RoPE tables than the forward misses by far more.
TEST(AttentionWindow, GradientMatchesFiniteDifferenceAlongIt) {
  for (const char* name : {"tiny_a", "gqa4_c", "odd_d"}) {
    SCOPED_TRACE(name);
    Case k = load_case(name);
    ZayaConfig c = k.base.config();
    c.swa_layers = windows(c, {4, 1, 2 * k.tl.cols});
    c.swa_rope_theta = 777;
    Model m = with_config(k.base, c);
    ModelRun r = evaluate(m, k.tl);
    // The pad row's reported gradient leaves out its lookup (docs/model.md §8.9): not along it.
    const Tensor embed = m.grad("model.embed_tokens.weight");
    const size_t pad =
        size_t(embed.ptr<float>() - m.grads()) + size_t(c.pad_token_id * c.hidden_size);
    std::fill(r.grads.begin() + pad, r.grads.begin() + pad + size_t(c.hidden_size), 0.0f);
    double norm = 0;
    for (float g : r.grads) norm += double(g) * double(g);
    norm = std::sqrt(norm);
    ASSERT_GT(norm, 0);
    const size_t n = r.grads.size();
    std::vector<float> theta(m.params(), m.params() + n);
    auto loss_at = [&](double h) {
      for (size_t i = 0; i < n; ++i) m.params()[i] = float(theta[i] + h * r.grads[i] / norm);
      return evaluate(m, k.tl, false).loss;
    };
    const double h = 2e-3;
    const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
    std::memcpy(m.params(), theta.data(), n * sizeof(float));
    EXPECT_NEAR(fd, norm, 2e-2 * norm) << "finite difference " << fd << " vs |g| " << norm;
  }
}

namespace {

namespace fs = std::filesystem;

fs::path swa_case_dir(const std::string& name) {
  return fs::path(ZAYA_TEST_FIXTURES) / "model_swa" / name;
}

// The case's model: config.json read as usual, its windows (`swa_layers`, one per sub-layer) and
// the windowed layers' θ (`swa_rotary_base`) set from the file here, so that this test does not
// depend on which schema reads those names.
Model load_swa_case(const fs::path& dir) {
  const std::string path = (dir / "config.json").string();
  const nlohmann::json j = parse_json(read_text_file(path, "config"));
  ZayaConfig c = config_from_json(j);
  c.swa_layers = j.at("swa_layers").get<std::vector<int64_t>>();
  c.swa_rope_theta = j.at("swa_rotary_base").get<double>();
  Model m(c);
  m.load_weights(SafeTensors::open_file((dir / "model.safetensors").string()), dir.string());
  return m;
}

class SwaTwinCase : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(SwaTwinCase, LogitsLossAndEveryGradientMatchTheTwin) {
  const fs::path dir = swa_case_dir(GetParam());
  Model m = load_swa_case(dir);
  ASSERT_FALSE(m.config().swa_layers.empty());
  const TokenLines tl = read_token_lines((dir / "tokens.txt").string(), m.config().vocab_size);
  const ModelRun run = evaluate(m, tl);
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
    const float* got = run.grads.data() + s.offset;
    double norm = 0;
    for (double r : ref) norm += r * r;
    if (norm == 0) {  // an expert that received no token; q/k of a W = 1 layer (no effect)
      for (int64_t i = 0; i < s.numel(); ++i) EXPECT_LE(std::fabs(got[i]), 1e-6f) << s.name;
    } else {
      EXPECT_LE(rel_l2(got, ref.data(), ref.size()), kModelGradRelL2) << s.name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Twin, SwaTwinCase, ::testing::Values("swa_i", "swa_j", "swa_k"),
                         [](const auto& info) { return info.param; });
