// The checks of the GPU backend's limits (ops/gpu/support.h) and its error. Host code.
#include "ops/gpu/support.h"

#include "core/assert.h"
#include "ops/gpu/attention.h"

namespace zaya::ops::gpu {

void unsupported(const char* op, const std::string& why) {
  fail("{}: {}", op, why);
}

namespace {

using zaya::gpu::GpuAttentionPath;
using zaya::gpu::kDecodeChunk;
using zaya::gpu::kDecodeMaxL;
using zaya::gpu::kDecodeMaxSmem;
using zaya::gpu::kFlashMaxHead;

std::string flash_head(int64_t d, const char* instead) {
  if (d <= kFlashMaxHead) return "";
  return fmt::format("head size {}, the GPU's flash-attention kernels take at most {}{}", d,
                     kFlashMaxHead, instead);
}

std::string cached_attention(const Tensor& q, const Tensor& k) {  // q [L,Hq,d], k [S,Hk,d]
  const int64_t L = q.size(0), G = q.size(1) / k.size(1), d = q.size(2);
  if (L > kDecodeMaxL) return flash_head(d, "");
  const int64_t bytes = int64_t(sizeof(float)) * G * (d + kDecodeChunk);
  if (bytes <= kDecodeMaxSmem) return "";
  return fmt::format(
      "{} query heads per kv head at head size {} need {} bytes of the GPU's shared memory, at "
      "most {}",
      G, d, bytes, kDecodeMaxSmem);
}

}  // namespace

std::string exceeded(const Support& s, CallTensors t) {
  switch (s.limit) {
    case Limit::None:
      return "";
    case Limit::RowWidth: {
      const int64_t D = t[s.arg]->size(-1);
      if (D <= kMaxRowWidth) return "";
      return fmt::format("rows of {} elements, the GPU's row kernels take at most {}", D,
                         kMaxRowWidth);
    }
    case Limit::FlashHead:
      if (zaya::gpu::gpu_attention_path() == GpuAttentionPath::Gemm) return "";
      return flash_head(t[s.arg]->size(-1),
                        "; ZAYA_GPU_ATTENTION=gemm computes the attention through GEMMs instead");
    case Limit::CachedAttention:
      return cached_attention(*t[1], *t[2]);
    case Limit::WeightedScatter:
      if (!t[3]->defined() || t[0]->dtype == DType::F32) return "";
      return fmt::format("the GPU's weighted scatter computes in F32, not {}",
                         dtype_name(t[0]->dtype));
  }
  return "";
}

}  // namespace zaya::ops::gpu
