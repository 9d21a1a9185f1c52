// moe_forward / moe_backward on the GPU: dropless top-1 dispatch (docs/model.md §5.5–5.6, §8.6), the
// CPU's math (ops/cpu/moe.cpp) arranged for the device.
//
// Tokens are grouped by class on the device with a stable counting sort (per block of 256 tokens:
// each token's rank among the earlier ones of its class and the block's class counts; one scan;
// a scatter of token indices), so `order` lists the tokens of class 0, then 1, …, then the skip
// class E, each ascending: the CPU's order, independent of the launch. The E + 3 offsets come to
// the host (the one synchronising copy; the backward takes the forward's order and offsets); then
// the tokens of all real experts are gathered into one sorted block of rows, each expert with
// tokens runs one GEMM per projection (zaya::gpu::gemm) on its contiguous slice, the SiLU product
// runs once over all rows, and one pass writes everything back to token order (skip tokens: f = x,
// gu and act rows zeroed). Backward mirrors it; experts without tokens run nothing, so their
// gradients stay untouched.
//
// Shape-suffix legend as ops/cpu/moe.cpp; R = tokens routed to real experts (sorted rows), and
// x_RD, gu_RF, act_RH are those tokens' rows in class order.
#include <algorithm>
#include <vector>

#include "ops/backend.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gemm.h"

