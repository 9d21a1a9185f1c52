// Learning-rate schedules (schedule.h).
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace zaya {

double Schedule::lr(int64_t step) const {
  const int64_t s = step + 1;  // 1-based: the step line's number
  if (s <= warmup) return peak * double(s) / double(warmup);
  switch (kind) {
    case ScheduleKind::Constant:
      return peak;
    case ScheduleKind::Cosine: {
      const int64_t span = total - warmup;
      const double p = span <= 0 ? 1.0 : std::clamp(double(s - warmup) / double(span), 0.0, 1.0);
      return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * p));
    }
    case ScheduleKind::Wsd: {
      const int64_t decay = std::llround(decay_fraction * double(total));
      const int64_t start = std::max(warmup, total - decay);  // the last step at the peak
      if (s <= start) return peak;
      if (s >= total) return floor;
      return peak + (floor - peak) * double(s - start) / double(total - start);
    }
  }
  return peak;
}

}  // namespace zaya
