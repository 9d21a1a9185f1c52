// Symmetric product on the CPU: C = alpha·P·Pᵀ + beta·C for P = X or Xᵀ, the upper triangle of
// square tiles computed (half the multiply-adds of a GEMM) and mirrored down.
//
// C [m,m] is cut into square tiles, the depth k into chunks (SymPlan). Each (tile on or above the
// diagonal, chunk) is one task: a diagonal tile is a ?syrk of its row panel, an off-diagonal one a
// ?gemm of its row and column panels; chunk 0 lands on C (with beta), the others in partial sums
// that a last pass adds in chunk order before copying each tile's transpose below the diagonal.
// The tasks run in parallel in one OpenMP region (OpenBLAS called inside a parallel region runs
// single-threaded); every element is computed by fixed tasks whose shapes do not depend on the
// thread count, so the bits do not either. Only C's upper triangle is read (beta); both triangles
// are written, and the result is exactly symmetric.
#pragma once
#include <cstdint>

namespace zaya::ops::cpu {

// How sym_product cuts the work: C into square tiles of `block` rows and columns, the depth k
// into `chunks` equal parts (the last one shorter). Each (tile on or above the diagonal, chunk)
// pair is one task; the chunks' partial sums are added in chunk order. They live in a buffer of
// (chunks − 1)·m² elements per calling thread, kept between calls.
struct SymPlan {
  int64_t block, chunks;
};

// The default plan, chosen on the project's 2-core machine from one-thread CPU times of whole
// Newton–Schulz runs (tiles of 64–512, one or two chunks; docs/training.md, Muon): tiles of kSymBlock
// (large tiles keep OpenBLAS's packing cheap against the multiply-adds; smaller ones measured no
// faster) and the depth cut in two when k ≥ 2·kSymMinDepth, so that m ≤ kSymBlock
// still gives two equal tasks and m = 1024 six that two threads share evenly (three tiles alone
// would leave one thread the off-diagonal ?gemm, the other two ?syrk tiles that cost more). It
// depends on m and k only, never on the thread count.
inline constexpr int64_t kSymBlock = 512, kSymMinDepth = 128;
SymPlan sym_plan(int64_t m, int64_t k);

// C[m,m] (row stride ldc) = alpha·P·Pᵀ + beta·C with P [m,k]: P = X [m,k] (row stride ldx) when
// !trans, P = Xᵀ for X [k,m] (row stride ldx) when trans. T is float or double.
template <class T>
void sym_product(bool trans, int64_t m, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                 int64_t ldc);
// The same with an explicit plan (block > 0, chunks > 0): the tests' and benchmarks' entry.
template <class T>
void sym_product(bool trans, int64_t m, int64_t k, T alpha, const T* x, int64_t ldx, T beta, T* c,
                 int64_t ldc, SymPlan plan);

// C[m,m] (row stride ldc) = P·R for symmetric P, R [m,m] (row strides ldp, ldr) that commute, so
// that the product is symmetric too (Muon's Gram-space Newton–Schulz: every matrix is a polynomial
// in one Gram matrix). C is cut into square tiles of `block`; each tile on or above the diagonal is
// one GEMM of P's row panel and R's column panel (the full depth m), its transpose copied below:
// (nb + 1)/(2·nb) of a GEMM's multiply-adds for nb tiles a side. The tasks' shapes depend on m and
// block only, so the bits do not depend on the thread count; the result is exactly symmetric (the
// upper triangle's values). Commutation is the caller's promise: for P·R ≠ R·P the lower triangle
// is the upper one's mirror, not P·R's. C may not alias P or R.
template <class T>
void sym_multiply(int64_t m, const T* p, int64_t ldp, const T* r, int64_t ldr, T* c, int64_t ldc,
                  int64_t block);
// The default tile side for m: a function of m only (docs/training.md, Muon).
int64_t sym_multiply_block(int64_t m);
template <class T>
void sym_multiply(int64_t m, const T* p, int64_t ldp, const T* r, int64_t ldr, T* c, int64_t ldc);

}  // namespace zaya::ops::cpu
