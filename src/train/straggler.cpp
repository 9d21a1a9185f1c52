// Straggler detection (straggler.h).
#include "train/straggler.h"

#include <algorithm>

#include "core/assert.h"
#include "core/stats.h"

namespace zaya {

StragglerTracker::StragglerTracker(int world, StragglerConfig c)
    : c_(c), slow_run_(size_t(world), 0), ratio_(size_t(world), 1.0) {}

std::vector<int> StragglerTracker::observe(std::span<const double> seconds) {
  ZAYA_ASSERT(seconds.size() == slow_run_.size(), "{} times for {} ranks", seconds.size(),
              slow_run_.size());
  const size_t n = seconds.size();
  std::vector<double> others;
  std::vector<int> became;
  for (size_t r = 0; r < n; ++r) {
    others.assign(seconds.begin(), seconds.end());
    others.erase(others.begin() + ptrdiff_t(r));
    const double mid = n > 1 ? median(others) : seconds[r];
    ratio_[r] = mid > 0 ? seconds[r] / mid : 1.0;
    if (n > 1 && ratio_[r] > c_.factor && seconds[r] - mid > c_.min_excess_s) {
      if (++slow_run_[r] == c_.steps) became.push_back(int(r));
    } else {
      slow_run_[r] = 0;
    }
  }
  return became;
}

std::vector<int> StragglerTracker::current() const {
  std::vector<int> out;
  for (size_t r = 0; r < slow_run_.size(); ++r)
    if (slow_run_[r] >= c_.steps) out.push_back(int(r));
  return out;
}

}  // namespace zaya
