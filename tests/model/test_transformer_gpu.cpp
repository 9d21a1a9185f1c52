// The whole model on the GPU against the same model on the CPU, for every twin case
// (tests/fixtures/model/<case>/): forward + backward in-process on both devices, then logits within
// 1e-4 of the largest |logit|, loss within 1e-5, every gradient within 1e-3 relative L2 (F32).
// Also what only a GPU model does: loading through host staging (and the tied lm_head check),
// saving from the device, random initialisation on the device, and `zaya eval --device gpu`
// against `--device cpu`; activations stored in bf16 against the CPU's. Every test skips without
// a GPU. The sliding-window cases (tests/fixtures/model_swa/) likewise, on both attention paths.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.h"
#include "gpu_test_util.h"
#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/param_names.h"
#include "model/transformer.h"
#include "twin_cases.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct DeviceRun {
  double loss = 0;
  std::vector<float> logits;  // [B·T·V], on the host
  std::vector<float> grads;   // the whole gradient arena, on the host
};

// One forward + backward of the mean loss over all rows of `tl` on m's device.
DeviceRun forward_backward(Model& m, const TokenLines& tl,
                           ActivationStorage storage = ActivationStorage::F32) {
  const int64_t B = tl.rows, T = tl.cols, V = m.config().vocab_size;
  DeviceRun r;
  r.logits.resize(size_t(B * T * V));
  m.zero_grads();
  Activations a(m.config(), B, T, m.device(), /*keep_logits=*/true, storage);
  r.loss = model_forward(m, a, tl.ids.data());
  device_copy(Tensor(r.logits.data(), {B * T, V}), a.logits);
  model_backward(m, a, 1.0 / double(B * (T - 1)));
  Buffer staging;
  const float* g = m.host_grads(staging);
  r.grads.assign(g, g + m.layout().total);
  return r;
}

// The whole weight arena of m, on the host.
std::vector<float> host_weights(const Model& m) {
  Buffer staging;
  const float* p = m.host_params(staging);
  return std::vector<float>(p, p + m.layout().total);
}

void expect_logits_close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                         const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(cpu[i])));
    max_diff = std::max(max_diff, std::fabs(double(gpu[i]) - double(cpu[i])));
  }
  EXPECT_LE(max_diff, kModelLogitRel * max_ref) << what << ": largest |logit| " << max_ref;
}

