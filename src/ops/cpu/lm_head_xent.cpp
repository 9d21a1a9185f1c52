// The fused tied LM head + cross-entropy on the CPU (ops.h): logits = x[N,D] · w[V,D]ᵀ are never
// stored whole. They are computed one tile at a time (a block of kRowBlock rows × a chunk of
// 128–512 vocabulary entries, chunk_of) by sgemm into a per-thread tile buffer (tile_buffers:
// grown once and reused, no allocation per call in steady state), then consumed.
//
// Forward: row blocks in parallel; each walks the vocabulary chunks in order, keeping per row the
// running max (in lse), the running Σ exp(ℓ − max), rescaled when the max grows (f64, in a
// calling-thread scratch of N doubles), and the target's logit (in loss). Exponentials are
// exp_vec (f32, ≤ 1.5 ulp) for F32 and std::exp for F64; every sum is in f64, through kLanes
// partial sums added in a fixed order.
//
// Backward: each tile's logits are recomputed, P = scale·(exp(ℓ − lse) − onehot), the target's
// entry as scale·expm1(ℓ − lse) in f64 (no cancellation when p → 1); rows with target −1 are zero
// and a block with no scored row is skipped. Then dx_r += P·w_c and dw_c += Pᵀ·x_r. The tiles are
// OpenMP tasks created in diagonals (for_tiles_ordered) with an inout dependence on their row
// block and on their chunk: each dx_r and each dw_c is written by one task at a time, in one fixed
// order of tiles, and tiles that share neither run in parallel with no barrier between diagonals.
// The bits do not depend on the thread count.
//
// Forward + backward in one pass (training, where the gradient scale is known before the forward):
// each row block's logits are computed once over the whole vocabulary into a bounded slot buffer
// and serve the loss, dx and dw: 3 GEMMs of N·V·D instead of 4 (see forward_backward_blocks).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/exp_vec.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

constexpr int64_t kRowBlock = 128;  // rows of a tile
constexpr int64_t kMaxChunk = 512;  // vocabulary entries of a tile, at most
constexpr int64_t kMinChunks = 8;   // chunks wanted (the backward's parallelism): see chunk_of
constexpr int kLanes = 16;          // partial sums of a row's exponentials

// The vocabulary chunk: 512 entries (sgemm's efficiency) where that still gives kMinChunks
// chunks, else 256, else 128. It depends on V only, so the bits do not depend on the thread count.
int64_t chunk_of(int64_t V) {
  int64_t chunk = kMaxChunk;
  while (chunk > 128 && V < kMinChunks * chunk) chunk /= 2;
  return chunk;
}

// Tiles [r0, r1) × [c0, c1) of the grid: row blocks of `block` rows (kRowBlock for the tiled
// forward and backward, block_rows_of(V) for the one pass) × vocabulary chunks of `chunk`.
struct Grid {
  int64_t N, V, D, chunk, block = kRowBlock;
  int64_t rows() const { return (N + block - 1) / block; }
  int64_t chunks() const { return (V + chunk - 1) / chunk; }
  int64_t r0(int64_t r) const { return r * block; }
  int64_t r1(int64_t r) const { return std::min(N, (r + 1) * block); }
  int64_t c0(int64_t c) const { return c * chunk; }
  int64_t c1(int64_t c) const { return std::min(V, (c + 1) * chunk); }
  bool parallel() const { return N * V > kParallelMin && rows() > 1; }
};

template <class T>
T exp_of(T v) {
  if constexpr (std::is_same_v<T, float>)
    return exp_vec(v);
  else
    return std::exp(v);
}

constexpr int64_t kTile = kRowBlock * kMaxChunk;  // elements of one tile buffer

// Tile buffers for every thread of the team about to start, one kTile slice per thread number:
// the calling thread's vector, kept for the next call and grown only when the thread count grows
// (so a warm call allocates nothing, whichever threads run the tiles).
template <class T>
T* tile_buffers() {
  thread_local std::vector<T> buf;
  const size_t n = size_t(omp_get_max_threads()) * size_t(kTile);
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// ℓ_tile[rows, cols] = x[r0…r1) · w[c0…c1)ᵀ.
template <class T>
void tile_logits(T* l, const T* x_ND, const T* w_VD, const Grid& g, int64_t r, int64_t c) {
  const int64_t rows = g.r1(r) - g.r0(r), cols = g.c1(c) - g.c0(c);
  gemm<T>(false, true, rows, cols, g.D, T(1), x_ND + g.r0(r) * g.D, g.D, w_VD + g.c0(c) * g.D, g.D,
          T(0), l, cols);
}

// Σ_j exp(ℓ[j] − m) over one tile row, in f64 (kLanes partial sums, then in order); the row is
// overwritten with the exponentials (computed in place first, so that the loop vectorises).
template <class T>
double sum_exp(T* l, int64_t cols, T m) {
  for (int64_t j = 0; j < cols; ++j) l[j] = exp_of<T>(l[j] - m);
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += double(l[j + k]);
  for (int k = 0; j < cols; ++j, ++k) acc[k] += double(l[j]);
  double s = 0;
  for (double a : acc) s += a;
  return s;
}

// max_j ℓ[j] over one tile row (cols ≥ 1), in kLanes lanes so that it vectorises.
template <class T>
T max_of(const T* l, int64_t cols) {
  T mx[kLanes];
  std::fill_n(mx, kLanes, l[0]);
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes)
    for (int k = 0; k < kLanes; ++k) mx[k] = std::max(mx[k], l[j + k]);
  for (int k = 0; j < cols; ++j, ++k) mx[k] = std::max(mx[k], l[j]);
  return *std::max_element(mx, mx + kLanes);
}

