// The fused tied LM head + cross-entropy on the GPU (ops.h), composed from the GPU's own GEMM and
// cross-entropy kernels over blocks of rows: each block's logits [rows, V] go to one bounded
// Scratch (at most kScratchFloats floats, 1 GiB, from the caching allocator: no allocation per step
// in steady state), never the whole [N, V]. Forward: gemm, then xent_forward on the block.
// Backward: the block's logits are recomputed, turned into dlogits in place by xent_backward, then
// dx_block = dlogits · w (overwrite) and dw += dlogitsᵀ · x_block, blocks in order (deterministic).
// Training's one pass computes each block's logits once for all three. A kernel that fuses the
// GEMM with the online log-sum-exp is not built.
#include <algorithm>

#include "ops/backend.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/runtime.h"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

// 1 GiB of logits per block: 1,023 rows at ZAYA1's V = 262,272. Each block re-reads w twice (the
// logits and dx products) and reads and writes dw once: 16·V·D bytes against 6·rows·V·D FLOPs, so
// 0.375·rows FLOP per byte, and the tensor cores' balance point on an H200 (~990 TFLOP/s bf16 over
// 4.8 TB/s) is ~200: blocks of ≥ ~550 rows keep the head compute-bound (64 MiB blocks, 63 rows,
// would spend ~8x the GEMMs' time moving w and dw, by this arithmetic).
constexpr int64_t kScratchFloats = int64_t(1) << 28;

struct Blocks {
  int64_t N, D, V, rows;  // rows per block
};

Blocks blocks_of(const Tensor& x, const Tensor& w) {
  const int64_t D = x.size(-1), N = x.numel() / D, V = w.size(0);
  return {N, D, V, std::max<int64_t>(1, std::min(N, kScratchFloats / V))};
}

Tensor on_gpu(float* p, int64_t rows, int64_t V) {
  Tensor t(p, {rows, V});
  t.device = Device::Gpu;
  return t;
}

// logits[rows, V] = x[r0 … r0+rows) · wᵀ.
void block_logits(float* logits, const Tensor& x, const Tensor& w, const Blocks& b, int64_t r0,
                  int64_t rows) {
  Gemm g;
  g.M = rows, g.N = b.V, g.K = b.D;
  g.a = GemmOperand{x.ptr<float>() + r0 * b.D, DType::F32, b.D, false};
  g.b = GemmOperand{w.data, DType::F32, b.D, true};
  g.c = logits, g.ldc = b.V;
  gemm(g);
}

}  // namespace

void lm_head_xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& w,
                          const Tensor& target) {
  const Blocks b = blocks_of(x, w);
  if (b.N == 0) return;
  const Tensor loss_N = loss.view({b.N}), lse_N = lse.view({b.N}), target_N = target.view({b.N});
  Scratch logits(size_t(b.rows * b.V) * sizeof(float));
  for (int64_t r0 = 0; r0 < b.N; r0 += b.rows) {
    const int64_t rows = std::min(b.rows, b.N - r0);
    block_logits(logits.as<float>(), x, w, b, r0, rows);
    xent_forward(loss_N.rows(r0, r0 + rows), lse_N.rows(r0, r0 + rows),
                 on_gpu(logits.as<float>(), rows, b.V), target_N.rows(r0, r0 + rows));
  }
}

namespace {

// One block's gradients from its dlogits at p [rows, V]: dx[r0 …, D] = dlogits · w (overwrite)
// and dw[V, D] += dlogitsᵀ · x[r0 …]; an undefined dx or dw is skipped.
void block_grads(const float* p, const Tensor& dx, const Tensor& dw, const Tensor& x,
                 const Tensor& w, const Blocks& b, int64_t r0, int64_t rows) {
  if (dx.defined()) {
    Gemm g;
    g.M = rows, g.N = b.D, g.K = b.V;
    g.a = GemmOperand{p, DType::F32, b.V, false};
    g.b = GemmOperand{w.data, DType::F32, b.D, false};
    g.c = dx.ptr<float>() + r0 * b.D, g.ldc = b.D;
    g.beta = 0.0f;
    gemm(g);
  }
  if (dw.defined()) {
    Gemm g;
    g.M = b.V, g.N = b.D, g.K = rows;
    g.a = GemmOperand{p, DType::F32, b.V, true};
    g.b = GemmOperand{x.ptr<float>() + r0 * b.D, DType::F32, b.D, false};
    g.c = dw.ptr<float>(), g.ldc = b.D;
    g.beta = 1.0f;
    gemm(g);
  }
}

// The blocks of the backward: each block's logits, turned into dlogits in place, then its dx and
// dw. With `loss` defined (the one pass), each block's loss and lse are first computed from the
// same logits (xent_forward), so the logits are computed once for all three.
void backward_blocks(const Tensor& loss, const Tensor& lse, const Tensor& dx, const Tensor& dw,
                     const Tensor& x, const Tensor& w, const Tensor& target, double scale) {
  const Blocks b = blocks_of(x, w);
  const Tensor lse_N = lse.view({b.N}), target_N = target.view({b.N});
  Scratch logits(size_t(b.rows * b.V) * sizeof(float));
  float* p = logits.as<float>();
  for (int64_t r0 = 0; r0 < b.N; r0 += b.rows) {
    const int64_t rows = std::min(b.rows, b.N - r0);
    block_logits(p, x, w, b, r0, rows);
    const Tensor block = on_gpu(p, rows, b.V);
    if (loss.defined())
      xent_forward(loss.view({b.N}).rows(r0, r0 + rows), lse_N.rows(r0, r0 + rows), block,
                   target_N.rows(r0, r0 + rows));
    xent_backward(block, block, lse_N.rows(r0, r0 + rows), target_N.rows(r0, r0 + rows), scale);
    block_grads(p, dx, dw, x, w, b, r0, rows);
  }
}

}  // namespace

void lm_head_xent_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w,
                           const Tensor& lse, const Tensor& target, double scale) {
  if (blocks_of(x, w).N == 0 || (!dx.defined() && !dw.defined())) return;
  backward_blocks(Tensor{}, lse, dx, dw, x, w, target, scale);
}

// The one-pass training op: each block's logits are computed once, give the block's loss and lse
// (xent_forward), become its dlogits in place (xent_backward) and then its dx and dw — 3 GEMMs of
// N·V·D, as on the CPU, where forward + backward do 4. The same kernels on the same blocks as
// forward + backward, so the same bits.
void lm_head_xent_forward_backward(const Tensor& loss, const Tensor& lse, const Tensor& dx,
                                   const Tensor& dw, const Tensor& x, const Tensor& w,
                                   const Tensor& target, double scale) {
  if (blocks_of(x, w).N == 0) return;
  backward_blocks(loss, lse, dx, dw, x, w, target, scale);
}

}  // namespace zaya::ops::gpu
