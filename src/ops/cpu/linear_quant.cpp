// linear_forward with block-quantized weights on the CPU (inference). Each call quantizes x once
// (quant/dot.h: 8-bit blocks of 32 or 256 values) and computes every output as one dot product of
// a weight row with an activation row, by one task, in one register tile of the kernels
// (quant::DotKernels::dot). dot.h defines each product exactly, so the result does not depend on
// the tile, the regime, the ISA or the thread count: a sequence's logits are the same decoded alone
// or in a batch.
//
// Two regimes, both on the stealing team (ops/cpu/stealing.h):
// - N = 1 (decode): the rows are split into chunks of ~64 KB of weights; each thread streams its
//   own range DotKernels::gemv_rows rows at a time and takes the others' last chunks when done
//   early. Bound by memory bandwidth: the weights are read once, the activation row
//   stays in L1.
// - N > 1 (batched decode, prefill): a blocked GEMM on integer dot products. A task owns a block of
//   rows small enough to stay in L2 (~256 KB of weights; ~64 KB for few inputs, so that the tasks
//   balance) and walks the inputs in tiles that stay in L1 (~16 KB of activations); within them,
//   register tiles (DotKernels::tile_rows × tile_cols: 1 × 8 or 2 × 4 on AVX2) unpack each weight
//   block once per 8 or 4 inputs and load each activation block once per tile row. The weights are
//   read from memory once per call.
#include "ops/cpu/linear_quant.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/parallel.h"
#include "ops/cpu/stealing.h"
#include "quant/dot.h"

namespace zaya::ops::cpu {

namespace {

constexpr int64_t kStealChunkBytes = int64_t(64) << 10;  // N = 1: weight bytes per chunk
constexpr int64_t kL2WeightBytes = int64_t(256) << 10;   // N > 1: weight rows per task
constexpr int64_t kL1ActBytes = int64_t(16) << 10;       // N > 1: activation rows per input tile

// The quantized activations of one call: a reused thread-local buffer, rows 64-byte aligned.
uint8_t* act_buffer(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - p % 64) % 64);
}

// n rounded down to a multiple of m, at least m.
int64_t multiple(int64_t n, int64_t m) {
  return std::max(n, m) / m * m;
}

}  // namespace

void linear_quant_forward(float* y_NO, const float* x_NI, const void* w_OI, DType t,
                          const float* b_O, int64_t N, int64_t O, int64_t I, bool accumulate) {
  if (N == 0 || O == 0) return;
  const quant::DotKernels& k = quant::dot_kernels(t);
  const size_t as = quant::act_row_bytes(t, I), ws = dtype_bytes(t, I);
  uint8_t* act = act_buffer(as * size_t(N));
  const uint8_t* w = static_cast<const uint8_t*>(w_OI);
  for_chunks_stealing(N, std::max<int64_t>(1, kL1ActBytes / std::max<int64_t>(1, I)),
                      N * I > kParallelMin, [&](int64_t n0, int64_t n1) {
                        for (int64_t n = n0; n < n1; ++n) k.quantize(x_NI + n * I, act + n * as, I);
                      });
  auto put = [&](int64_t n, int64_t o, float dot) {
    float& out = y_NO[n * O + o];
    out = (accumulate ? out : 0.0f) + (b_O ? b_O[o] : 0.0f) + dot;
  };

  if (N == 1) {
    const int64_t R = k.gemv_rows;
    for_chunks_stealing(O, multiple(kStealChunkBytes / int64_t(ws), R), O * I > kParallelMin,
                        [&](int64_t o0, int64_t o1) {
                          float dots[quant::kMaxRows];
                          for (int64_t o = o0; o < o1; o += R) {
                            const int r = int(std::min(R, o1 - o));
                            k.dot(w + o * ws, ws, r, act, as, 1, I, dots, R);
                            for (int i = 0; i < r; ++i) put(0, o + i, dots[i]);
                          }
                        });
    return;
  }

  const int64_t TR = k.tile_rows, TC = k.tile_cols;
  const int64_t rows = multiple((N <= 16 ? kStealChunkBytes : kL2WeightBytes) / int64_t(ws), TR);
  const int64_t cols = multiple(kL1ActBytes / int64_t(as), TC);
  for_chunks_stealing(O, rows, N * O * I > kParallelMin, [&](int64_t o0, int64_t o1) {
    float dots[quant::kMaxRows * quant::kMaxCols];
    for (int64_t n0 = 0; n0 < N; n0 += cols) {
      const int64_t n1 = std::min(N, n0 + cols);
      for (int64_t o = o0; o < o1; o += TR) {
        const int r = int(std::min(TR, o1 - o));
        for (int64_t n = n0; n < n1; n += TC) {
          const int c = int(std::min(TC, n1 - n));
          k.dot(w + o * ws, ws, r, act + n * as, as, c, I, dots, TR);
          for (int j = 0; j < c; ++j)
            for (int i = 0; i < r; ++i) put(n + j, o + i, dots[j * TR + i]);
        }
      }
    }
  });
}

}  // namespace zaya::ops::cpu