// Every trainable parameter's gradient: relative L2 ≤ 1e-3, or (where the CPU's is zero or
// rounding noise, L2 ≤ 1e-6: an expert no token reached, q/k when only t = 0 is scored) tiny.
void expect_grads_close(const Model& m, const std::vector<float>& gpu,
                        const std::vector<float>& cpu, const std::string& what) {
  int checked = 0;
  for (const ParamSpec& s : m.layout().specs) {
    if (!s.trainable()) continue;
    const float* a = gpu.data() + s.offset;
    const float* b = cpu.data() + s.offset;
    double norm = 0;
    for (int64_t i = 0; i < s.numel(); ++i) norm += double(b[i]) * b[i];
    if (norm <= 1e-12) {  // noise-level q/k grads (t2_h: ~1e-9) have no meaningful relative error
      for (int64_t i = 0; i < s.numel(); ++i)
        EXPECT_LE(std::fabs(a[i]), 1e-6f) << what << " " << s.name << "[" << i << "]";
    } else {
      EXPECT_LE(rel_l2(a, b, size_t(s.numel())), kModelGradRelL2) << what << " " << s.name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << what;
}

// The model of `dir` on both devices: loading, forward + backward, a repeated pass.
void check_case(const std::string& dir, const std::string& name) {
  SCOPED_TRACE(name);
  Model cpu = Model::load_dir(dir);
  Model gpu = Model::load_dir(dir, Device::Gpu);
  ASSERT_EQ(gpu.device(), Device::Gpu);
  EXPECT_EQ(host_weights(gpu), host_weights(cpu)) << "loading through host staging";
  const TokenLines tl = read_token_lines(dir + "/tokens.txt", cpu.config().vocab_size);
  const DeviceRun want = forward_backward(cpu, tl);
  const DeviceRun got = forward_backward(gpu, tl);
  EXPECT_NEAR(got.loss, want.loss, kModelLossAbs) << name;
  expect_logits_close(got.logits, want.logits, name);
  expect_grads_close(cpu, got.grads, want.grads, name);
  // The model is unchanged by a pass, and a second pass accumulates nothing stale.
  const DeviceRun again = forward_backward(gpu, tl);
  EXPECT_EQ(again.loss, got.loss) << name << ": the same inputs give the same loss";
  EXPECT_EQ(again.grads, got.grads) << name << ": the same inputs give the same gradients";
}

class GpuTwinCase : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuTwinCase, ForwardAndBackwardMatchTheCpu) {
  ZAYA_REQUIRE_GPU();
  check_case(case_dir(GetParam()).string(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Twin, GpuTwinCase, ::testing::ValuesIn(twin_cases()),
                         [](const auto& info) { return info.param; });

// The twin's cases with sliding-window layers (tests/fixtures/model_swa/<case>/: windows smaller
// and larger than the sequence, W = 1, GQA): the windowed attention of every GPU path in the whole
// model against the CPU's.
TEST(GpuModel, SlidingWindowCasesMatchTheCpu) {
  ZAYA_REQUIRE_GPU();
  const std::vector<std::string> names = twin_cases("model_swa");
  ASSERT_FALSE(names.empty()) << "tests/fixtures/model_swa holds no case";
  for (const char* path : {"flash", "gemm"}) {
    const ScopedEnv env("ZAYA_GPU_ATTENTION", path);
    for (const std::string& name : names) {
      const std::string dir =
          (std::filesystem::path(ZAYA_TEST_FIXTURES) / "model_swa" / name).string();
      const ZayaConfig c = Model::load_dir(dir).config();
      ASSERT_TRUE(
          std::any_of(c.swa_layers.begin(), c.swa_layers.end(), [](int64_t w) { return w > 0; }))
          << name << ": config.json's swa_layers were not read";
      check_case(dir, name + " (" + path + ")");
    }
  }
}

// Activations stored in bf16 (train.activations): the GPU's stash and unstash (ops::convert) give
// the CPU's, for every twin case.
TEST(GpuModel, Bf16ActivationStorageMatchesTheCpu) {
  ZAYA_REQUIRE_GPU();
  for (const std::string& name : twin_cases()) {
    const std::string dir = case_dir(name).string();
    Model cpu = Model::load_dir(dir);
    Model gpu = Model::load_dir(dir, Device::Gpu);
    const TokenLines tl = read_token_lines(dir + "/tokens.txt", cpu.config().vocab_size);
    const DeviceRun want = forward_backward(cpu, tl, ActivationStorage::BF16);
    const DeviceRun got = forward_backward(gpu, tl, ActivationStorage::BF16);
    EXPECT_NEAR(got.loss, want.loss, kModelLossAbs) << name;
    expect_logits_close(got.logits, want.logits, name + " bf16 storage");
    expect_grads_close(cpu, got.grads, want.grads, name + " bf16 storage");
  }
}

TEST(GpuModel, SaveDirWritesTheDeviceWeights) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  const std::string dir = case_dir(twin_cases().front()).string();
  Model gpu = Model::load_dir(dir, Device::Gpu);
  gpu.save_dir(d / "model");
  EXPECT_EQ(host_weights(Model::load_dir(d / "model")), host_weights(Model::load_dir(dir)));
}

TEST(GpuModel, TiedLmHeadIsCheckedAgainstTheDeviceEmbedding) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  const std::string dir = case_dir(twin_cases().front()).string();
  const Model cpu = Model::load_dir(dir);
  std::vector<float> head(size_t(cpu.param(names::kEmbed).numel()));
  const ParamSpec& e = cpu.layout().at(names::kEmbed);
  std::copy_n(cpu.params() + e.offset, head.size(), head.begin());
  auto write_with_head = [&](const std::string& path) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ParamSpec& s : cpu.layout().specs) tensors.emplace_back(s.name, cpu.param(s.name));
    tensors.emplace_back("lm_head.weight", Tensor(head.data(), {e.shape[0], e.shape[1]}));
    save_safetensors(path, tensors);
  };
  const SafeTensors tied = [&] {
    write_with_head(d / "tied.safetensors");
    return SafeTensors::open_file(d / "tied.safetensors");
  }();
  Model gpu(cpu.config(), Device::Gpu);
  gpu.load_weights(tied, "tied");  // an exact copy: accepted
  head.back() += 1.0f;
  write_with_head(d / "untied.safetensors");
  const SafeTensors untied = SafeTensors::open_file(d / "untied.safetensors");
  expect_error([&] { gpu.load_weights(untied, "untied"); },
               {"lm_head.weight differs from model.embed_tokens.weight"});
}

