// Blocked sum of squares (grad_clip.h).
#include "train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zaya {

namespace {

// Elements per partial sum: the partition (and so the rounding) is fixed, threads only pick
// which blocks they sum.
constexpr int64_t kNormBlock = 1 << 16;

}  // namespace

double sum_squares(const float* g, int64_t n) {
  const int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
  std::vector<double> part(size_t(blocks), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i1 = std::min(n, (b + 1) * kNormBlock);
    double s = 0;
    for (int64_t i = b * kNormBlock; i < i1; ++i) s += double(g[i]) * double(g[i]);
    part[size_t(b)] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

}  // namespace zaya
