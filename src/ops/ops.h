// THE op surface: model-agnostic math, forward and backward side by side.
//
// Contract for every op here:
// - Tensors are contiguous row-major views (core/tensor.h). All floating tensors of one call share
//   one dtype, F32 (the model) or F64 (tests against references and numerical gradients).
//   Exceptions are stated per op (RoPE tables are always F32 (fp32 RoPE, docs/model.md §0.2.7);
//   ids/choices are I32).
// - Parameter gradients ACCUMULATE (+=) so micro-batches sum. Activation gradients OVERWRITE (=)
//   unless the op says "+=" (the residual stream and inputs with several consumers).
// - An undefined Tensor (Tensor{}) means "absent / not needed" where the comment allows it.
// - Shapes are validated with ZAYA_ASSERT (a mismatch is a bug in the caller, not user input),
//   once at the seam (ops/ops.cpp, ops/ops_memory.cpp) for every backend.
// - Every tensor carries its device (core/device.h); all defined tensors of one call must share
//   it. ops/ops.cpp checks that once per call and dispatches on it to the backend, ops::cpu::x
//   (ops/cpu/) or ops::gpu::x (ops/gpu/; a build without a GPU answers with a clear error).
//   Code above ops/ never touches tensor memory itself: what it needs is an op here.
// - CPU kernels (ops/cpu/) are templates over float/double that ZAYA_DISPATCH_FLOAT calls: an
//   `#pragma omp` cannot sit inside a ZAYA_DISPATCH_FLOAT argument. Small calls run
//   single-threaded, and parameter-gradient sums run in a fixed order, so their bits do not depend
//   on the thread count (ops/cpu/parallel.h). docs/adding-an-op.md has the checklist for a new op.
// Letters: N tokens (= B·T), B rows, T positions, D model width, V vocab, O/I linear out/in,
// C conv channels, d head size, Hq query heads, Hk kv heads, R router width, K router classes,
// E real experts, F expert first-projection width (gate ‖ up, hidden F/2).
#pragma once
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace zaya::ops {

// ---------------------------------------------------------------- linear (BLAS GEMM)
// y[N,O] = x[N,I] · w[O,I]ᵀ (+ b[O]); with accumulate, y += instead of =.
// Inference exception to the one-dtype rule: w may be BF16 while x, y, b are F32 — weights stay in
// their stored dtype and are widened to f32 in registers (AVX2/FMA) with f32 accumulation. Small N
// (decode) streams each row of w once for all N inputs; large N (prefill) widens tiles of w and
// runs sgemm. A BF16 w has no backward.
void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate = false);
// dx[N,I] = dy · w (+= with accumulate_dx; skipped if dx undefined);
// dw[O,I] += dyᵀ · x; db[O] += Σ_n dy (skipped if db undefined).
void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                     const Tensor& x, const Tensor& w, bool accumulate_dx = false);

// ---------------------------------------------------------------- embedding
// out[N,D] = table[ids[n]]; ids I32 [N], each in [0, V). table may be BF16 with out F32
// (inference: the tied embedding stays bf16).
void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table);
// dtable[V,D] += scatter of dout[N,D] by ids, except row skip_row (the pad row: docs/model.md
// §0.2.6; -1 = none).
void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t skip_row);

// ---------------------------------------------------------------- RMSNorm
// y[N,D] = w ⊙ (ρ x), ρ = (mean x² + eps)^-1/2 saved in rstd[N] (statistics in ≥ f32).
void rmsnorm_forward(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps);
// dx[N,D] = ρ(ĝ − n·mean(ĝ⊙n)), ĝ = dy⊙w, n = ρx (+= with accumulate_dx); dw[D] += Σ dy⊙n.
// dx and dw may each be undefined (skipped).
void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate_dx = false);

// ---------------------------------------------------------------- residual scaling (docs/model.md
// §3) h[N,D] = (o + bo) ⊙ ao + (hp + br) ⊙ ar. hp, ar, br undefined → first term only (sub-layer
// 0).
void residual_merge_forward(const Tensor& h, const Tensor& o, const Tensor& hp, const Tensor& ao,
                            const Tensor& bo, const Tensor& ar, const Tensor& br);
