// The GPU matrix multiply every op builds on (linear, MoE experts, Newton–Schulz), row-major:
//   C[M,N] = alpha · op(A) · op(B) + beta · C,   op(X) = X or Xᵀ,
// A and B F32 or BF16 (each its own dtype; products accumulate in f32), C F32. lda/ldb/ldc are
// row strides in elements of the matrices as stored (A stored [M,K] or, transposed, [K,M]).
// Two implementations: cuBLASLt (gemm_blaslt.cpp; NVIDIA, both operands of one dtype) and our
// portable tiled kernel (gemm_tiled.cu; AMD without hipBLASLt, mixed dtypes, and a check of the
// library on NVIDIA). gemm() picks: cuBLASLt where it applies unless ZAYA_GPU_GEMM=tiled.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace zaya::gpu {

struct GemmOperand {
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32 or BF16
  int64_t ld = 0;            // row stride of the stored matrix
  bool transposed = false;   // op(X) = Xᵀ
};

struct Gemm {
  int64_t M = 0, N = 0, K = 0;
  GemmOperand a, b;
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1, beta = 0;  // beta 0: C is not read (may hold NaN)
};

enum class GemmEngine { Auto, Tiled, BlasLt };

// Runs g on the stream with `engine` (Auto: ZAYA_GPU_GEMM or the default choice above).
void gemm(const Gemm& g, GemmEngine engine = GemmEngine::Auto);
// The engine Auto resolves to for g.
GemmEngine gemm_engine_for(const Gemm& g);

// The implementations (gemm() dispatches; tests and benchmarks call them directly).
void gemm_tiled(const Gemm& g);
// False (and nothing run) where the library is absent or cannot take g's dtypes.
bool gemm_blaslt(const Gemm& g);

}  // namespace zaya::gpu
