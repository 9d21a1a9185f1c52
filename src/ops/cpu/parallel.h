// Threading rules shared by the CPU ops.
// - Small calls run on the calling thread: a loop touching at most kParallelMin elements is not
//   worth starting an OpenMP team (`#pragma omp parallel for … if (work > kParallelMin)`).
// - Parameter gradients (sums over rows) are reduced by for_column_blocks, so their bits do not
//   depend on the thread count.
// OpenMP pragmas live in kernel templates, never in a ZAYA_DISPATCH_FLOAT argument (a directive
// cannot sit inside a macro argument).
#pragma once
#include <algorithm>
#include <cstdint>

namespace zaya::ops::cpu {

inline constexpr int64_t kParallelMin = 1 << 15;

// Columns per reduction task in for_column_blocks (any value gives the same bits).
inline constexpr int64_t kColBlock = 64;

// For a reduction over N rows into D columns (dw[j] += Σ_n …): calls block(j0, j1) once for each
// block [j0, j1) of at most kColBlock columns, blocks in parallel when N·D is large. A block is one
// task that walks the rows in order, so each column's sum has a fixed order on any thread count.
template <class Block>
void for_column_blocks(int64_t N, int64_t D, Block&& block) {
  const int64_t blocks = (D + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) block(b * kColBlock, std::min(D, (b + 1) * kColBlock));
}

}  // namespace zaya::ops::cpu
