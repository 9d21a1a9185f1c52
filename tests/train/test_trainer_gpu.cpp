// `zaya train` with train.device = gpu (fp32) against the CPU trainer on the tiny model
// and a synthetic byte dataset: the same config gives the CPU's step losses within 1e-4
// relative (and its validation losses; the end-of-run sample runs), a GPU checkpoint has the CPU's
// files and tensors (weights and optimizer state within the GPU's F32 tolerance, after steps that
// clipped their gradients) and resumes on the CPU, and a CPU checkpoint resumes on the GPU, both
// continuing the uninterrupted CPU run's losses within 1e-4. train.precision = bf16 on the GPU
// stays within 2e-2 of the fp32 CPU losses, falls, and differs from fp32 (the rounding happens).
// Steps: ZAYA_GPU_TRAIN_STEPS (default 5, small for the emulator; 20 on a device).
// Every test skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/log.h"
#include "gpu_test_util.h"
#include "io/safetensors.h"
#include "train/tiny_data.h"
#include "train/trainer.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

constexpr double kLossRel = 1e-4;      // fp32 GPU losses vs the CPU trainer's
constexpr double kBf16LossRel = 2e-2;  // bf16 GPU losses vs the fp32 CPU trainer's

int64_t train_steps() {
  const char* env = std::getenv("ZAYA_GPU_TRAIN_STEPS");
  const int64_t n = env && *env ? std::atoll(env) : 5;
  return std::max<int64_t>(n, 2);
}

// tiny.json, seq_len 16, 2 rows × 2 micro-batches, one validation batch, checkpoints at the end.
TrainConfig tiny_gpu_run(const ScratchDir& dir, const std::string& name, const std::string& shards,
                         const std::string& device) {
  TrainConfig c = tiny_run(dir, name, shards);
  c.device = *parse_enum<Device>(device);
  c.micro_batch = 2;
  c.grad_accum = 2;
  c.steps = train_steps();
  c.optim.warmup = 1;
  c.eval_batches = 1;
  return c;
}

struct StepRow {
  int64_t step = 0;
  double loss = 0, grad_norm = 0;
};

std::vector<StepRow> read_steps(const std::string& metrics) {
  std::vector<StepRow> rows;
  std::ifstream f(metrics);
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    rows.push_back(
        {j.at("step").get<int64_t>(), j.at("loss").get<double>(), j.at("grad_norm").get<double>()});
  }
  return rows;
}

double rel(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
}

// Steps [from, to] of `got` against the same steps of `want` (1-based, whole runs): losses within
// `tolerance` (relative); returns the largest relative loss difference and prints each step.
double expect_losses_close(const std::vector<StepRow>& got, const std::vector<StepRow>& want,
                           int64_t from, int64_t to, const std::string& what,
                           double tolerance = kLossRel) {
  double worst = 0;
  EXPECT_GE(int64_t(got.size()), to) << what;
  EXPECT_GE(int64_t(want.size()), to) << what;
  if (int64_t(got.size()) < to || int64_t(want.size()) < to) return NAN;
  for (int64_t s = from; s <= to; ++s) {
    const StepRow& g = got[size_t(s - 1)];
    const StepRow& w = want[size_t(s - 1)];
    EXPECT_EQ(g.step, s) << what;
    const double d = rel(g.loss, w.loss);
    worst = std::max(worst, d);
    EXPECT_LE(d, tolerance) << what << " step " << s << ": loss " << g.loss << " vs " << w.loss;
    std::printf("%s step %lld: loss %.9g vs cpu %.9g (rel %.2e), grad_norm %.6g vs %.6g\n",
                what.c_str(), (long long)s, g.loss, w.loss, d, g.grad_norm, w.grad_norm);
  }
  std::printf("%s: steps %lld-%lld, largest relative loss difference %.3e\n", what.c_str(),
              (long long)from, (long long)to, worst);
  return worst;
}

// Every file of a checkpoint directory, relative to it.
std::set<std::string> files_of(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

// A stored tensor's values as doubles (F32 or BF16; the data may be unaligned).
std::vector<double> values_of(const SafeTensorInfo& t) {
  std::vector<double> v(size_t(t.numel()));
  const char* p = static_cast<const char*>(t.data);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::F32) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      v[i] = f;
    } else if (t.dtype == DType::BF16) {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      v[i] = bf16_to_f32(b);
    } else {
      ADD_FAILURE() << t.name << ": dtype " << dtype_name(t.dtype);
      break;
    }
  }
  return v;
}