TEST(GpuModel, InitRandomOnTheDeviceMatchesTheCpu) {
  ZAYA_REQUIRE_GPU();
  const ZayaConfig c = Model::load_dir(case_dir(twin_cases().front()).string()).config();
  Model cpu(c), gpu(c, Device::Gpu);
  cpu.init_random(7);
  gpu.init_random(7);
  const std::vector<float> a = host_weights(gpu), b = host_weights(cpu);
  for (const ParamSpec& s : cpu.layout().specs) {
    const float *x = a.data() + s.offset, *y = b.data() + s.offset;
    if (s.init == ParamInit::Normal)  // one counter stream; the device's libm may differ slightly
      EXPECT_LE(rel_l2(x, y, size_t(s.numel())), 1e-6) << s.name;
    else  // constants: zeros, ones, the −1 skip bias
      EXPECT_TRUE(std::equal(x, x + s.numel(), y)) << s.name;
  }
}

// `zaya eval --device gpu` writes the same loss, logits and gradients as `--device cpu`.
TEST(GpuModel, EvalCliOnTheGpuMatchesTheCpu) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  for (const std::string& name : twin_cases()) {
    SCOPED_TRACE(name);
    const std::string dir = case_dir(name).string();
    CliResult r[2];
    const char* devices[2] = {"cpu", "gpu"};
    for (int k = 0; k < 2; ++k) {
      r[k] = run_zaya_in(d.path, "eval --model " + dir + " --tokens " + dir + "/tokens.txt" +
                                     " --device " + devices[k] + " --logits " +
                                     d / (std::string(devices[k]) + "_logits.safetensors") +
                                     " --grads " +
                                     d / (std::string(devices[k]) + "_grads.safetensors"));
      ASSERT_EQ(r[k].code, 0) << r[k].err;
    }
    EXPECT_NE(r[1].err.find("device gpu ("), std::string::npos) << r[1].err;
    EXPECT_NE(r[1].err.find("GPU memory"), std::string::npos) << r[1].err;
    const double loss_cpu = std::stod(r[0].out.substr(5)), loss_gpu = std::stod(r[1].out.substr(5));
    EXPECT_NEAR(loss_gpu, loss_cpu, kModelLossAbs);
    const Model m = Model::load_dir(dir);
    // A tensor of a written file, in its stored shape, as F32.
    auto read_shaped = [&](const std::string& path, const std::string& tensor) {
      const SafeTensors st = SafeTensors::open_file(path);
      const SafeTensorInfo& info = st.at(tensor);
      std::vector<float> v(size_t(info.numel()));
      Tensor t(v.data(), {info.numel()});
      t.ndim = int(info.shape.size());
      for (int i = 0; i < t.ndim; ++i) t.shape[i] = info.shape[size_t(i)];
      st.read_into(tensor, t);
      return v;
    };
    expect_logits_close(read_shaped(d / "gpu_logits.safetensors", "logits"),
                        read_shaped(d / "cpu_logits.safetensors", "logits"), name);
    std::vector<float> gc(m.layout().total, 0.0f), gg(m.layout().total, 0.0f);
    for (const ParamSpec& s : m.layout().specs) {
      if (!s.trainable()) continue;
      const std::vector<float> a = read_shaped(d / "cpu_grads.safetensors", s.name);
      const std::vector<float> b = read_shaped(d / "gpu_grads.safetensors", s.name);
      std::copy(a.begin(), a.end(), gc.begin() + int64_t(s.offset));
      std::copy(b.begin(), b.end(), gg.begin() + int64_t(s.offset));
    }
    expect_grads_close(m, gg, gc, name);
  }
}

}  // namespace
