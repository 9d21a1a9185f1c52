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

// Tiles [r0, r1) × [c0, c1) of the grid.
struct Grid {
  int64_t N, V, D, chunk;
  int64_t rows() const { return (N + kRowBlock - 1) / kRowBlock; }
  int64_t chunks() const { return (V + chunk - 1) / chunk; }
  int64_t r0(int64_t r) const { return r * kRowBlock; }
  int64_t r1(int64_t r) const { return std::min(N, (r + 1) * kRowBlock); }
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
    if (target_N[n] >= 0) scored_rows[size_t(n / kRowBlock)] = 1;
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

}  // namespace zaya::ops::cpu