// do_[N,D] = ao ⊙ dh; dhp[N,D] += ar ⊙ dh (when hp defined); dao/dbo/dar/dbr[D] += sums over N.
// do_, dhp, dao, dbo, dar and dbr may each be undefined (skipped); do_ may alias dh.
void residual_merge_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                             const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                             const Tensor& dh, const Tensor& o, const Tensor& hp, const Tensor& ao,
                             const Tensor& bo, const Tensor& ar, const Tensor& br);
// Fused merge + RMSNorm in one pass over the row: h as residual_merge_forward, then
// x[N,D] = RMSNorm(h; w), rstd[N]. Same results as the two ops in sequence.
void merge_rmsnorm_forward(const Tensor& h, const Tensor& x, const Tensor& rstd, const Tensor& o,
                           const Tensor& hp, const Tensor& ao, const Tensor& bo, const Tensor& ar,
                           const Tensor& br, const Tensor& w, float eps);
// Fused backward: dh[N,D] += RMSNorm backward of dx (dh holds the gradient arriving from the next
// merge and is updated in place to the total), then residual_merge_backward with that total;
// dw[D] += RMSNorm weight gradient. As there, do_/dhp/dao/dbo/dar/dbr may be undefined (skipped)
// and do_ may alias dh; dw may be undefined (skipped).
void merge_rmsnorm_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                            const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                            const Tensor& dw, const Tensor& dh, const Tensor& dx, const Tensor& h,
                            const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                            const Tensor& ar, const Tensor& br, const Tensor& w,
                            const Tensor& rstd);

// ---------------------------------------------------------------- CCA pieces (docs/model.md §4)
// Two-stage causal conv. u[B,T,C] → z[B,T,C]; y[B,T+1,C] saved = stage-0 output at j = −1…T−1
// (y row 0 is j = −1 and equals b0: the padding-bias subtlety). w0[C,1,2], b0[C], w1[C,d,2], b1[C];
// group g = ⌊c/d⌋ mixes its d channels. Tap 0 multiplies the earlier position.
void cca_conv_forward(const Tensor& z, const Tensor& y, const Tensor& u, const Tensor& w0,
                      const Tensor& b0, const Tensor& w1, const Tensor& b1);
// du[B,T,C] += (accumulates: qk_mean_backward writes du first); dw0, db0, dw1, db1 +=.
void cca_conv_backward(const Tensor& du, const Tensor& dw0, const Tensor& db0, const Tensor& dw1,
                       const Tensor& db1, const Tensor& dz, const Tensor& u, const Tensor& y,
                       const Tensor& w0, const Tensor& w1);

// qk-mean skip term. u[B,T,C] = [q⁰ (Hq·d) ; k⁰ (Hk·d)], z[B,T,C] conv output →
// Q[B,T,Hq,d] = z_q + ½(q⁰[h] + k⁰[g(h)]), K[B,T,Hk,d] = z_k + ½(mean_{h∈g} q⁰[h] + k⁰[g]).
void qk_mean_forward(const Tensor& Q, const Tensor& K, const Tensor& z, const Tensor& u);
// dz[B,T,C] = [dQ ; dK]; du[B,T,C] = the skip-term gradient (both overwrite).
void qk_mean_backward(const Tensor& dz, const Tensor& du, const Tensor& dQ, const Tensor& dK);

// Values with a one-token shift, applied to the projected values p[B,T,Hk·d] = x·[Wv1;Wv2]ᵀ:
// v[b,t,:half] = p[b,t,:half]; v[b,t,half:] = p[b,t−1,half:] (zero at t = 0). half = Hk·d/2.
// v must not alias p (nor dp alias dv below).
void value_shift_forward(const Tensor& v, const Tensor& p);
// dp[b,t,:half] = dv[b,t,:half]; dp[b,t,half:] = dv[b,t+1,half:] (zero at t = T−1).
void value_shift_backward(const Tensor& dp, const Tensor& dv);

// Per-head L2 normalisation to a scale: y[B,T,H,d] = s_h · x/‖x‖, s_h = √d · temp[h] (temp[H],
// linear, no clamp) or √d when temp is undefined; norm[B,T,H] = max(‖x‖, floor) saved. floor 0:
// no eps (docs/model.md §13, original semantics); transformers' native ZAYA clamps at float32's
// epsilon.
void l2norm_scale_forward(const Tensor& y, const Tensor& norm, const Tensor& x, const Tensor& temp,
                          float floor = 0);
