// `mpirun -np 2 zaya train --set train.device=gpu` (the NCCL group, ZeRO-1 on GPU buckets)
// against the same 2-rank run on the CPU (the mpi group): every step's loss within 1e-4
// relative, with one ZeRO-1 bucket (Muon) and with one per layer (AdamW: the reduce-scatters
// overlap the backward) (label mpi; skipped without a GPU, mpirun or a
// loadable NCCL; scripts/gpu_emu/run.sh test_integration_nccl_train_mpirun runs it emulated).
// Steps: ZAYA_GPU_TRAIN_STEPS (default 3, small for the emulator), Muon and AdamW as configured.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "cli_util.h"
#include "dist/nccl.h"
#include "gpu_test_util.h"
#include "test_skips.h"
#include "train/tiny_data.h"

using namespace zaya;
using namespace zaya::test;

namespace {

constexpr double kLossRel = 1e-4;  // fp32 GPU losses vs the CPU trainer's

int64_t train_steps() {
  const char* env = std::getenv("ZAYA_GPU_TRAIN_STEPS");
  return std::max<int64_t>(env && *env ? std::atoll(env) : 3, 2);
}

// Runs `zaya train` on 2 ranks with `sets`; returns the log (rank 0 speaks).
std::string train(const ScratchDir& dir, const std::string& name, const std::string& sets) {
  const std::string log = dir / (name + ".log");
  const std::string cmd =
      "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=600 mpirun --oversubscribe "
      "--allow-run-as-root -np 2 -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x "
      "ZAYA_DIST_TIMEOUT -x ZAYA_NCCL_LIB " +
      std::string(ZAYA_BINARY) + " train --config " + dir / "run.toml" +
      " --set train.metrics=" + dir / (name + ".jsonl") +
      " --set checkpoint.dir=" + dir / (name + "_ckpt") + " " + sets + " >" + log +
      " 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  const std::string out = slurp(log);
  EXPECT_EQ(status, 0) << cmd << "\n" << out;
  return out;
}

std::map<int64_t, double> losses(const std::string& metrics) {
  std::map<int64_t, double> out;
  std::ifstream f(metrics);
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    out[j.at("step").get<int64_t>()] = j.at("loss").get<double>();
  }
  return out;
}

}  // namespace

TEST(GpuNcclTrain, TwoGpuRanksMatchTwoCpuRanks) {
  ZAYA_REQUIRE_GPU();
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    ZAYA_SKIP(NoMpirun) << "no mpirun on the PATH";
  try {
    dist::open_nccl_library();
  } catch (const Error& e) {
    ZAYA_SKIP(NoNccl) << e.what();
  }
  ScratchDir dir;
  const int64_t steps = train_steps();
  write_tiny_toml(
      dir / "run.toml", make_tiny_dataset(dir),
      "micro_batch = 2\ngrad_accum = 2\nsteps = " + std::to_string(steps) +
          "\nlog_every = 1\neval_batches = 1\n",
      "[optim]\nwarmup = 1\nlr = 0.003\nmin_lr = 0.0003\n[checkpoint]\nkeep_last = 0\n");
  for (const std::string muon : {"true", "false"}) {
    const std::string tag = muon == "true" ? "muon" : "adamw";
    // AdamW with ZeRO-1 buckets of ~26 elements: every layer's reduce-scatter is started on the
    // communication stream while the backward goes on (Muon: one bucket, after the backward).
    const std::string sets = "--set optim.use_muon=" + muon +
                             (muon == "true" ? "" : " --set optim.zero_bucket_mb=0.0001");
    const std::string cpu_log = train(dir, "cpu_" + tag, sets);
    const std::string gpu_log = train(dir, "gpu_" + tag, sets + " --set train.device=gpu");
    EXPECT_NE(cpu_log.find("train: 2 rank(s) (mpi)"), std::string::npos) << cpu_log;
    EXPECT_NE(gpu_log.find("train: 2 rank(s) (nccl)"), std::string::npos) << gpu_log;
    const auto want = losses(dir / ("cpu_" + tag + ".jsonl"));
    const auto got = losses(dir / ("gpu_" + tag + ".jsonl"));
    ASSERT_EQ(int64_t(want.size()), steps) << cpu_log;
    ASSERT_EQ(int64_t(got.size()), steps) << gpu_log;
    double worst = 0;
    for (const auto& [step, loss] : want) {
      const double rel = std::fabs(got.at(step) - loss) / std::fabs(loss);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, kLossRel) << tag << " step " << step << ": gpu " << got.at(step) << " cpu "
                               << loss;
      std::printf("%s step %lld: loss gpu (nccl) %.9g vs cpu (mpi) %.9g, rel %.2e\n", tag.c_str(),
                  (long long)step, got.at(step), loss, rel);
    }
    std::printf(
        "%s: 2 GPU ranks vs 2 CPU ranks, %lld steps, largest relative loss difference "
        "%.3e\n",
        tag.c_str(), (long long)steps, worst);
  }
}
