// Five optimizer steps (AdamW-only and Muon) from the same weights and batches as the float64
// PyTorch twin (scripts/reference/make_optim_vectors.py → tests/fixtures/optim/<case>/): the losses
// within 1e-4 relative, pre-clip gradient norms within 1e-4 relative, final weights within 1e-3
// relative L2 per tensor. A step (the trainer's): forward over each window's first T tokens,
// backward of the mean loss against the next tokens, routing counts over B·T tokens, clip +
// update at lr = schedule(k), balancing-bias update.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/transformer.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "train/schedule.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

constexpr double kLossRel = 1e-4, kNormRel = 1e-4, kWeightRelL2 = 1e-3;

const fs::path kCase = fs::path(ZAYA_TEST_FIXTURES) / "optim" / "tiny_a";

std::vector<double> read_f64(const SafeTensors& st, const std::string& name, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  st.read_into(name, Tensor(v.data(), {n}));
  return v;
}

void run_case(const std::string& run) {
  std::ifstream f(kCase / "meta.json");
  ASSERT_TRUE(f.good());
  const nlohmann::json meta = nlohmann::json::parse(f);
  const nlohmann::json& rc = meta["runs"][run];
  const nlohmann::json& sc = meta["schedule"];
  ASSERT_EQ(sc["kind"], "cosine");
  const Schedule sched{ScheduleKind::Cosine, sc["warmup"], sc["total"],
                       sc["peak"],           sc["floor"],  0.2};
  OptimConfig cfg;
  cfg.use_muon = rc["use_muon"];
  cfg.weight_decay = rc["weight_decay"];
  cfg.grad_clip = rc["grad_clip"];
  cfg.balance_lr = rc["balance_lr"];
  const int64_t B = meta["B"], S = meta["steps"];

  Model m = Model::load_dir(kCase.string());
  const TokenLines tl = read_token_lines((kCase / "tokens.txt").string(), m.config().vocab_size);
  ASSERT_EQ(tl.rows, B * S);
  // Each line is a window of T + 1 tokens: the model reads the first T, the targets are the T
  // after the first (the trainer's step).
  const int64_t T = tl.cols - 1;
  Optimizer opt(m, cfg);
  Activations a(m.config(), B, T);
  std::vector<int32_t> inputs(size_t(B * T)), targets(inputs.size());
  auto forward = [&](int64_t batch) {
    for (int64_t r = 0; r < B; ++r)
      for (int64_t t = 0; t < T; ++t) {
        inputs[size_t(r * T + t)] = tl.ids[size_t((batch * B + r) * tl.cols + t)];
        targets[size_t(r * T + t)] = tl.ids[size_t((batch * B + r) * tl.cols + t + 1)];
      }
    return model_forward(m, a, inputs.data(), targets.data());
  };
  std::vector<double> losses, norms;
  for (int64_t k = 0; k < S; ++k) {
    m.zero_grads();
    losses.push_back(forward(k));
    RoutingCounts counts(m.config());
    counts.add(m.config(), a);
    model_backward(m, a, 1.0 / double(B * T));
    norms.push_back(opt.step(m, sched.lr(k)));
    opt.update_balancing_biases(m, counts);
  }
  losses.push_back(forward(0));
  EXPECT_EQ(opt.steps(), S);

  const SafeTensors want = SafeTensors::open_file((kCase / "expected.safetensors").string());
  const std::vector<double> wl = read_f64(want, run + ".loss", S + 1);
  const std::vector<double> wn = read_f64(want, run + ".grad_norm", S);
  double worst = 0;
  for (int64_t k = 0; k <= S; ++k) worst = std::max(worst, std::fabs(losses[k] - wl[k]) / wl[k]);
  std::printf("%s: worst relative loss difference to the twin %.2e\n", run.c_str(), worst);
  for (int64_t k = 0; k <= S; ++k)
    EXPECT_LE(std::fabs(losses[k] - wl[k]), kLossRel * std::fabs(wl[k]))
        << run << " loss " << k << ": " << losses[k] << " vs twin " << wl[k];
  for (int64_t k = 0; k < S; ++k)
    EXPECT_LE(std::fabs(norms[k] - wn[k]), kNormRel * wn[k])
        << run << " grad norm " << k << ": " << norms[k] << " vs twin " << wn[k];
  EXPECT_GT(*std::max_element(wn.begin(), wn.end()), cfg.grad_clip) << "clipping never active";

  for (const ParamSpec& s : m.layout().specs) {
    std::vector<float> ref(size_t(s.numel()));
    Tensor dst(ref.data(), {s.numel()});
    dst.ndim = int(s.shape.size());
    for (int i = 0; i < dst.ndim; ++i) dst.shape[size_t(i)] = s.shape[size_t(i)];
    want.read_into(run + "/" + s.name, dst);
    const float* got = m.params() + s.offset;
    if (s.trainable())
      EXPECT_LE(rel_l2(got, ref.data(), ref.size()), kWeightRelL2) << run << " " << s.name;
    else
      expect_close(got, ref.data(), ref.size(), 1e-6, 1e-5, s.name.c_str());
  }
}

}  // namespace

TEST(OptimizerVsTwin, FiveAdamWSteps) {
  run_case("adamw");
}

TEST(OptimizerVsTwin, FiveMuonSteps) {
  run_case("muon");
}