// dx = (s/‖x‖)(dy − x̂⟨x̂,dy⟩) (overwrite; dx may alias dy); dtemp[H] += Σ ⟨√d x̂, dy⟩ when temp
// is defined. dtemp may be undefined (skipped); it must not be given without temp. Where the floor
// was hit (norm ≤ floor > 0) the map is linear: dx = (s/floor)·dy.
void l2norm_scale_backward(const Tensor& dx, const Tensor& dtemp, const Tensor& dy, const Tensor& x,
                           const Tensor& norm, const Tensor& temp, float floor = 0);

// Partial NeoX RoPE tables, always F32 (fp32 RoPE, docs/model.md §0.2.7): cos/sin[T, r/2] for
// positions pos0 … pos0+T−1.
void rope_tables(const Tensor& cos, const Tensor& sin, int64_t pos0, double theta, int64_t r);
// In place on x[B,T,H,d]: rotates the first r = 2·cos.size(1) dims of every head, position t of a
// row uses table row t. The tables must have exactly T rows: slice a longer one with .rows(0, T).
void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin);
// In place on the gradient (rotation by −angle); the same tables, exactly T rows.
void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin);

// Causal GQA attention, tiled with an online softmax (no T×T buffer). q[B,T,Hq,d],
// k,v[B,T,Hk,d], query head h uses kv head h/(Hq/Hk). Scores scaled by 1/√d, softmax in ≥ f32.
// o[B,T,Hq,d]; lse[B,Hq,T] = log-sum-exp of each score row, saved for backward.
// window = the number of keys a query sees, itself included (0 = every earlier key): query t sees
// keys max(0, t − window + 1) … t (model/attention_window.h maps a config to it). A windowed call
// costs O(T·window): key tiles wholly outside every query's window are never visited.
void attention_forward(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window = 0);
// dq, dk, dv overwrite; recomputes probabilities from lse, tile by tile. The same window as the
// forward that produced o and lse.
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& do_,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, int64_t window = 0);

// ---------------------------------------------------------------- router pieces (docs/model.md §5)
// Exact GELU y = x·Φ(x) (erf form), elementwise on any shape.
void gelu_forward(const Tensor& y, const Tensor& x);
// dx = dy · (Φ(x) + x φ(x)) (overwrite).
void gelu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x);

// Exponential depth averaging, in place: r[N,R] += gamma[R] ⊙ rprev[N,R].
void eda_forward(const Tensor& r, const Tensor& gamma, const Tensor& rprev);
// drprev[N,R] += gamma ⊙ dr; dgamma[R] += Σ_n dr ⊙ rprev. Either may be undefined (skipped).
void eda_backward(const Tensor& drprev, const Tensor& dgamma, const Tensor& dr, const Tensor& rprev,
                  const Tensor& gamma);

// Softmax over all K classes (≥ f32, fp32 softmax, docs/model.md §0.2.2) and biased top-1 (fp32(p)
// + b, docs/model.md §0.2.8): choice[n] = argmax_e p[n,e] + b[e] (ties → lowest index), weight[n] =
// p[n, choice[n]] (not renormalised). logits[N,K] → probs[N,K], choice I32 [N], weight[N];
// biases[K] same float dtype as logits.
void router_select_forward(const Tensor& probs, const Tensor& choice, const Tensor& weight,
                           const Tensor& logits, const Tensor& biases);
// dlogits[N,K] = dweight[n] · p[e*] (δ_{j,e*} − p_j) (overwrite). No gradient to the biases.
void router_select_backward(const Tensor& dlogits, const Tensor& dweight, const Tensor& probs,
                            const Tensor& choice);

// ---------------------------------------------------------------- MoE dispatch (docs/model.md
// §5.5–5.6) Dropless top-1 dispatch. x[N,D], choice I32 [N] in [0, E] where E = skip class,
// weight[N], w1[E,F,D] (rows 0…F/2−1 gate, F/2…F−1 up), w2[E,D,F/2].
// Tokens are grouped by expert and each expert runs one GEMM per projection.
// Real expert: f = W2 (SiLU(g) ⊙ u), [g;u] = W1 x. Skip: f = x. out[N,D] = weight ⊙ f.
// Saved for backward: f[N,D], gu[N,F] and act[N,F/2] (rows of skip tokens are zeroed, unused),
// and the grouping: order I32 [N] (x's device) lists the tokens of class 0, then 1, …, then the
// skip class E, each ascending; offsets I32 [E+2] (host memory): class c owns
// order[offsets[c] … offsets[c+1]). (On a GPU the offsets are the one read-back of the forward;
// the backward takes them instead of reading them again.)
void moe_forward(const Tensor& out, const Tensor& f, const Tensor& gu, const Tensor& act,
                 const Tensor& x, const Tensor& choice, const Tensor& weight, const Tensor& w1,
                 const Tensor& w2, const Tensor& order, const Tensor& offsets);
