// The sum of squares behind the global gradient norm (system.md §3; the clipping itself is in
// Optimizer::update), in double in a fixed blocked order, so its bits do not depend on the thread
// count.
#pragma once
#include <cstdint>

namespace zaya {

// Σ g[i]² in double over n elements, in fixed blocks (bits independent of the thread count).
double sum_squares(const float* g, int64_t n);

}  // namespace zaya
