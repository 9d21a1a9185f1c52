// The GPU flash forward shared by ops/gpu/attention.cu (attention_forward) and
// ops/gpu/attention_cached.cu (prefill over a cache, many new queries), defined in attention.cu;
// and the GEMM path of the training attention (attention_gemm.cu).
#pragma once
#include <cstdint>

namespace zaya::gpu {

// Causal GQA flash attention on stream(): q[B,Tq,Hq,d], k,v[B,Tk,Hk,d] (Tk ≥ Tq, Hk | Hq,
// 1 ≤ d ≤ kFlashMaxHead); query row t sits at position p = t + Tk − Tq and sees keys 0 … p, or
// with window > 0 only the last `window` of them, p − window + 1 … p (ops/ops.h's convention: the
// query itself counts); query head h reads kv head h/(Hq/Hk). Scores (q/√d)·k, online softmax in
// f32. o[B,Tq,Hq,d]; lse[B,Hq,Tq] = log-sum-exp of each score row (null: not written). A windowed
// call visits only the key tiles inside some row's window: O(Tq·window).
void flash_attention_forward(float* o, float* lse, const float* q, const float* k, const float* v,
                             int64_t B, int64_t Tq, int64_t Tk, int64_t Hq, int64_t Hk, int64_t d,
                             int64_t window = 0);

// The kernels' window for a call's `window` over Tk keys: 0 (every earlier key) where window ≤ 0
// or window ≥ Tk — the same mask, so such calls run the plain causal code — else window.
int kernel_window(int64_t window, int64_t Tk);

// The largest head size of the flash kernels: their tiles are padded to 16, 32, 64, 128 or 256,
// and AMD's 64 KiB of shared memory per block holds them up to 128 (attention.cu's tile sizes).
#if defined(ZAYA_GPU_HIP)
inline constexpr int64_t kFlashMaxHead = 128;
#else
inline constexpr int64_t kFlashMaxHead = 256;
#endif

// attention_cached.cu: up to kDecodeMaxL new queries take the decode path (keys in chunks of
// kDecodeChunk, the G = Hq/Hk query heads of a kv head in one block, whose G·(d + kDecodeChunk)
// floats of shared memory must fit kDecodeMaxSmem bytes); more take the flash forward.
inline constexpr int kDecodeChunk = 256;
inline constexpr int kDecodeMaxL = 64;
inline constexpr int64_t kDecodeMaxSmem = 48 * 1024;

// The training attention's implementation (ops::attention_forward / attention_backward on the
// GPU): ZAYA_GPU_ATTENTION unset, empty or "flash": the flash kernels above (the default);
// "gemm": attention_gemm.cu, its products through gemm() (cuBLASLt on NVIDIA) over materialised
// score blocks, opt-in (the faster of the two is for a device's measurements to pick); any
// other value: zaya::Error.
enum class GpuAttentionPath { Flash, Gemm };
GpuAttentionPath gpu_attention_path();

// attention_gemm.cu: the same contract as the flash path (q[B,T,Hq,d], k,v[B,T,Hk,d],
// o[B,T,Hq,d], lse[B,Hq,T], Tq = Tk = T, the same window). The backward takes Δ[B,Hq,T] = ⟨dO, O⟩
// per row and overwrites dq, dk, dv. A windowed call's score blocks span only the keys their rows'
// windows reach: O(T·window).
void gemm_attention_forward(float* o, float* lse, const float* q, const float* k, const float* v,
                            int64_t B, int64_t T, int64_t Hq, int64_t Hk, int64_t d,
                            int64_t window = 0);
void gemm_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                             const float* k, const float* v, const float* lse, const float* delta,
                             int64_t B, int64_t T, int64_t Hq, int64_t Hk, int64_t d,
                             int64_t window = 0);

}  // namespace zaya::gpu
