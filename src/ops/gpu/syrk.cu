// syrk_upper and sym_fill (syrk.h): the upper triangle's block rows as gemm() calls, and the one
// pass that mirrors the triangle into the outputs Newton–Schulz needs.
#include "core/assert.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/syrk.h"

namespace zaya::gpu {

namespace {

constexpr int kTile = 32, kTileRows = 8;  // 32×32 tiles, 32×8 threads

// Block (x, y) is tile (y, x) of S; only tiles on or above the diagonal (y ≤ x) work. The tile is
// read from the upper triangle (within a diagonal tile: on or above the diagonal, mirrored in
// shared memory), then written at (y, x) and, transposed, at (x, y).
__global__ void __launch_bounds__(kTile* kTileRows)
    sym_fill_kernel(const float* s, int64_t n, float* full, float* affine, float scale, float diag,
                    uint16_t* bf16) {
  if (blockIdx.y > blockIdx.x) return;  // uniform over the block
  __shared__ float tile[kTile][kTile + 1];
  const int tx = int(threadIdx.x) % kTile, ty = int(threadIdx.x) / kTile;
  const bool on_diagonal = blockIdx.x == blockIdx.y;
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  for (int k = ty; k < kTile; k += kTileRows) {
    const int64_t r = r0 + k, c = c0 + tx;
    if (r < n && c < n && (!on_diagonal || k <= tx)) tile[k][tx] = s[r * n + c];
  }
  __syncthreads();
  if (on_diagonal) {
    for (int k = ty; k < kTile; k += kTileRows)
      if (k > tx) tile[k][tx] = tile[tx][k];
    __syncthreads();
  }
  // Element (row, col) of every output from the symmetric value v.
  auto put = [&](int64_t row, int64_t col, float v, bool upper_of_s) {
    const int64_t i = row * n + col;
    if (full && !(full == s && upper_of_s)) full[i] = v;
    if (affine) affine[i] = scale * v + (row == col ? diag : 0.0f);
    if (bf16) bf16[i] = float_to_bf16_bits(v);
  };
  for (int k = ty; k < kTile; k += kTileRows) {
    const int64_t r = r0 + k, c = c0 + tx;
    // A diagonal tile is written here alone, below its diagonal too (in place: only there).
    if (r < n && c < n) put(r, c, tile[k][tx], !on_diagonal || k <= tx);
  }
  if (on_diagonal) return;  // uniform
  for (int k = ty; k < kTile; k += kTileRows) {
    const int64_t r = c0 + k, c = r0 + tx;  // element (r, c) below the diagonal = S[c][r]
    if (r < n && c < n) put(r, c, tile[tx][k], false);
  }
}

// A's rows i0 … as an operand of gemm(), `transposed` or not as x is; offset in elements.
GemmOperand rows_from(const GemmOperand& x, int64_t i0, bool transposed) {
  const size_t esize = dtype_size(x.dtype);
  const int64_t offset = x.transposed ? i0 : i0 * x.ld;
  return {static_cast<const char*>(x.data) + size_t(offset) * esize, x.dtype, x.ld, transposed};
}

}  // namespace

int64_t syrk_block(int64_t n) {
  if (n <= kSymMinBlock) return n > 0 ? n : 1;
  int64_t block = (n + kSymMaxBlockRows - 1) / kSymMaxBlockRows;
  block = (block + 127) / 128 * 128;
  return block > kSymMinBlock ? block : kSymMinBlock;
}

void syrk_upper(int64_t n, int64_t k, float alpha, const GemmOperand& x, float beta, float* c,
                int64_t ldc, int64_t block) {
  ZAYA_ASSERT(n >= 0 && k >= 0 && block > 0, "syrk_upper: n {} k {} block {}", n, k, block);
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    Gemm g;
    g.M = block < n - i0 ? block : n - i0, g.N = n - i0, g.K = k;
    // op(A) = P[i0:i1, :]: x as stored; op(B) = P[i0:n, :]ᵀ: x with the other transpose flag.
    g.a = rows_from(x, i0, x.transposed);
    g.b = rows_from(x, i0, !x.transposed);
    g.c = c + i0 * ldc + i0, g.ldc = ldc;
    g.alpha = alpha, g.beta = beta;
    gemm(g);
  }
}

void sym_fill(const float* s, int64_t n, const SymFill& f) {
  if (n == 0 || (!f.full && !f.affine && !f.bf16)) return;
  const int64_t tiles = (n + kTile - 1) / kTile;
  ZAYA_ASSERT(tiles <= 65535, "sym_fill: n {} too large for the grid", n);
  const auto side = unsigned(tiles);
  const dim3 grid(side, side);
  sym_fill_kernel<<<grid, kTile * kTileRows, 0, stream()>>>(s, n, f.full, f.affine, f.scale, f.diag,
                                                            f.bf16);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::gpu
