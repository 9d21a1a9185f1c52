// Learning-rate schedules (system.md §3): linear warm-up, then cosine or WSD
// (warmup-stable-decay) down to a floor, or constant.
//
// lr(step) is the rate of optimizer step `step` (0-based):
// - warm-up, step < warmup: peak·(step+1)/warmup (the first step is not wasted at lr 0; step
//   warmup−1 runs at peak);
// - Cosine: floor + (peak−floor)·½(1 + cos(π·p)), p = (step−warmup)/(total−warmup) clamped to
//   [0,1], so step `total` (and beyond) runs at floor;
// - WSD: peak until decay_start = total − round(decay_fraction·total), then linear from peak at
//   decay_start to floor at `total` (and floor beyond);
// - Constant: peak after warm-up.
#pragma once
#include <cstdint>

namespace zaya {

struct Schedule {
  enum Kind { Cosine, WSD, Constant };
  Kind kind = Cosine;
  int64_t warmup = 0, total = 1;
  double peak = 3e-4, floor = 0;  // floor: the minimum lr reached at `total`
  double decay_fraction = 0.2;    // WSD: final fraction of the steps that decays linearly
  double lr(int64_t step) const;
};

}  // namespace zaya
