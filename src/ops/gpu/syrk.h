// The symmetric products of Newton–Schulz on the GPU (ops/gpu/muon.cu), built on gemm() (gemm.h):
//
//   syrk_upper: C = alpha · P·Pᵀ + beta · C on the upper triangle's block rows only. C [n,n] is cut
//   into block rows of `block` rows; block row i is ONE gemm() call,
//     C[i0:i1, i0:n] = alpha · P[i0:i1, :] · P[i0:n, :]ᵀ + beta · C[i0:i1, i0:n],
//   so with nb = ⌈n/block⌉ block rows the products cost nb(nb+1)/2 of the nb² blocks (≈ half for
//   many blocks) while every call runs at the library's speed (cuBLASLt's tensor-core GEMM on
//   NVIDIA; the tiled kernel elsewhere, the same calls). The diagonal blocks are
//   computed whole; nothing strictly below them is written. Like the CPU's sym_product
//   (ops/cpu/syrk.h), which makes the same cut with sgemm/ssyrk calls.
//
//   sym_fill: the one pass after it. From the upper triangle of S [n,n] (row stride n; below the
//   diagonal is not read), through 32×32 shared tiles (coalesced both ways), writes every element
//   of each output asked for: `full` = S mirrored (may be S itself: then only below the diagonal is
//   written), `affine` = scale·S + diag·I (Newton–Schulz's B = b·A + a·I), `bf16` = S rounded to
//   BF16 (the next product's operand). All outputs exactly symmetric.
//
// Block rule (syrk_block): at most kSymMaxBlockRows block rows, none under kSymMinBlock rows, in
// multiples of 128 (cuBLASLt's and our tile edge): n ≤ 256 is one call (a full GEMM: nothing to
// gain on so small a matrix), 512 → 2 blocks of 256 (3/4 of the full product's work), 1024 → 4
// (5/8), 2048 → 8 of 256 (9/16), 4096 → 8 of 512. The triangle's share is (1 + 1/nb)/2, so 8 block
// rows leave 12.5% over half; more rows would shrink each call below the size that fills an
// H200-class device. A choice from the work count (bench_gpu --only muon measures the resulting
// Newton–Schulz against the general-GEMM one).
#pragma once
#include <cstdint>

#include "ops/gpu/gemm.h"

namespace zaya::gpu {

inline constexpr int64_t kSymMinBlock = 256, kSymMaxBlockRows = 8;

// The block rows' height for an [n,n] product (above).
int64_t syrk_block(int64_t n);

// C [n,n] (row stride ldc, F32) = alpha · P·Pᵀ + beta · C on block rows of `block` (> 0) rows,
// the upper triangle's blocks only (above). P [n,k] is x as gemm() reads an A operand: x.data
// [n,k] with row stride x.ld, or, x.transposed, x.data [k,n] (P = its transpose); F32 or BF16.
// beta 0: C is not read.
void syrk_upper(int64_t n, int64_t k, float alpha, const GemmOperand& x, float beta, float* c,
                int64_t ldc, int64_t block);

struct SymFill {
  float* full = nullptr;    // S mirrored (may be S)
  float* affine = nullptr;  // scale·S + diag·I
  float scale = 1, diag = 0;
  uint16_t* bf16 = nullptr;  // S rounded to BF16 (bits)
};

// The outputs of f (null: not written), all [n,n] with row stride n, from S's upper triangle.
void sym_fill(const float* s, int64_t n, const SymFill& f);

}  // namespace zaya::gpu
