// cca_conv_step_forward on the CPU: the two-stage CCA conv (spec §4.2) continued from a carried
// state, for decoding (spec §4.8). F32 only; no backward.
//
// Legend: L new positions, C channels, d group width, G = C/d groups. The chunk's raw columns are
// ext = [s0 ; s1 ; u_0 … u_{L−1}] (s0 = u_{−2}, s1 = u_{−1} relative to the chunk, zeros at the
// sequence start). Stage 0 for chunk-local j = −1 … L−1 reads ext rows j+1 (tap 0) and j+2 (tap 1):
//   y_j[c] = b0[c] + w0[c,0,0]·ext[j+1][c] + w0[c,0,1]·ext[j+2][c]
// so a zero state gives y_{−1} = b0, exactly cca_conv_forward's padding row. Stage 1:
//   z_t[c] = b1[c] + Σ_i w1[c,i,0]·y_{t−1}[g·d+i] + w1[c,i,1]·y_t[g·d+i],  g = ⌊c/d⌋.
// Stage 1 reads w1[c] in its stored order against the interleaved pair (y_{t−1}[i], y_t[i]), so a
// decode step needs no transposed copy of w1. The sum order differs from cca_conv_forward's (equal
// to rounding, not bitwise). Outputs are split over channels; each z element is one task's
// fixed-order sum, so bits do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "ops/check.h"
#include "ops/cpu/parallel.h"
#include "ops/ops.h"

namespace zaya::ops {

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

// z[L,C]; state[2,C] advanced in place; u[L,C]; w0[C,2], b0[C], w1[C,d,2], b1[C].
void step_forward(float* z_LC, float* state_2C, const float* u_LC, const float* w0_C2,
                  const float* b0_C, const float* w1_Cd2, const float* b1_C, int64_t L, int64_t C,
                  int64_t d) {
  auto ext = [&](int64_t r) {  // row r of [state ; u]
    return r < 2 ? state_2C + r * C : u_LC + (r - 2) * C;
  };
  // pair_LCd2[t][g·d+i][k] = y_{t−1+k}[g·d+i]: the stage-1 input of position t, laid out like
  // w1[c, i, k] so each output channel is one contiguous dot product of length 2d.
  std::vector<float> y((L + 1) * C), pair(L * C * 2);
  for (int64_t r = 0; r <= L; ++r) {  // y row r = position j = r − 1
    const float* a = ext(r);
    const float* b = ext(r + 1);
    float* yr = y.data() + r * C;
    for (int64_t c = 0; c < C; ++c) yr[c] = b0_C[c] + w0_C2[2 * c] * a[c] + w0_C2[2 * c + 1] * b[c];
  }
  for (int64_t t = 0; t < L; ++t)
    for (int64_t c = 0; c < C; ++c) {
      pair[(t * C + c) * 2 + 0] = y[t * C + c];
      pair[(t * C + c) * 2 + 1] = y[(t + 1) * C + c];
    }
#pragma omp parallel for schedule(static) if (L * C * d > kParallelMin)
  for (int64_t c = 0; c < C; ++c) {
    const int64_t g = c / d;
    const float* wc = w1_Cd2 + c * d * 2;
    for (int64_t t = 0; t < L; ++t)
      z_LC[t * C + c] = b1_C[c] + dot_lanes(wc, pair.data() + (t * C + g * d) * 2, 2 * d);
  }
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
  ZAYA_ASSERT(z.defined() && state.defined() && u.defined() && w0.defined() && b0.defined() &&
                  w1.defined() && b1.defined(),
              "cca_conv_step_forward: every tensor is required");
  ZAYA_ASSERT(u.dtype == DType::F32, "cca_conv_step_forward: F32 only, got {}",
              dtype_name(u.dtype));
  check_float(u, z, state, w0, b0, w1, b1);
  ZAYA_ASSERT(u.ndim == 2, "cca_conv_step_forward: u must be [L,C], got {}", u.shape_str());
  const int64_t L = u.size(0), C = u.size(1);
  ZAYA_ASSERT(
      w1.ndim == 3 && w1.size(0) == C && w1.size(2) == 2 && w1.size(1) > 0 && C % w1.size(1) == 0,
      "cca_conv_step_forward: w1 {} for C = {} (need [C,d,2] with d | C)", w1.shape_str(), C);
  check_numel(z, L * C, "cca_conv_step_forward: z [L,C]");
  check_numel(state, 2 * C, "cca_conv_step_forward: state [2,C]");
  check_numel(w0, 2 * C, "cca_conv_step_forward: w0 [C,1,2]");
  check_numel(b0, C, "cca_conv_step_forward: b0 [C]");
  check_numel(b1, C, "cca_conv_step_forward: b1 [C]");
  if (L == 0) return;
  step_forward(z.ptr<float>(), state.ptr<float>(), u.ptr<float>(), w0.ptr<float>(), b0.ptr<float>(),
               w1.ptr<float>(), b1.ptr<float>(), L, C, w1.size(1));
}

}  // namespace zaya::ops
