// Learning-rate schedules (docs/training.md): linear warm-up, then cosine or WSD
// (warmup-stable-decay) down to a floor, or constant.
//
// lr(k) is the rate of optimizer step k (0-based; the step line calls it step s = k + 1 of S =
// `total`, W = `warmup`):
// - warm-up, s ≤ W: peak·s/W — the first step is not wasted at lr 0, step W runs at the peak;
// - Cosine: floor + (peak−floor)·½(1 + cos(π·p)) with p = (s−W)/(S−W) clamped to [0,1]: step W+1
//   is the first one below the peak and the last step S runs at the floor (so does any step
//   beyond S);
// - WSD: peak until the decay's D = round(decay_fraction·S) last steps (never inside the
//   warm-up), then linear: step S−D+j runs at peak − (peak−floor)·j/D, so step S runs at floor;
// - Constant: peak after warm-up.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/enum_words.h"

namespace zaya {

enum class ScheduleKind { Cosine, Wsd, Constant };
template <>
struct EnumWords<ScheduleKind> {
  static constexpr std::pair<ScheduleKind, std::string_view> words[] = {
      {ScheduleKind::Cosine, "cosine"},
      {ScheduleKind::Wsd, "wsd"},
      {ScheduleKind::Constant, "constant"}};
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  int64_t warmup = 0, total = 1;
  double peak = 3e-4, floor = 0;  // floor: the lr of the last step (`total`)
  double decay_fraction = 0.2;    // WSD: final fraction of the steps that decays linearly
  double lr(int64_t step) const;
};

}  // namespace zaya
