// value_shift_forward / value_shift_backward on the GPU: CCA values with a one-token shift (spec
// §4.4, backward §8.5 step 8), mirroring ops/cpu/value_shift.cpp. A bit move: one thread per
// element, or per float4 where the half width is a multiple of 4 and both pointers are aligned.
//   out[b,t,:half] = in[b,t,:half];  out[b,t,half:] = in[b,t+step,half:] (zero outside 0…T−1)
// with step −1 (forward: p → v) or +1 (backward: dv → dp). out and in must not overlap.
#include <cstdint>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

// In units of V (float or float4): rows of W units, the second half starting at unit `half`.
template <class V>
__global__ void shift_kernel(V* __restrict__ out, const V* __restrict__ in, int64_t rows, int64_t T,
                             int64_t W, int64_t half, int step) {
  ZAYA_GPU_FOR(e, rows * W) {
    const int64_t bt = e / W, j = e % W;
    if (j < half) {
      out[e] = in[e];
    } else {
      const int64_t src = bt % T + step;
      if (src >= 0 && src < T) {
        out[e] = in[e + step * W];
      } else {
        V zero;
        if constexpr (sizeof(V) == sizeof(float))
          zero = 0.0f;
        else
          zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        out[e] = zero;
      }
    }
  }
}

void shift(const Tensor& out, const Tensor& in, int step) {
  const int64_t B = in.size(0), T = in.size(1), rows = B * T;
  if (rows == 0) return;
  const int64_t W = in.numel() / rows, half = W / 2;
  if (W == 0) return;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (half % 4 == 0 && aligned(out.data) && aligned(in.data)) {
    const int64_t n = rows * W / 4;
    shift_kernel<<<blocks_for(n), kBlock, 0, stream()>>>(static_cast<float4*>(out.data),
                                                         static_cast<const float4*>(in.data), rows,
                                                         T, W / 4, half / 4, step);
  } else {
    shift_kernel<<<blocks_for(rows * W), kBlock, 0, stream()>>>(out.ptr<float>(), in.ptr<float>(),
                                                                rows, T, W, half, step);
  }
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace

void value_shift_forward(const Tensor& v, const Tensor& p) {
  shift(v, p, -1);
}

void value_shift_backward(const Tensor& dp, const Tensor& dv) {
  shift(dp, dv, +1);
}

}  // namespace zaya::ops::gpu