template <class T>
void forward_tiles(T* loss_N, T* lse_N, double* sum_N, const T* x_ND, const T* w_VD,
                   const int32_t* target_N, const Grid g) {
  const int64_t R = g.rows(), C = g.chunks();
  T* const tiles = tile_buffers<T>();
#pragma omp parallel for schedule(dynamic, 1) if (g.parallel())
  for (int64_t r = 0; r < R; ++r) {
    T* l = tiles + omp_get_thread_num() * kTile;
    const int64_t r0 = g.r0(r), r1 = g.r1(r);
    for (int64_t n = r0; n < r1; ++n) {
      lse_N[n] = -std::numeric_limits<T>::infinity();  // the running max
      sum_N[n] = 0;
      loss_N[n] = 0;  // the target's logit
    }
    for (int64_t c = 0; c < C; ++c) {
      tile_logits(l, x_ND, w_VD, g, r, c);
      const int64_t c0 = g.c0(c), cols = g.c1(c) - c0;
      for (int64_t n = r0; n < r1; ++n) {
        T* row = l + (n - r0) * cols;
        const int64_t t = target_N[n];
        if (t >= c0 && t < c0 + cols) loss_N[n] = row[t - c0];
        const T m_old = lse_N[n];
        const T m = std::max(m_old, max_of(row, cols));
        const double rescale = m_old == m ? 1.0 : std::exp(double(m_old) - double(m));
        sum_N[n] = sum_N[n] * rescale + sum_exp(row, cols, m);
        lse_N[n] = m;
      }
    }
    for (int64_t n = r0; n < r1; ++n) {
      const double lse = double(lse_N[n]) + std::log(sum_N[n]);
      loss_N[n] = target_N[n] < 0 ? T(0) : T(lse - double(loss_N[n]));
      lse_N[n] = T(lse);
    }
  }
}

// Runs tile(r, c) for every tile of an R × C grid as OpenMP tasks created in diagonals (step s:
// (i, (i + s) mod C) for each i < R when R ≤ C, else ((i + s) mod R, i) for each i < C). Each task
// depends (inout) on its row block and its chunk, so the tiles of one row block, and those of one
// chunk, run one at a time in that creation order on any thread count, while tiles that share
// neither run in parallel, with no barrier between steps.
template <class Tile>
void for_tiles_ordered(int64_t R, int64_t C, bool parallel, Tile&& tile) {
  thread_local std::vector<char> dep_storage;  // the dependence objects, kept for the next call
  dep_storage.resize(size_t(R + C));
  char* row_dep = dep_storage.data();
  char* col_dep = row_dep + R;
  const int64_t steps = std::max(R, C), width = std::min(R, C);
#pragma omp parallel if (parallel)
#pragma omp single
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i = 0; i < width; ++i) {
      const int64_t r = R <= C ? i : (i + s) % R, c = R <= C ? (i + s) % C : i;
#pragma omp task default(shared) firstprivate(r, c) depend(inout : row_dep[r], col_dep[c])
      tile(r, c);
    }
}