namespace zaya::ops::gpu {

using namespace zaya::gpu;

namespace {

constexpr int kChunk = kBlock;  // tokens per block of the grouping kernels
constexpr int kScanThreads = 1024;

// Class of a choice: 0…E (E = skip), E + 1 for a value out of range (sorted last, reported).
__device__ __forceinline__ int class_of(int32_t c, int E) {
  return (c < 0 || c > E) ? E + 1 : c;
}

// Per block of kChunk tokens (blockDim.x == kChunk): rank_N[n] = #earlier tokens of n's class in
// the block; counts_CB[c·blocks + block] = the block's tokens of class c (C = E + 2 classes).
__global__ void classify_kernel(int32_t* rank_N, int32_t* counts_CB, const int32_t* choice_N,
                                int64_t N, int E) {
  __shared__ int32_t cls[kChunk];
  const int t = threadIdx.x;
  const int64_t n = int64_t(blockIdx.x) * kChunk + t;
  const int c = n < N ? class_of(choice_N[n], E) : -1;  // -1: past the end
  cls[t] = c;
  __syncthreads();
  if (n < N) {
    int32_t r = 0;
    for (int s = 0; s < t; ++s) r += cls[s] == c;
    rank_N[n] = r;
  }
  for (int k = t; k < E + 2; k += kChunk) {
    int32_t count = 0;
    for (int s = 0; s < kChunk; ++s) count += cls[s] == k;
    counts_CB[int64_t(k) * gridDim.x + blockIdx.x] = count;
  }
}

// One block of kScanThreads: base_CB = exclusive prefix sums of counts_CB[L] (class-major, so
// class c's tokens start at offset_C[c] = base_CB[c·blocks]); offset_C[C] = the total, N.
__global__ void scan_kernel(int32_t* base_CB, int32_t* offset_C, const int32_t* counts_CB,
                            int64_t L, int64_t blocks, int C) {
  __shared__ int32_t part[kScanThreads];
  const int t = threadIdx.x;
  const int64_t per = (L + kScanThreads - 1) / kScanThreads;
  const int64_t i0 = t * per < L ? t * per : L, i1 = i0 + per < L ? i0 + per : L;
  int32_t own = 0;
  for (int64_t i = i0; i < i1; ++i) own += counts_CB[i];
  part[t] = own;
  __syncthreads();
  for (int d = 1; d < kScanThreads; d *= 2) {  // Hillis–Steele inclusive scan
    const int32_t v = t >= d ? part[t - d] : 0;
    __syncthreads();
    part[t] += v;
    __syncthreads();
  }
  int32_t run = part[t] - own;
  for (int64_t i = i0; i < i1; ++i) {
    base_CB[i] = run;
    if (i % blocks == 0) offset_C[i / blocks] = run;
    run += counts_CB[i];
  }
  if (t == kScanThreads - 1) offset_C[C] = part[t];
}

__global__ void order_kernel(int32_t* order_N, const int32_t* rank_N, const int32_t* base_CB,
                             const int32_t* choice_N, int64_t N, int E, int64_t blocks) {
  ZAYA_GPU_FOR(n, N) {
    const int c = class_of(choice_N[n], E);
    order_N[base_CB[c * blocks + n / kChunk] + rank_N[n]] = int32_t(n);
  }
}

// Groups the tokens by class into order_N (device, [N]); returns the host offsets [E + 3]:
// class c (0…E) owns order[offset[c] … offset[c+1]).
std::vector<int32_t> group_by_class(int32_t* order_N, const int32_t* choice_N, int64_t N, int E) {
  // The grouping kernels index tokens with int32.
  ZAYA_ASSERT(N < (int64_t(1) << 31), "moe: too many tokens for I32 indices");
  const int C = E + 2;
  const int64_t blocks = (N + kChunk - 1) / kChunk, L = C * blocks;
  Scratch rank(size_t(N) * 4), counts(size_t(L) * 4), base(size_t(L) * 4),
      offset_d(size_t(C + 1) * 4);
  classify_kernel<<<unsigned(blocks), kChunk, 0, stream()>>>(rank.as<int32_t>(),
                                                             counts.as<int32_t>(), choice_N, N, E);
  ZAYA_GPU_LAUNCH_CHECK();
  scan_kernel<<<1, kScanThreads, 0, stream()>>>(base.as<int32_t>(), offset_d.as<int32_t>(),
                                                counts.as<int32_t>(), L, blocks, C);
  ZAYA_GPU_LAUNCH_CHECK();
  std::vector<int32_t> offset(size_t(C + 1));
  copy_to_host(offset.data(), offset_d.as<int32_t>(), offset.size() * 4);
  // The data, which ops.cpp does not read: every choice in [0, E], so every token in a class.
  ZAYA_ASSERT(offset[size_t(E + 1)] == N, "moe: a choice outside [0, E] (E = skip)");
  order_kernel<<<blocks_for(N), kBlock, 0, stream()>>>(order_N, rank.as<int32_t>(),
                                                       base.as<int32_t>(), choice_N, N, E, blocks);
  ZAYA_GPU_LAUNCH_CHECK();
  offset.pop_back();  // [E + 2]: offset[E + 1] = N
  return offset;
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Row helpers of one block: threads stride the row; kVec moves float4 (W % 4 == 0, 16-byte
// aligned rows). row_apply: dst[j] = op(dst[j], src[j]), dst read only with kRead.
template <bool kVec, bool kRead, class Op>
__device__ __forceinline__ void row_apply(float* dst, const float* src, int64_t W, Op op) {
  if (kVec) {
    float4* d = reinterpret_cast<float4*>(dst);
    const float4* s = reinterpret_cast<const float4*>(src);
    for (int64_t j = threadIdx.x; j < W / 4; j += blockDim.x) {
      const float4 v = s[j];
      const float4 a = kRead ? d[j] : make_float4(0, 0, 0, 0);
      d[j] = make_float4(op(a.x, v.x), op(a.y, v.y), op(a.z, v.z), op(a.w, v.w));
    }
  } else {
    for (int64_t j = threadIdx.x; j < W; j += blockDim.x)
      dst[j] = op(kRead ? dst[j] : 0.0f, src[j]);
  }
}

template <bool kVec>
__device__ __forceinline__ void copy_row(float* dst, const float* src, int64_t W) {
  row_apply<kVec, false>(dst, src, W, [](float, float v) { return v; });
}

// dst = w · src (F32 products, as the CPU's `weight * f`).
template <bool kVec>
__device__ __forceinline__ void scale_row(float* dst, const float* src, float w, int64_t W) {
  row_apply<kVec, false>(dst, src, W, [w](float, float v) { return w * v; });
}

// dst += w · src.
template <bool kVec>
__device__ __forceinline__ void axpy_row(float* dst, const float* src, float w, int64_t W) {
  row_apply<kVec, true>(dst, src, W, [w](float a, float v) { return a + w * v; });
}

// dst += src.
template <bool kVec>
__device__ __forceinline__ void add_row(float* dst, const float* src, int64_t W) {
  row_apply<kVec, true>(dst, src, W, [](float a, float v) { return a + v; });
}

template <bool kVec>
__device__ __forceinline__ void zero_row(float* dst, int64_t W) {
  if (kVec) {
    float4* d = reinterpret_cast<float4*>(dst);
    for (int64_t j = threadIdx.x; j < W / 4; j += blockDim.x) d[j] = make_float4(0, 0, 0, 0);
  } else {
    for (int64_t j = threadIdx.x; j < W; j += blockDim.x) dst[j] = 0.0f;
  }
}

__device__ __forceinline__ float sigmoid(float z) {
  return 1.0f / (1.0f + expf(-z));
}

// x_RD[p] = x_ND[order[p]] for the R sorted rows of real experts.
template <bool kVec>
__global__ void gather_kernel(float* x_RD, const float* x_ND, const int32_t* order_N, int64_t R,
                              int64_t D) {
  for (int64_t p = blockIdx.x; p < R; p += gridDim.x)
    copy_row<kVec>(x_RD + p * D, x_ND + int64_t(order_N[p]) * D, D);
}

// act = SiLU(g) ⊙ u over the sorted rows, as the CPU: g · σ(g) · u.
__global__ void silu_mul_kernel(float* act_RH, const float* gu_RF, int64_t R, int64_t H) {
  for (int64_t p = blockIdx.x; p < R; p += gridDim.x) {
    const float* gu = gu_RF + p * 2 * H;
    float* act = act_RH + p * H;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
      const float g = gu[j];
      act[j] = g * sigmoid(g) * gu[H + j];
    }
  }
}

// Back to token order: sorted row p < R (a real expert's) gives gu, act, f = its expert output
// (in f_RD) and out = weight · f; rows p ≥ R are skip tokens: f = x, out = weight · x, gu and act
// zeroed.
template <bool kVec>
__global__ void combine_kernel(float* out_ND, float* f_ND, float* gu_NF, float* act_NH,
                               const float* x_ND, const float* weight_N, const int32_t* order_N,
                               const float* f_RD, const float* gu_RF, const float* act_RH,
                               int64_t N, int64_t R, int64_t D, int64_t H) {
  const int64_t F = 2 * H;
  for (int64_t p = blockIdx.x; p < N; p += gridDim.x) {
    const int64_t n = order_N[p];
    const float w = weight_N[n];
    const float* f = p < R ? f_RD + p * D : x_ND + n * D;
    copy_row<kVec>(f_ND + n * D, f, D);
    scale_row<kVec>(out_ND + n * D, f, w, D);
    if (p < R) {
      copy_row<kVec>(gu_NF + n * F, gu_RF + p * F, F);
      copy_row<kVec>(act_NH + n * H, act_RH + p * H, H);
    } else {
      zero_row<kVec>(gu_NF + n * F, F);
      zero_row<kVec>(act_NH + n * H, H);
    }
  }
}

// Backward, one block per sorted row p: dweight[n] = ⟨dout, f⟩ in double (every token); real
// tokens gather x, act, gu and df = weight · dout into the sorted rows; skip tokens add
// weight · dout to dx.
template <bool kVec>
__global__ void prepare_kernel(float* dweight_N, float* dx_ND, float* x_RD, float* df_RD,
                               float* act_RH, float* gu_RF, const float* dout_ND, const float* x_ND,
                               const float* weight_N, const float* f_ND, const float* gu_NF,
                               const float* act_NH, const int32_t* order_N, int64_t N, int64_t R,
                               int64_t D, int64_t H) {
  __shared__ double partials[kMaxWarpsPerBlock];
  const int64_t F = 2 * H;
  for (int64_t p = blockIdx.x; p < N; p += gridDim.x) {  // uniform in the block
    const int64_t n = order_N[p];
    const float* dout = dout_ND + n * D;
    const float* f = f_ND + n * D;
    double s = 0;
    if (kVec) {
      const float4* a = reinterpret_cast<const float4*>(dout);
      const float4* b = reinterpret_cast<const float4*>(f);
      for (int64_t j = threadIdx.x; j < D / 4; j += blockDim.x) {
        const float4 u = a[j], v = b[j];
        s += double(u.x) * double(v.x) + double(u.y) * double(v.y) + double(u.z) * double(v.z) +
             double(u.w) * double(v.w);
      }
    } else {
      for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += double(dout[j]) * double(f[j]);
    }
    s = block_sum(s, partials);
    if (threadIdx.x == 0) dweight_N[n] = float(s);
    const float w = weight_N[n];
    if (p < R) {
      copy_row<kVec>(x_RD + p * D, x_ND + n * D, D);
      scale_row<kVec>(df_RD + p * D, dout, w, D);
      copy_row<kVec>(act_RH + p * H, act_NH + n * H, H);
      copy_row<kVec>(gu_RF + p * F, gu_NF + n * F, F);
    } else {
      axpy_row<kVec>(dx_ND + n * D, dout, w, D);
    }
  }
}

// In place over the sorted rows: gu_RF becomes dgu from dact_RH (the CPU's formulas).
__global__ void silu_mul_backward_kernel(float* gu_RF, const float* dact_RH, int64_t R, int64_t H) {
  for (int64_t p = blockIdx.x; p < R; p += gridDim.x) {
    float* gu = gu_RF + p * 2 * H;
    const float* dact = dact_RH + p * H;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
      const float z = gu[j], u = gu[H + j], sig = sigmoid(z), da = dact[j];
      gu[j] = da * u * sig * (1.0f + z * (1.0f - sig));  // SiLU'(g) = σ(1 + g(1 − σ))
      gu[H + j] = da * z * sig;
    }
  }
}

// dx_ND[order[p]] += dx_RD[p] for the sorted rows of real experts.
template <bool kVec>
__global__ void scatter_add_kernel(float* dx_ND, const float* dx_RD, const int32_t* order_N,
                                   int64_t R, int64_t D) {
  for (int64_t p = blockIdx.x; p < R; p += gridDim.x)
    add_row<kVec>(dx_ND + int64_t(order_N[p]) * D, dx_RD + p * D, D);
}

GemmOperand f32(const float* p, int64_t ld, bool transposed = false) {
  return GemmOperand{p, DType::F32, ld, transposed};
}

// C[M,N] = op(A) · op(B) + beta · C (F32).
void gemm_f32(int64_t M, int64_t N, int64_t K, GemmOperand a, GemmOperand b, float* c, int64_t ldc,
              float beta) {
  Gemm g;
  g.M = M, g.N = N, g.K = K, g.a = a, g.b = b, g.c = c, g.ldc = ldc, g.beta = beta;
  gemm(g);
}

// Shapes shared by forward and backward: {N, D, E, F} (w1 [E,F,D], choice [N]).
struct Shapes {
  int64_t N, D, E, F;
};

Shapes moe_shapes(const Tensor& choice, const Tensor& w1) {
  return {choice.numel(), w1.size(2), w1.size(0), w1.size(1)};
}

// fn(e, p0, M) for each real expert e with M > 0 tokens, sorted rows p0 … p0 + M.
template <class Fn>
void for_each_expert(const std::vector<int32_t>& offset, int64_t E, Fn&& fn) {
  for (int64_t e = 0; e < E; ++e) {
    const int64_t p0 = offset[size_t(e)], M = offset[size_t(e + 1)] - p0;
    if (M > 0) fn(e, p0, M);
  }
}

template <class... P>
bool all_aligned(const P*... p) {
  return (aligned16(p) && ...);
}

}  // namespace

void moe_forward(const Tensor& out, const Tensor& f, const Tensor& gu, const Tensor& act,
                 const Tensor& x, const Tensor& choice, const Tensor& weight, const Tensor& w1,
                 const Tensor& w2, const Tensor& order, const Tensor& offsets) {
  const Shapes sh = moe_shapes(choice, w1);
  const int64_t N = sh.N, D = sh.D, E = sh.E, F = sh.F;  // plain locals: lambdas capture them
  const std::vector<int32_t> offset =
      N == 0 ? std::vector<int32_t>(size_t(E + 2), 0)
             : group_by_class(order.ptr<int32_t>(), choice.ptr<int32_t>(), N, int(E));
  std::copy(offset.begin(), offset.end(), offsets.ptr<int32_t>());  // host memory: for backward
  if (N == 0) return;
  const int64_t H = F / 2;
  const int32_t* order_N = order.ptr<int32_t>();
  const int64_t R = offset[size_t(E)];  // tokens of real experts, sorted first
  Scratch xf(size_t(R) * D * 4), gus(size_t(R) * F * 4), acts(size_t(R) * H * 4);
  float* xf_RD = xf.as<float>();  // x rows, then (each expert's slice overwritten) f rows
  float* gu_RF = gus.as<float>();
  float* act_RH = acts.as<float>();
  const bool vec = D % 4 == 0 && H % 4 == 0 &&
                   all_aligned(out.data, f.data, gu.data, act.data, x.data, xf_RD, gu_RF, act_RH);
  if (R > 0) {
    if (vec)
      gather_kernel<true>
          <<<blocks_for(R, 1), kBlock, 0, stream()>>>(xf_RD, x.ptr<float>(), order_N, R, D);
    else
      gather_kernel<false>
          <<<blocks_for(R, 1), kBlock, 0, stream()>>>(xf_RD, x.ptr<float>(), order_N, R, D);
    ZAYA_GPU_LAUNCH_CHECK();
    for_each_expert(offset, E, [&](int64_t e, int64_t p0, int64_t M) {
      gemm_f32(M, F, D, f32(xf_RD + p0 * D, D), f32(w1.ptr<float>() + e * F * D, D, true),
               gu_RF + p0 * F, F, 0.0f);
    });
    silu_mul_kernel<<<blocks_for(R, 1), kBlock, 0, stream()>>>(act_RH, gu_RF, R, H);
    ZAYA_GPU_LAUNCH_CHECK();
    for_each_expert(offset, E, [&](int64_t e, int64_t p0, int64_t M) {
      gemm_f32(M, D, H, f32(act_RH + p0 * H, H), f32(w2.ptr<float>() + e * D * H, H, true),
               xf_RD + p0 * D, D, 0.0f);
    });
  }
  auto combine = vec ? combine_kernel<true> : combine_kernel<false>;
  combine<<<blocks_for(N, 1), kBlock, 0, stream()>>>(
      out.ptr<float>(), f.ptr<float>(), gu.ptr<float>(), act.ptr<float>(), x.ptr<float>(),
      weight.ptr<float>(), order_N, xf_RD, gu_RF, act_RH, N, R, D, H);
  ZAYA_GPU_LAUNCH_CHECK();
}

void moe_backward(const Tensor& dx, const Tensor& dw1, const Tensor& dw2, const Tensor& dweight,
                  const Tensor& dout, const Tensor& x, const Tensor& choice, const Tensor& weight,
                  const Tensor& w1, const Tensor& w2, const Tensor& f, const Tensor& gu,
                  const Tensor& act, const Tensor& order, const Tensor& offsets) {
  const Shapes sh = moe_shapes(choice, w1);
  const int64_t N = sh.N, D = sh.D, E = sh.E, F = sh.F;  // plain locals: lambdas capture them
  if (N == 0) return;
  const int64_t H = F / 2;
  // The forward's grouping: no regrouping, no read-back.
  const int32_t* order_N = order.ptr<int32_t>();
  const std::vector<int32_t> offset(offsets.ptr<int32_t>(), offsets.ptr<int32_t>() + E + 2);
  const int64_t R = offset[size_t(E)];
  Scratch xs(size_t(R) * D * 4), dfs(size_t(R) * D * 4), gus(size_t(R) * F * 4),
      acts(size_t(R) * H * 4);
  float* x_RD = xs.as<float>();
  float* df_RD = dfs.as<float>();    // df = weight · dout, then (per expert) the rows of dx
  float* gu_RF = gus.as<float>();    // gu, then dgu (in place)
  float* act_RH = acts.as<float>();  // act, then (per expert, after its dw2) dact
  const bool vec = D % 4 == 0 && H % 4 == 0 &&
                   all_aligned(dx.data, dout.data, x.data, f.data, gu.data, act.data, x_RD, df_RD,
                               gu_RF, act_RH);
  auto prepare = vec ? prepare_kernel<true> : prepare_kernel<false>;
  prepare<<<blocks_for(N, 1), kBlock, 0, stream()>>>(
      dweight.ptr<float>(), dx.ptr<float>(), x_RD, df_RD, act_RH, gu_RF, dout.ptr<float>(),
      x.ptr<float>(), weight.ptr<float>(), f.ptr<float>(), gu.ptr<float>(), act.ptr<float>(),
      order_N, N, R, D, H);
  ZAYA_GPU_LAUNCH_CHECK();
  if (R == 0) return;
  for_each_expert(offset, E, [&](int64_t e, int64_t p0, int64_t M) {
    // dw2[e] += dfᵀ · act, then dact = df · w2[e] over the same rows of act (stream order).
    gemm_f32(D, H, M, f32(df_RD + p0 * D, D, true), f32(act_RH + p0 * H, H),
             dw2.ptr<float>() + e * D * H, H, 1.0f);
    gemm_f32(M, H, D, f32(df_RD + p0 * D, D), f32(w2.ptr<float>() + e * D * H, H), act_RH + p0 * H,
             H, 0.0f);
  });
  silu_mul_backward_kernel<<<blocks_for(R, 1), kBlock, 0, stream()>>>(gu_RF, act_RH, R, H);
  ZAYA_GPU_LAUNCH_CHECK();
  for_each_expert(offset, E, [&](int64_t e, int64_t p0, int64_t M) {
    // dw1[e] += dguᵀ · x; the rows of dx = dgu · w1[e] (into df's rows, read by now).
    gemm_f32(F, D, M, f32(gu_RF + p0 * F, F, true), f32(x_RD + p0 * D, D),
             dw1.ptr<float>() + e * F * D, D, 1.0f);
    gemm_f32(M, D, F, f32(gu_RF + p0 * F, F), f32(w1.ptr<float>() + e * F * D, D), df_RD + p0 * D,
             D, 0.0f);
  });
  auto scatter_add = vec ? scatter_add_kernel<true> : scatter_add_kernel<false>;
  scatter_add<<<blocks_for(R, 1), kBlock, 0, stream()>>>(dx.ptr<float>(), df_RD, order_N, R, D);
  ZAYA_GPU_LAUNCH_CHECK();
}

}  // namespace zaya::ops::gpu