// Every tensor of the safetensors file `rel` in checkpoint `got` against the same tensor of `want`:
// the same dtype and shape, and values within the GPU's F32 tolerance (normalised MSE ≤ 1e-7 per
// tensor: the loss tolerance alone would pass a GPU that trained some tensors wrongly); prints the
// largest NMSE.
void expect_tensors_close(const std::string& got, const std::string& want, const std::string& rel,
                          const std::string& what) {
  const SafeTensors a = SafeTensors::open_file(got + rel), b = SafeTensors::open_file(want + rel);
  ASSERT_EQ(a.names(), b.names()) << what << rel;
  double worst = 0;
  std::string worst_name;
  for (const std::string& name : b.names()) {
    const SafeTensorInfo &x = a.at(name), &y = b.at(name);
    ASSERT_EQ(x.dtype, y.dtype) << what << " " << name;
    ASSERT_EQ(x.shape, y.shape) << what << " " << name;
    const std::vector<double> gv = values_of(x), cv = values_of(y);
    double num = 0, den = 0, big = -1;
    size_t at = 0;
    for (size_t i = 0; i < gv.size(); ++i) {
      const double d = gv[i] - cv[i];
      num += d * d;
      den += cv[i] * cv[i];
      if (!(std::fabs(d) <= big)) big = std::fabs(d), at = i;  // NaN-safe
    }
    const double nmse = den > 0 ? num / den : (num == 0 ? 0 : INFINITY);
    EXPECT_LE(nmse, kGpuF32Nmse) << what << rel << " " << name << ": NMSE " << nmse
                                 << "; worst element " << at << " gpu " << gv[at] << " cpu "
                                 << cv[at];
    if (!(nmse <= worst)) worst = nmse, worst_name = name;
  }
  std::printf("%s %s: %zu tensors, largest NMSE %.3e (%s)\n", what.c_str(), rel.c_str(),
              b.names().size(), worst, worst_name.c_str());
}

// tests/fixtures's toy tokenizer cut to the ids below tiny.json's vocabulary (512; its merges all
// make larger ids, so none is kept): the end-of-run sample then runs, from a GPU model's host copy.
std::string tiny_tokenizer(const ScratchDir& dir) {
  std::ifstream in(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json");
  nlohmann::json t = nlohmann::json::parse(in);
  nlohmann::json vocab = nlohmann::json::object();
  for (const auto& [token, id] : t["model"]["vocab"].items())
    if (id.get<int64_t>() < 512) vocab[token] = id;
  t["model"]["vocab"] = vocab;
  t["model"]["merges"] = nlohmann::json::array();
  const std::string path = dir / "tokenizer.json";
  std::ofstream(path) << t.dump();
  return path;
}

}  // namespace

TEST(GpuTrain, LossesMatchTheCpuTrainer) {
  ZAYA_REQUIRE_GPU();
  ScratchDir dir;
  const std::string shards = make_tiny_dataset(dir);
  for (bool muon : {true, false}) {
    const std::string tag = muon ? "muon" : "adamw";
    TrainConfig cpu = tiny_gpu_run(dir, "cpu_" + tag, shards, "cpu");
    TrainConfig gpu = tiny_gpu_run(dir, "gpu_" + tag, shards, "gpu");
    cpu.optim.use_muon = gpu.optim.use_muon = muon;
    cpu.tokenizer = gpu.tokenizer = tiny_tokenizer(dir);
    cpu.sample_tokens = gpu.sample_tokens = 4;
    const TrainSummary want = run_training(cpu, {.quiet = true});
    set_log_level(LogLevel::Info);                   // the quiet CPU run turned logging off
    const TrainSummary got = run_training(gpu, {});  // its log shows the device and the sample
    EXPECT_EQ(got.steps_done, cpu.steps) << tag;
    EXPECT_EQ(got.skipped, 0) << tag;
    expect_losses_close(read_steps(gpu.metrics), read_steps(cpu.metrics), 1, cpu.steps,
                        "gpu " + tag);
    EXPECT_LE(rel(got.first_val_loss, want.first_val_loss), kLossRel) << tag;
    EXPECT_LE(rel(got.last_val_loss, want.last_val_loss), kLossRel) << tag;
    std::printf("gpu %s: val loss %.9g → %.9g, cpu %.9g → %.9g\n", tag.c_str(), got.first_val_loss,
                got.last_val_loss, want.first_val_loss, want.last_val_loss);
    // The clipping scale was applied on the GPU (a step's norm above optim.grad_clip).
    const std::vector<StepRow> rows = read_steps(gpu.metrics);
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(),
                            [&](const StepRow& r) { return r.grad_norm > gpu.optim.grad_clip; }))
        << tag << ": no step clipped its gradients";
    // The same checkpoint files, tensor for tensor: the weights and the optimizer state.
    const std::string name = "/" + checkpoint_dir_name(cpu.steps);
    const std::string a = gpu.checkpoint_dir + name, b = cpu.checkpoint_dir + name;
    EXPECT_EQ(files_of(a), files_of(b)) << tag;
    for (const char* f : {"/model/model.safetensors", "/optimizer/optimizer_rank00000.safetensors"})
      expect_tensors_close(a, b, f, "gpu " + tag);
  }
}