// dx[N,D] += (accumulates: the router trunk also reads x); dw1, dw2 +=;
// dweight[N] = ⟨dout, f⟩ (overwrite). Experts with no tokens get no gradient. order and offsets:
// the forward's for the same choice (the CPU checks the offsets against its own grouping).
void moe_backward(const Tensor& dx, const Tensor& dw1, const Tensor& dw2, const Tensor& dweight,
                  const Tensor& dout, const Tensor& x, const Tensor& choice, const Tensor& weight,
                  const Tensor& w1, const Tensor& w2, const Tensor& f, const Tensor& gu,
                  const Tensor& act, const Tensor& order, const Tensor& offsets);

// ---------------------------------------------------------------- cross-entropy
// Per-row loss[N] = logsumexp(logits[n]) − logits[n, target[n]], lse[N] saved; rows with
// target −1 are ignored (loss 0; lse is still written). logits[N,V], target I32 [N]. Accumulation
// in ≥ f64 per row.
void xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                  const Tensor& target);
// dlogits[N,V] = scale · (softmax − onehot(target)) for counted rows, 0 for ignored rows
// (overwrite; dlogits may alias logits).
void xent_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                   const Tensor& target, double scale);

// Fused tied LM head + cross-entropy: the loss of logits = x[N,D] · w[V,D]ᵀ without an [N,V]
// buffer. Logits are computed in tiles (row blocks × vocabulary chunks) into per-thread scratch
// and folded into an online log-sum-exp; loss[N] and lse[N] as xent_forward of linear_forward's
// logits (rows with target −1: loss 0, lse still written). Sums in f64 per row, exponentials in
// f32 for F32 (ops/cpu/exp_vec.h) and f64 for F64. target I32 [N] in [−1, V).
void lm_head_xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& w,
                          const Tensor& target);
// With P = scale · (softmax − onehot(target)) (zero rows for target −1), recomputed tile by tile
// from x, w and lse: dx[N,D] = P · w (overwrite) and dw[V,D] += Pᵀ · x. dx or dw may be undefined
// (skipped). Same results as xent_backward + linear_backward up to rounding; the bits do not
// depend on the thread count.
void lm_head_xent_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w,
                           const Tensor& lse, const Tensor& target, double scale);
// Training's one pass: loss[N] and lse[N] as lm_head_xent_forward, and with the gradient scale
// known before the forward, dx[N,D] = P · w (overwrite) and dw[V,D] += Pᵀ · x as
// lm_head_xent_backward, from ONE logits product per row block (3 GEMMs of N·V·D in all, against
// forward + backward's 4). Row blocks of 16–256 rows (a function of V) hold their whole vocabulary
// (≤ max(2^21, 16·V) floats each, never [N,V]); dx and dw are required. Same results as forward +
// backward up to rounding; the bits do not depend on the thread count.
void lm_head_xent_forward_backward(const Tensor& loss, const Tensor& lse, const Tensor& dx,
                                   const Tensor& dw, const Tensor& x, const Tensor& w,
                                   const Tensor& target, double scale);

// ---------------------------------------------------------------- decoding (forward only)
// The two-stage CCA conv continued from a carried state (docs/model.md §4.8). u[L,C] holds L new
// consecutive positions of one sequence; state[2,C] holds the two raw columns before them
// (u_{t−2}, u_{t−1}; zeros at the sequence start, which reproduces y_{−1} = b0) and is advanced in
// place to the last two columns of [state ; u]. z[L,C] equals cca_conv_forward's rows for those
// positions. F32 activations; w0 and w1 F32 or BF16.
void cca_conv_step_forward(const Tensor& z, const Tensor& state, const Tensor& u, const Tensor& w0,
                           const Tensor& b0, const Tensor& w1, const Tensor& b1);

