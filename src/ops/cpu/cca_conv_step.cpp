// cca_conv_step_forward on the CPU: the two-stage CCA conv (docs/model.md §4.2) continued from a carried
// state, for decoding (docs/model.md §4.8). Activations F32; the conv weights F32 or BF16 (a bf16 model's
// conv weights stay bf16, like its matrices); no backward.
//
// Legend: L new positions, C channels, d group width, G = C/d groups. The chunk's raw columns are
// ext = [s0 ; s1 ; u_0 … u_{L−1}] (s0 = u_{−2}, s1 = u_{−1} relative to the chunk, zeros at the
// sequence start). Stage 0 for chunk-local j = −1 … L−1 reads ext rows j+1 (tap 0) and j+2 (tap 1):
//   y_j[c] = b0[c] + w0[c,0,0]·ext[j+1][c] + w0[c,0,1]·ext[j+2][c]
// so a zero state gives y_{−1} = b0, exactly cca_conv_forward's padding row. Stage 1:
//   z_t[c] = b1[c] + Σ_i w1[c,i,0]·y_{t−1}[g·d+i] + w1[c,i,1]·y_t[g·d+i],  g = ⌊c/d⌋.
// Stage 1 reads w1[c] in its stored order against the interleaved pair (y_{t−1}[i], y_t[i]), so a
// decode step needs no transposed copy of w1; with BF16 weights stage 1 of a group is the bf16
// GEMV (linear_bf16_forward) over the group's [d, 2d] rows. The sum order differs from
// cca_conv_forward's (equal to rounding, not bitwise). Groups are split over threads; each z
// element is one task's fixed-order sum, so bits do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/stealing.h"

namespace zaya::ops::cpu {

namespace {

constexpr int kLanes = 16;  // fixed accumulator lanes: the dot product vectorises, order is fixed

// Σ_e a[e]·b[e] over n elements in kLanes fixed lanes, then the tail, then the lanes in order.
inline float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[e + l] * b[e + l];
  float s = 0;
  for (; e < n; ++e) s += a[e] * b[e];
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// Stage 1 of one group g for all L positions: z_g[L,d] = b1_g + pair_g[L,2d] · w1_gᵀ, w1_g the
// group's rows of w1 viewed as [d, 2d] (F32: fixed-lane dot products; BF16: the bf16 GEMV).
void stage1_group(float* zg_Ld, const float* pair_L2d, const Tensor& w1, const float* b1_d,
                  int64_t g, int64_t L, int64_t d) {
  if (w1.dtype == DType::BF16) {
    linear_bf16_forward(zg_Ld, pair_L2d, w1.ptr<uint16_t>() + g * d * 2 * d, b1_d, L, d, 2 * d,
                        false);
    return;
  }
  const float* w = w1.ptr<float>() + g * d * 2 * d;
  for (int64_t t = 0; t < L; ++t)
    for (int64_t i = 0; i < d; ++i)
      zg_Ld[t * d + i] = b1_d[i] + dot_lanes(w + i * 2 * d, pair_L2d + t * 2 * d, 2 * d);
}

// z[L,C]; state[2,C] advanced in place; u[L,C]; w0[C,2], b0[C], w1[C,d,2], b1[C] (w0 and w1 F32
// or BF16, the rest F32).
void step_forward(float* z_LC, float* state_2C, const float* u_LC, const Tensor& w0,
                  const float* b0_C, const Tensor& w1, const float* b1_C, int64_t L, int64_t C,
                  int64_t d) {
  auto ext = [&](int64_t r) {  // row r of [state ; u]
    return r < 2 ? state_2C + r * C : u_LC + (r - 2) * C;
  };
  std::vector<float> w0_wide;  // stage 0's 2C weights in f32
  const float* w0_C2 = w0.dtype == DType::F32 ? w0.ptr<float>() : nullptr;
  if (!w0_C2) {
    w0_wide.resize(size_t(2 * C));
    widen_bf16(w0_wide.data(), w0.ptr<uint16_t>(), 2 * C);
    w0_C2 = w0_wide.data();
  }
  // pair_GL2d[g][t][i][k] = y_{t−1+k}[g·d+i]: the stage-1 input of position t for group g, laid
  // out like w1[c, i, k] so each output channel is one contiguous dot product of length 2d.
  const int64_t G = C / d;
  std::vector<float> y((L + 1) * C), pair(L * C * 2), zg(L == 1 ? 0 : L * C);
  for (int64_t r = 0; r <= L; ++r) {  // y row r = position j = r − 1
    const float* a = ext(r);
    const float* b = ext(r + 1);
    float* yr = y.data() + r * C;
    for (int64_t c = 0; c < C; ++c) yr[c] = b0_C[c] + w0_C2[2 * c] * a[c] + w0_C2[2 * c + 1] * b[c];
  }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t i = 0; i < d; ++i) {
        float* p = pair.data() + ((g * L + t) * d + i) * 2;
        p[0] = y[t * C + g * d + i];
        p[1] = y[(t + 1) * C + g * d + i];
      }
  // One position writes z directly (its group rows are contiguous); more go through zg[G][L][d].
  float* out = L == 1 ? z_LC : zg.data();
  // (BF16 prefill chunks, L > 16, go to widened sgemm tiles, which are threaded inside.)
  // On the decode team (ops/cpu/stealing.h), which the decode GEMVs around this use too.
  for_chunks_stealing(G, 1, L * C * d > kParallelMin && (w1.dtype == DType::F32 || L <= 16),
                      [&](int64_t g0, int64_t g1) {
                        for (int64_t g = g0; g < g1; ++g)
                          stage1_group(out + g * L * d, pair.data() + g * L * 2 * d, w1,
                                       b1_C + g * d, g, L, d);
                      });
  if (L > 1)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t t = 0; t < L; ++t)
        std::copy_n(zg.data() + (g * L + t) * d, d, z_LC + t * C + g * d);
  // The new state is the last two rows of [state ; u] (rows L and L+1); row L may be state row 1
  // when L = 1, so copy in increasing row order.
  std::vector<float> last(2 * C);
  std::copy_n(ext(L), C, last.data());
  std::copy_n(ext(L + 1), C, last.data() + C);
  std::copy(last.begin(), last.end(), state_2C);
}

}  // namespace

void cca_conv_step_forward(const Tensor& z, const Tensor& state, const Tensor& u, const Tensor& w0,
                           const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  const int64_t L = u.size(0), C = u.size(1);
  step_forward(z.ptr<float>(), state.ptr<float>(), u.ptr<float>(), w0, b0.ptr<float>(), w1,
               b1.ptr<float>(), L, C, w1.size(1));
}

}  // namespace zaya::ops::cpu
