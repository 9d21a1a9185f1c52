// Small statistics over samples (benchmarks, the straggler check).
#pragma once
#include <algorithm>
#include <vector>

#include "core/assert.h"

namespace zaya {

// The median (the mean of the two middle values for an even count); v must not be empty.
inline double median(std::vector<double> v) {
  ZAYA_ASSERT(!v.empty(), "median of no samples");
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace zaya
