// `zaya bench step`'s parts (cli/bench_step.cpp runs them): the flags, the temporary dataset of
// random tokens, and the split of a step's wall time by op family (ops/profile.h's entries).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "ops/precision.h"
#include "ops/profile.h"
#include "train/train_config.h"

namespace zaya::cli::bench_step {

enum class Optimizer { AdamW, Muon };

}  // namespace zaya::cli::bench_step

template <>
struct zaya::EnumWords<zaya::cli::bench_step::Optimizer> {
  static constexpr std::pair<cli::bench_step::Optimizer, std::string_view> words[] = {
      {cli::bench_step::Optimizer::AdamW, "adamw"}, {cli::bench_step::Optimizer::Muon, "muon"}};
};

namespace zaya::cli::bench_step {

struct Args {
  std::string config;  // "": configs/models/step-bench.json (cpu), gpu-step-bench.json (gpu)
  Optimizer optimizer = Optimizer::AdamW;
  Device device = Device::Cpu;
  // Empty: fp32 on the CPU, bf16 on the GPU (resolved from the device's defaults).
  std::optional<ops::MatmulPrecision> precision;
  ActivationsSetting activations = ActivationsSetting::Auto;
  int64_t batch = 0, seq_len = 0;  // 0: the device's default (kDefaults)
  int64_t steps = 4, warmup = 1, threads = 0;
  int64_t probe_size = 8192;  // the GPU GEMM probe's n (n³ products)
  int64_t profile_steps = 1;  // GPU: profiled steps after the timed ones
  uint64_t seed = 1;
  bool json = false;
};

// The defaults each device fills in (docs/training.md and --help say the same).
struct DeviceDefaults {
  const char* config;
  int64_t batch, seq_len;
  ops::MatmulPrecision precision;
};
inline constexpr DeviceDefaults kCpuDefaults{"configs/models/step-bench.json", 2, 512,
                                             ops::MatmulPrecision::F32};
// 36 ZAYA1-base sub-layers, 2 × 4096 tokens: sized to fit one H200 in fp32 training
// (configs/models/gpu-step-bench.md).
inline constexpr DeviceDefaults kGpuDefaults{"configs/models/gpu-step-bench.json", 2, 4096,
                                             ops::MatmulPrecision::BF16};

// A dataset directory of uniform random tokens, removed when done.
class SyntheticDataset {
 public:
  SyntheticDataset(int64_t vocab, int64_t train_tokens, uint64_t seed);
  ~SyntheticDataset();
  SyntheticDataset(const SyntheticDataset&) = delete;
  SyntheticDataset& operator=(const SyntheticDataset&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Profiled steps summed: seconds per profile entry and per op family, the host's time inside
// collectives (heartbeat), and what is left ("outside ops": the trainer's own code, host work,
// and on the GPU the device copies it queued outside any op).
class Split {
 public:
  void add(const std::vector<ops::profile::OpTime>& entries, double wall, double comm);
  // (family, seconds) over all added steps, "communication" and "outside ops" included, largest
  // first; the seconds sum to the steps' wall time.
  std::vector<std::pair<std::string, double>> families() const;
  // Calls and seconds per entry, summed over the steps.
  const std::map<std::string, std::pair<int64_t, double>>& entries() const { return entries_; }
  double wall() const { return wall_; }
  int64_t steps() const { return steps_; }
  // Whether gemm() regions were seen ("moe_forward/gemm" …: the GPU's GEMMs split out of the
  // ops that run them), which names the families (family_of).
  bool has_gemm_regions() const;

 private:
  std::map<std::string, std::pair<int64_t, double>> entries_;
  double wall_ = 0, ops_ = 0, comm_ = 0;
  int64_t steps_ = 0;
};

// The family of a profile entry ("linear_forward", "moe_backward/gemm"). With gemm regions, the
// GEMMs of linear, MoE and LM head ops form one family, and what remains of the MoE ops is
// "MoE dispatch"; without, MoE and LM head ops are whole (their GEMMs included).
std::string family_of(const std::string& entry, bool gemm_regions);

}  // namespace zaya::cli::bench_step
