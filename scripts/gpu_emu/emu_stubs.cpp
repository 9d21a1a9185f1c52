// GPU emulator (scripts/gpu_emu/): weak stand-ins, overridden by the real definitions of
// src/ops/gpu/ where a branch has them: each ops::gpu op without a kernel fails clearly, and
// zaya::gpu::gemm is a plain host loop until gemm_tiled.cu exists (so moe can run before it).
#include "core/assert.h"
#include "core/dtype.h"
#include "ops/backend.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/vendor.h"

namespace zaya::ops::gpu {

#define ZAYA_BACKEND_OP(ret, name, params)                                            \
  __attribute__((weak)) ret name params {                                             \
    fail("{}: no GPU kernel on this branch (scripts/gpu_emu: weak stand-in)", #name); \
  }
#include "ops/backend_ops.inc"
#undef ZAYA_BACKEND_OP

}  // namespace zaya::ops::gpu

namespace zaya::gpu {

namespace {
float element(const GemmOperand& x, int64_t r, int64_t c) {  // op(X)[r][c]
  const int64_t i = x.transposed ? c * x.ld + r : r * x.ld + c;
  return x.dtype == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(x.data)[i])
                                : static_cast<const float*>(x.data)[i];
}
}  // namespace

__attribute__((weak)) void gemm(const Gemm& g, GemmEngine) {
  const ::emu::DeviceAccess open;  // a host loop standing in for kernels
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t n = 0; n < g.N; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < g.K; ++k) acc += element(g.a, m, k) * element(g.b, k, n);
      float& c = g.c[m * g.ldc + n];
      c = g.beta == 0 ? g.alpha * acc : g.alpha * acc + g.beta * c;
    }
}

}  // namespace zaya::gpu