template <class T>
void backward_tiles(T* dx_ND, T* dw_VD, const T* x_ND, const T* w_VD, const T* lse_N,
                    const int32_t* target_N, double scale, const Grid g) {
  const T sc = T(scale);
  if (dx_ND) std::fill_n(dx_ND, g.N * g.D, T(0));
  // Row blocks with at least one scored row (the others contribute nothing).
  // (The calling thread's vector, kept for the next call; the tasks read it through `scored`: a
  // thread_local named in the lambda would be each worker's own.)
  thread_local std::vector<char> scored_rows;
  scored_rows.assign(size_t(g.rows()), 0);
  for (int64_t n = 0; n < g.N; ++n)
    if (target_N[n] >= 0) scored_rows[size_t(n / g.block)] = 1;
  const char* scored = scored_rows.data();
  T* const tiles = tile_buffers<T>();
  for_tiles_ordered(g.rows(), g.chunks(), g.parallel(), [&](int64_t r, int64_t c) {
    if (!scored[r]) return;
    T* p = tiles + omp_get_thread_num() * kTile;  // tasks are tied: one thread runs each
    tile_logits(p, x_ND, w_VD, g, r, c);
    const int64_t r0 = g.r0(r), rows = g.r1(r) - r0, c0 = g.c0(c), cols = g.c1(c) - c0;
    for (int64_t i = 0; i < rows; ++i) {
      T* row = p + i * cols;
      const int64_t t = target_N[r0 + i];
      if (t < 0) {
        std::fill_n(row, cols, T(0));
        continue;
      }
      const T lse = lse_N[r0 + i];
      const bool here = t >= c0 && t < c0 + cols;
      const double lt = here ? double(row[t - c0]) : 0.0;
      for (int64_t j = 0; j < cols; ++j) row[j] = sc * exp_of<T>(row[j] - lse);
      if (here) row[t - c0] = T(scale * std::expm1(lt - double(lse)));  // p − 1, no cancellation
    }
    if (dx_ND)
      gemm<T>(false, false, rows, g.D, cols, T(1), p, cols, w_VD + c0 * g.D, g.D, T(1),
              dx_ND + r0 * g.D, g.D);
    if (dw_VD)
      gemm<T>(true, false, cols, g.D, rows, T(1), p, cols, x_ND + r0 * g.D, g.D, T(1),
              dw_VD + c0 * g.D, g.D);
  });
}

// ---- The one-pass training op (lm_head_xent_forward_backward): one logits product per row
// block. A block's logits [rows, V] go to a slot buffer; the block's task (block_pass) takes the
// exact two-pass softmax of each row in place (max, then Σ exp in f64), writes loss and lse, turns
// the row into P and computes dx_r = P·w; then one task per vocabulary chunk c adds
// dw_c += P[:, c]ᵀ · x_r. The chunk tasks of every block depend (inout) on their chunk, so each
// dw_c receives the blocks in order 0, 1, 2 … on any thread count; a slot is reused only once the
// chunk tasks of the block before have read it (inout on the slot after their `in`).

constexpr int64_t kBlockFloats = int64_t(1) << 21;  // logits of one row block (V ≤ 2^17)
constexpr int64_t kMinBlockRows = 16, kMaxBlockRows = 256;

// Rows of a block: as many as fit in kBlockFloats, 16 to 256; a function of V only (the bits).
int64_t block_rows_of(int64_t V) {
  return std::clamp(kBlockFloats / V, kMinBlockRows, kMaxBlockRows);
}

// One BLAS call on the calling thread, whatever the shape: ops/cpu/blas.h's gemm would cut a large
// product into panels outside a parallel region and not inside one (a team of one thread is not
// "in parallel"), which differ in their last bits.
template <class T>
void one_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m > 0 && n > 0)
    blas_detail::call_single_threaded<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Block r: p[rows, V] = x_r · wᵀ; per row the loss, the lse and P = scale·(softmax − onehot) in
// place (zero for target −1); dx_r = P · w. Returns nothing: dw is the chunk tasks'.
template <class T>
void block_pass(T* p, T* loss_N, T* lse_N, T* dx_ND, const T* x_ND, const T* w_VD,
                const int32_t* target_N, double scale, const Grid& b, int64_t r) {
  const int64_t r0 = b.r0(r), rows = b.r1(r) - r0, V = b.V, D = b.D;
  one_gemm<T>(false, true, rows, V, D, T(1), x_ND + r0 * D, D, w_VD, D, T(0), p, V);
  bool scored = false;
  for (int64_t i = 0; i < rows; ++i) {
    T* row = p + i * V;
    const int64_t t = target_N[r0 + i];
    const T m = max_of(row, V);
    const double lt = t >= 0 ? double(row[t]) : 0.0;
    const double sum = sum_exp(row, V, m);  // row ← exp(ℓ − m)
    const double lse = double(m) + std::log(sum);
    lse_N[r0 + i] = T(lse);
    loss_N[r0 + i] = t < 0 ? T(0) : T(lse - lt);
    if (t < 0) {
      std::fill_n(row, V, T(0));
      continue;
    }
    scored = true;
    const T f = T(scale / sum);  // exp(ℓ − lse) = exp(ℓ − m) / Σ
    for (int64_t j = 0; j < V; ++j) row[j] *= f;
    row[t] = T(scale * std::expm1(lt - lse));  // p − 1, no cancellation
  }
  if (scored)
    one_gemm<T>(false, false, rows, D, V, T(1), p, V, w_VD, D, T(0), dx_ND + r0 * D, D);
  else
    std::fill_n(dx_ND + r0 * D, rows * D, T(0));
}

