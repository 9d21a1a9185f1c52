// The GPU matrix multiply every op builds on (linear, MoE experts, Newton–Schulz), row-major:
//   C[M,N] = alpha · op(A) · op(B) + beta · C,   op(X) = X or Xᵀ,
// A and B F32 or BF16 (each its own dtype; products accumulate in f32; F32 optionally rounded to
// bf16 on the way in: Gemm::bf16_inputs), C F32. lda/ldb/ldc are
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
  // F32 operands enter the product rounded to bf16 (nearest, ties to even in the tiled kernel;
  // cuBLASLt's CUBLAS_COMPUTE_32F_FAST_16BF down-conversion), accumulation and C stay f32.
  // gemm() sets it on every call while the process-wide matmul precision is BF16 (below).
  bool bf16_inputs = false;
};

// The process-wide precision of gemm()'s F32 operands (ops/precision.h: train.precision): true
// rounds them to bf16 (Gemm::bf16_inputs) on every call, false leaves each call as given.
void set_gemm_bf16_inputs(bool on);
bool gemm_bf16_inputs();

enum class GemmEngine { Auto, Tiled, BlasLt };

// Runs g on the stream with `engine` (Auto: ZAYA_GPU_GEMM or the default choice above). M or
// N = 0 does nothing; K = 0 leaves C = beta · C (the tiled kernel). Auto falls back to the tiled
// kernel where cuBLASLt declines g; an engine asked for (argument or ZAYA_GPU_GEMM=blaslt) that
// cannot take g raises zaya::Error.
void gemm(const Gemm& g, GemmEngine engine = GemmEngine::Auto);
// The engine Auto resolves to for g: ZAYA_GPU_GEMM unset, empty or "auto": BlasLt in the CUDA
// build when A and B have one dtype, else Tiled; "tiled": Tiled; "blaslt": BlasLt (zaya::Error
// where it cannot apply: the HIP build, mixed dtypes); any other value: zaya::Error.
GemmEngine gemm_engine_for(const Gemm& g);

// The implementations (gemm() dispatches; tests and benchmarks call them directly).
void gemm_tiled(const Gemm& g);
// False (and nothing run) where the library is absent or cannot take g's dtypes (mixed A/B
// dtypes, K = 0, no algorithm from the heuristic).
bool gemm_blaslt(const Gemm& g);

}  // namespace zaya::gpu
