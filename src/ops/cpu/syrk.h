// Symmetric product on the CPU: C = alpha·P·Pᵀ + beta·C for P = X or Xᵀ, the upper triangle of
// square tiles computed (half the multiply-adds of a GEMM) and mirrored down.
//
// C [m,m] is cut into square tiles of `block` rows and columns. Each tile on or above the
// diagonal is one task: a diagonal tile is a ?syrk of its row panel, an off-diagonal one a ?gemm of
// its row and column panels, and the task then copies its tile's transpose into the tile below the
// diagonal (a diagonal tile mirrors its own upper half). The tasks run in parallel in one OpenMP
// region (OpenBLAS called inside a parallel region runs single-threaded); each element of C is
// written by one fixed task whose shape does not depend on the thread count, so the bits do not
// either. Only C's upper triangle is read (beta); both triangles are written, and the result is
// exactly symmetric.
#pragma once
#include <cstdint>

namespace zaya::ops::cpu {

// Tile side (rows = columns) of sym_product, chosen with bench_muon on the project's 2-core
// machine (README, Muon).
inline constexpr int64_t kSymBlock = 128;

// C[m,m] (row stride ldc) = alpha·P·Pᵀ + beta·C with P [m,k]: P = X [m,k] (row stride ldx) when
// !trans, P = Xᵀ for X [k,m] (row stride ldx) when trans. block > 0; T is float or double.
template <class T>
void sym_product(bool trans, int64_t m, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                 int64_t ldc, int64_t block = kSymBlock);

}  // namespace zaya::ops::cpu