// Causal GQA attention of L new queries over one sequence's cache: q[L,Hq,d]; k, v[S,Hk,d] hold
// positions 0…S−1 (S ≥ L), the queries being the last L of them (query i is at position S−L+i and
// sees keys 0…S−L+i). o[L,Hq,d]. Scores scaled by 1/√d, softmax in f32, as attention_forward.
// window as attention_forward's (0 = all): query i sees key j iff j ≤ S−L+i and S−L+i − j <
// window, so the last query needs only the last `window` rows of k and v (a ring cache may hold
// just those, in position order).
void attention_cached_forward(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v,
                              int64_t window = 0);

// ---------------------------------------------------------------- optimizer math
// Muon's quintic Newton–Schulz orthogonalisation (docs/training.md); an op without backward.
// g[rows,cols] → out[rows,cols] (may alias g). Works on the short side (the Gram matrix of the
// smaller dimension), X = G/(‖G‖_F + 1e-7), then `steps` times: A = X·Xᵀ, B = b·A + c·A·A,
// X = a·X + B·X with (a,b,c) = (3.4445, −4.7750, 2.0315). symmetric: A and A·A as symmetric
// products (upper triangle only, half the work; CPU: ops/cpu/syrk.h, GPU: ops/gpu/syrk.h);
// otherwise plain GEMMs. Same result up to rounding; deterministic.
// g[E,rows,cols] (out the same shape): E matrices, each orthogonalised on its own (its own norm),
// the same as E calls on the [rows,cols] slices (bit for bit on the CPU; the GPU runs them in one
// call, back to back). bf16: the GPU rounds the products' operands (X, A, B) to BF16 and
// accumulates in F32 (outputs F32; within BF16 tolerance of the F32 result); the CPU has no BF16
// GEMM and computes in F32 whatever bf16 says.
void newton_schulz(const Tensor& out, const Tensor& g, int steps, bool symmetric,
                   bool bf16 = false);

// ---------------------------------------------------------------- memory: fill, copy, rows
// The ops that let model/, train/ and infer/ leave tensor memory alone (docs/architecture.md, "The
// device seam"). A tensor's rows are its first dimension, W = numel / shape[0] elements each. Every
// element of t = value, converted once to t's dtype (F32, F64 or I32).
void fill(const Tensor& t, double value);
// Every byte of t = 0 (any dtype).
void fill_zero(const Tensor& t);
// t[i] = float(std · CounterRng{seed, stream}.normal(i)) (core/rng.h): element i depends only on
// (seed, stream, i), so any thread count gives the same bits. t F32.
void fill_normal(const Tensor& t, uint64_t seed, uint64_t stream, double std);
// t[i] = a·(2·CounterRng{seed, stream}.uniform(i) − 1), uniform on [−a, a], computed in f32 and
// stored in t's dtype (F32, or BF16 rounded to nearest even). Same bits on any thread count.
void fill_uniform(const Tensor& t, uint64_t seed, uint64_t stream, double a);
// dst = src converted element for element (same element count): F32 → BF16 rounds to nearest
// even, BF16 → F32 widens exactly; equal dtypes copy.
void convert(const Tensor& dst, const Tensor& src);
// dst = src element for element: same dtype and element count (shapes may differ); dst and src
// must not overlap (unless they are the same tensor: a no-op).
void copy(const Tensor& dst, const Tensor& src);
// One range of copy_segments, in elements of the two flat buffers.
struct CopySegment {
  int64_t src = 0, dst = 0, length = 0;
};
// dst[s.dst … s.dst + s.length) = src[s.src … s.src + s.length) for every segment (segments in
// parallel; they must not overlap in dst). dst and src: same dtype, any shape (flat offsets). What
// the optimizer's bucket pack (gradients → bucket) and unpack (bucket → parameters) are.
void copy_segments(const Tensor& dst, const Tensor& src, std::span<const CopySegment> segments);
// dst[m] = src[row_ids[m]]: dst[M,W], src[R,W], row_ids I32 [M] in [0, R).
void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& row_ids);
// dst[row_ids[m]] = weight[row_ids[m]] · src[m] (F32 products, as `w * x`), or = src[m] when
// weight is undefined. dst[R,W], src[M,W], row_ids I32 [M] in [0, R), distinct; weight[R].
void scatter_rows(const Tensor& dst, const Tensor& row_ids, const Tensor& src,
                  const Tensor& weight);