template <class T>
void forward_backward_blocks(T* loss_N, T* lse_N, T* dx_ND, T* dw_VD, const T* x_ND, const T* w_VD,
                             const int32_t* target_N, double scale, const Grid b) {
  const int64_t R = b.rows(), C = b.chunks();
  const int64_t threads = b.parallel() ? omp_get_max_threads() : 1;
  const int64_t slots = std::min(R, threads + 1);  // blocks in flight (scheduling only, not bits)
  const int64_t slot = std::min(b.block, b.N) * b.V;
  // (The calling thread's vectors, kept for the next call: a warm call allocates nothing.)
  thread_local std::vector<T> buf;
  if (buf.size() < size_t(slots * slot)) buf.resize(size_t(slots * slot));
  thread_local std::vector<char> deps;  // the dependence objects: one per slot, one per chunk
  deps.resize(size_t(slots + C));
  char* slot_dep = deps.data();
  char* col_dep = slot_dep + slots;
  T* const slot_buf = buf.data();
#pragma omp parallel if (b.parallel())
#pragma omp single
  for (int64_t r = 0; r < R; ++r) {
    T* p = slot_buf + (r % slots) * slot;
    char* sd = slot_dep + r % slots;
#pragma omp task default(shared) firstprivate(r, p) depend(inout : sd[0])
    block_pass(p, loss_N, lse_N, dx_ND, x_ND, w_VD, target_N, scale, b, r);
    bool scored = false;  // a block with no scored row adds nothing to dw
    for (int64_t n = b.r0(r); n < b.r1(r) && !scored; ++n) scored = target_N[n] >= 0;
    if (!scored) continue;
    for (int64_t c = 0; c < C; ++c) {
#pragma omp task default(shared) firstprivate(r, c, p) depend(in : sd[0]) depend(inout : col_dep[c])
      {
        const int64_t r0 = b.r0(r), c0 = b.c0(c);
        one_gemm<T>(true, false, b.c1(c) - c0, b.D, b.r1(r) - r0, T(1), p + c0, b.V,
                    x_ND + r0 * b.D, b.D, T(1), dw_VD + c0 * b.D, b.D);
      }
    }
  }
}

void check_targets(const char* op, const int32_t* target, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    ZAYA_ASSERT(target[n] >= -1 && target[n] < V, "{}: target[{}] = {} not in [-1, {})", op, n,
                target[n], V);
}

Grid grid_of(const Tensor& x, const Tensor& w) {
  const int64_t D = x.size(-1);
  return {x.numel() / D, w.size(0), D, chunk_of(w.size(0))};
}

}  // namespace

void lm_head_xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& w,
                          const Tensor& target) {
  const Grid g = grid_of(x, w);
  const int32_t* target_N = target.ptr<int32_t>();
  check_targets("lm_head_xent_forward", target_N, g.N, g.V);
  thread_local std::vector<double> sums;  // the running sums, kept for the next call
  if (sums.size() < size_t(g.N)) sums.resize(size_t(g.N));
  ZAYA_DISPATCH_FLOAT(x.dtype, forward_tiles(loss.ptr<scalar_t>(), lse.ptr<scalar_t>(), sums.data(),
                                             x.ptr<scalar_t>(), w.ptr<scalar_t>(), target_N, g));
}

void lm_head_xent_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w,
                           const Tensor& lse, const Tensor& target, double scale) {
  const Grid g = grid_of(x, w);
  const int32_t* target_N = target.ptr<int32_t>();
  check_targets("lm_head_xent_backward", target_N, g.N, g.V);
  if (!dx.defined() && !dw.defined()) return;
  ZAYA_DISPATCH_FLOAT(x.dtype, backward_tiles(ptr_or_null<scalar_t>(dx), ptr_or_null<scalar_t>(dw),
                                              x.ptr<scalar_t>(), w.ptr<scalar_t>(),
                                              lse.ptr<scalar_t>(), target_N, scale, g));
}

void lm_head_xent_forward_backward(const Tensor& loss, const Tensor& lse, const Tensor& dx,
                                   const Tensor& dw, const Tensor& x, const Tensor& w,
                                   const Tensor& target, double scale) {
  const int64_t D = x.size(-1), V = w.size(0);
  const Grid b{x.numel() / D, V, D, chunk_of(V), block_rows_of(V)};
  const int32_t* target_N = target.ptr<int32_t>();
  check_targets("lm_head_xent_forward_backward", target_N, b.N, b.V);
  if (b.N == 0) return;
  ZAYA_DISPATCH_FLOAT(
      x.dtype, forward_backward_blocks(loss.ptr<scalar_t>(), lse.ptr<scalar_t>(),
                                       dx.ptr<scalar_t>(), dw.ptr<scalar_t>(), x.ptr<scalar_t>(),
                                       w.ptr<scalar_t>(), target_N, scale, b));
}

}  // namespace zaya::ops::cpu
