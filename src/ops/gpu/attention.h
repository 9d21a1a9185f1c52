// The GPU flash forward shared by ops/gpu/attention.cu (attention_forward) and
// ops/gpu/attention_cached.cu (prefill over a cache, many new queries). Defined in attention.cu.
#pragma once
#include <cstdint>

namespace zaya::gpu {

// Causal GQA flash attention on stream(): q[B,Tq,Hq,d], k,v[B,Tk,Hk,d] (Tk ≥ Tq, Hk | Hq,
// 1 ≤ d ≤ 256); query row t sits at position t + Tk − Tq and sees keys 0 … that position; query
// head h reads kv head h/(Hq/Hk). Scores (q/√d)·k, online softmax in f32. o[B,Tq,Hq,d];
// lse[B,Hq,Tq] = log-sum-exp of each score row (null: not written).
void flash_attention_forward(float* o, float* lse, const float* q, const float* k, const float* v,
                             int64_t B, int64_t Tq, int64_t Tk, int64_t Hq, int64_t Hk, int64_t d);

}  // namespace zaya::gpu