// dst[N, A+B] = [a[N,A] ‖ b[N,B]] row by row (same dtype).
void concat_cols(const Tensor& dst, const Tensor& a, const Tensor& b);
// Next-token targets of ids[B,T] (I32, flat [B·T]): targets[b,t] = ids[b,t+1] for t < T−1 and −1
// (ignored) at each row's last position. targets I32 [B·T], not aliasing ids.
void shift_targets(const Tensor& targets, const Tensor& ids, int64_t B, int64_t T);

// ---------------------------------------------------------------- reductions, counting, scaling
// Σ t (F32 or F64) in double: fixed blocks of 2^16 elements, each summed in order, then the
// partial sums in order, so the bits do not depend on the thread count (≤ 2^16 elements: exactly
// the sequential sum).
double sum(const Tensor& t);
// out[0] = sum(t), the same bits, left on t's device (out F64 [1]): no host synchronisation (a
// training step's loss on a GPU is read once per step, not once per micro-batch).
void sum_to(const Tensor& out, const Tensor& t);
// Σ double(t)² with the same blocks (the global gradient norm's sum).
double sum_squares(const Tensor& t);
// Number of entries ≥ 0 of target (I32): the rows xent_forward scores.
int64_t count_scored(const Tensor& target);
// counts[k] += #{n : choice[n] = k}: choice I32 [N] with values in [0, K), counts I64 or F64 [K].
void count_classes(const Tensor& counts, const Tensor& choice, int64_t K);
// v[n] = 0 wherever choice[n] == k: v F32 [N], choice I32 [N] (e.g. the router weight of the tokens
// routed to the skip class, under native semantics).
void zero_where_class(const Tensor& v, const Tensor& choice, int64_t k);
// t *= s in place: F32 multiplies by float(s) (rounded once), F64 by s.
void scale(const Tensor& t, double s);

// ---------------------------------------------------------------- decoding activations
// SwiGLU's middle for gathered expert rows: act[M,H] = silu(g) ⊙ u with [g ; u] = gu[M,2H] and
// silu(z) = z / (1 + e^−z) in f32 (the decoder's form). F32.
void silu_mul(const Tensor& act, const Tensor& gu);

// ---------------------------------------------------------------- optimizer updates
// AdamW (torch.optim.AdamW semantics, decoupled weight decay), t = step ≥ 1:
//   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  w ← w·(1 − lr·wd) − (lr/(1−β1ᵗ))·m/(√v/√(1−β2ᵗ) +
//   ε)
// w, g, m, v F32 with one element count; the arithmetic per element is double, m and v are stored
// rounded to f32 and the update uses the unrounded values.
struct AdamWParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // t ≥ 1, for the bias corrections
  // The gradient read is float(g·float(grad_scale)): the clipping factor folded into the update
  // (the same bits as scaling g first; 1 leaves g exact).
  double grad_scale = 1;
};
void adamw_update(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v,
                  const AdamWParams& p);
// Muon's momentum step in f32, μ = float(momentum): buf = μ·buf + g, then scratch = g + μ·buf
// (nesterov) or buf. buf, scratch, g F32 with one element count; scratch is then orthogonalised
// (newton_schulz) and applied with muon_apply.
void muon_momentum(const Tensor& buf, const Tensor& scratch, const Tensor& g, double momentum,
                   bool nesterov);
// Muon's weight step: w = float(double(w)·decay − lr·scale·double(u)) (decay = 1 − lr·wd, scale
// the RMS matching factor). w, u F32 with one element count.
void muon_apply(const Tensor& w, const Tensor& u, double lr, double decay, double scale);
// The balancing-bias AdamW (docs/model.md §10) of one MoE layer: from class counts[K] (F64, exact
// integers; N_tok = Σ counts, the skip class included) the error e_i = counts[i]/N_tok − 1/n of
// the n = bias.numel() real experts is the gradient of an AdamW step on bias[n] with moments
// m[n], v[n] (F32; arithmetic in double, stored rounded). No-op when N_tok = 0. t = p.step ≥ 1.
struct BalanceParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;
};
void balance_update(const Tensor& bias, const Tensor& m, const Tensor& v, const Tensor& counts,
                    const BalanceParams& p);

}  // namespace zaya::ops