// train.precision = bf16: the GEMM inputs rounded to bf16 (ops/precision.h) and (train.activations
// = auto) the saved activations stored in bf16 (model/activations.h), the rest fp32.
TEST(GpuTrain, Bf16LossesFollowTheFp32CpuTrainer) {
  ZAYA_REQUIRE_GPU();
  ScratchDir dir;
  const std::string shards = make_tiny_dataset(dir);
  TrainConfig cpu = tiny_gpu_run(dir, "cpu", shards, "cpu");
  TrainConfig gpu = tiny_gpu_run(dir, "gpu_bf16", shards, "gpu");
  gpu.precision = ops::MatmulPrecision::BF16;
  run_training(cpu, {.quiet = true});
  const TrainSummary got = run_training(gpu, {.quiet = true});
  EXPECT_EQ(got.steps_done, cpu.steps);
  const std::vector<StepRow> rows = read_steps(gpu.metrics);
  const double worst =
      expect_losses_close(rows, read_steps(cpu.metrics), 1, cpu.steps, "gpu bf16", kBf16LossRel);
  // Rounded inputs move the losses off fp32's (fp32 GPU vs CPU differ by ~1e-8): bf16 happened.
  EXPECT_GT(worst, 1e-6) << "bf16 losses equal the fp32 ones: was the precision applied?";
  ASSERT_FALSE(rows.empty());
  EXPECT_LT(rows.back().loss, rows.front().loss) << "bf16 training does not lower the loss";
  std::printf(
      "gpu bf16 (GEMM inputs and stored activations) vs fp32 cpu, %lld steps: max rel loss "
      "diff %.3e, loss %.4f → %.4f\n",
      static_cast<long long>(cpu.steps), worst, rows.front().loss, rows.back().loss);
}

// Half the steps on one device, the rest on the other (resume = auto from the first half's
// checkpoint): the second half's losses are the uninterrupted CPU run's. The GPU writes its
// checkpoint asynchronously (the staging snapshot reads device memory), the CPU synchronously.
TEST(GpuTrain, CheckpointsResumeAcrossDevices) {
  ZAYA_REQUIRE_GPU();
  ScratchDir dir;
  const std::string shards = make_tiny_dataset(dir);
  TrainConfig straight = tiny_gpu_run(dir, "straight", shards, "cpu");
  run_training(straight, {.quiet = true});
  const std::vector<StepRow> want = read_steps(straight.metrics);
  const int64_t half = straight.steps / 2;
  for (const std::string first : {"gpu", "cpu"}) {
    const std::string second = first == "gpu" ? "cpu" : "gpu";
    TrainConfig c = tiny_gpu_run(dir, first + "_then_" + second, shards, first);
    c.async_checkpoint = first == "gpu";
    const TrainSummary a = run_training(c, {.quiet = true, .stop_at_step = half});
    EXPECT_EQ(a.steps_done, half);
    ASSERT_TRUE(fs::exists(c.checkpoint_dir + "/" + checkpoint_dir_name(half))) << first;
    c.device = *parse_enum<Device>(second);
    const TrainSummary b = run_training(c, {.quiet = true});  // resume = auto
    EXPECT_EQ(b.steps_done, straight.steps) << first << " then " << second;
    const std::vector<StepRow> got = read_steps(c.metrics);  // cut back and continued
    ASSERT_EQ(int64_t(got.size()), straight.steps) << first << " then " << second;
    expect_losses_close(got, want, half + 1, straight.steps, first + " then " + second);
  }
}
