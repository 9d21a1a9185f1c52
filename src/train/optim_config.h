// OptimConfig: the [optim] section of a training config (train_config.h lists its keys, defaults
// and value ranges once) — what the optimizer, the schedule and the balancing-bias update read.
#pragma once
#include <algorithm>
#include <cstdint>

#include "train/schedule.h"

namespace zaya {

struct OptimConfig {
  ScheduleKind schedule = ScheduleKind::Cosine;
  double lr = 3e-3;      // peak (Muon and AdamW share it: RMS-matched)
  double min_lr = 3e-4;  // the lr of the last step
  int64_t warmup = 50;
  double decay_fraction = 0.2;  // wsd: the last fraction of steps decays linearly
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 = off
  bool use_muon = true;    // false: AdamW for everything
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int64_t muon_ns_steps = 5;
  bool muon_symmetric = true;  // Newton–Schulz with symmetric rank-k products
  bool muon_bf16 = false;      // Newton–Schulz's products in BF16 (train.device = gpu only)
  double muon_rms_scale = 0.2;
  double adam_beta1 = 0.9, adam_beta2 = 0.95, adam_eps = 1e-8;
  // ZeRO-1 bucket size in MiB of F32 gradients (train/zero_plan.h; 0 = one bucket).
  double zero_bucket_mb = 4;
  double balance_lr = 1e-3, balance_beta1 = 0.9, balance_beta2 = 0.999, balance_eps = 1e-8;
};

// The ZeRO-1 bucket target of make_zero_plan, in elements (0: one bucket; else at least 1).
inline int64_t zero_bucket_elements(const OptimConfig& o) {
  if (o.zero_bucket_mb <= 0) return 0;
  return std::max<int64_t>(1, int64_t(o.zero_bucket_mb * double(1 << 20) / 4.0));
}

// The schedule of a run of `steps` optimizer steps.
inline Schedule make_schedule(const OptimConfig& o, int64_t steps) {
  return Schedule{o.schedule, o.warmup, steps, o.lr, o.min_lr, o.decay_fraction};
}

}  // namespace zaya
