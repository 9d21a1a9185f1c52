// What the GPU backend computes, declared once: per op of ops/backend_ops.inc, whether it takes
// F64 tensors and which limit its kernels have beyond dtypes (the table at the end; the limits'
// checks in support.cpp).
//
// ops/dispatch.h checks every call bound for the GPU against its op's entry, after ops/ops.cpp
// validated the call for every backend, and fails with a zaya::Error naming the op and the limit;
// the kernels then take their arguments as given and re-check nothing. The CPU backend computes
// everything ops/ops.cpp admits (it is the reference), so it declares nothing. Only a build with a
// GPU backend has this table: without one, ops/gpu/no_gpu.cpp fails every GPU call.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace zaya::ops::gpu {

// A call's Tensor arguments, in the order of the op's parameters (ops/backend_ops.inc).
using CallTensors = std::span<const Tensor* const>;

// A limit of an op's kernels beyond dtypes, on the call's tensor number `arg` of Support. An enum,
// not a function pointer, so that the table is data: hipcc compiles host files for the device
// too, and a pointer to a host function there is a link error.
enum class Limit : uint8_t {
  None,
  // Rows (the tensor's last dimension) of at most kMaxRowWidth elements: the row kernels.
  RowWidth,
  // The training attention's head size (the tensor's last dimension) of at most kFlashMaxHead
  // (ops/gpu/attention.h), unless ZAYA_GPU_ATTENTION=gemm takes the attention through GEMMs.
  FlashHead,
  // attention_cached_forward(o, q, k, v): the decode path's shared memory (kDecodeMaxSmem) for up
  // to kDecodeMaxL new queries, the flash kernels' head size for more.
  CachedAttention,
  // scatter_rows(dst, row_ids, src, weight): a weighted scatter computes in F32.
  WeightedScatter,
};

struct Support {
  // F64 tensors: the memory ops, reductions and optimizer updates take them. The model's ops
  // compute in F32 (BF16 weights and I32 indices where ops/ops.h has them).
  bool f64 = false;
  Limit limit = Limit::None;
  int arg = 0;
};

// The widest row of the row kernels (rmsnorm_row.cuh: 512 threads of at most 32 elements):
// RMSNorm, the residual merges, EDA.
inline constexpr int64_t kMaxRowWidth = 16384;

// "" where the call is within s.limit, else what the call exceeds (support.cpp).
std::string exceeded(const Support& s, CallTensors tensors);
// Throws zaya::Error where the GPU does not compute this call of `op` (support.cpp).
[[noreturn]] void unsupported(const char* op, const std::string& why);

inline void check_support(const char* op, const Support& s, CallTensors tensors) {
  if (!s.f64)
    for (const Tensor* t : tensors)
      if (t->defined() && t->dtype == DType::F64)
        unsupported(op, "the GPU computes in F32, not F64");
  if (s.limit != Limit::None) {
    const std::string why = exceeded(s, tensors);
    if (!why.empty()) unsupported(op, why);
  }
}

// The table: each op's entry, named as the op (a GPU build does not compile without one). A
// limit's `arg` counts the op's Tensor parameters from 0 (the entry's comment names it).
namespace support {

inline constexpr Support kF32{};             // the model's ops
inline constexpr Support kAny{.f64 = true};  // memory, reductions, optimizer updates

inline constexpr Support linear_forward = kF32;
inline constexpr Support linear_backward = kF32;
inline constexpr Support embedding_forward = kF32;
inline constexpr Support embedding_backward = kF32;
inline constexpr Support rmsnorm_forward{.limit = Limit::RowWidth, .arg = 2};          // x
inline constexpr Support rmsnorm_backward{.limit = Limit::RowWidth, .arg = 3};         // x
inline constexpr Support residual_merge_forward{.limit = Limit::RowWidth, .arg = 1};   // o
inline constexpr Support residual_merge_backward{.limit = Limit::RowWidth, .arg = 7};  // o
inline constexpr Support merge_rmsnorm_forward{.limit = Limit::RowWidth, .arg = 3};    // o
inline constexpr Support merge_rmsnorm_backward{.limit = Limit::RowWidth, .arg = 10};  // o
inline constexpr Support cca_conv_forward = kF32;
inline constexpr Support cca_conv_backward = kF32;
inline constexpr Support qk_mean_forward = kF32;
inline constexpr Support qk_mean_backward = kF32;
inline constexpr Support value_shift_forward = kF32;
inline constexpr Support value_shift_backward = kF32;
inline constexpr Support l2norm_scale_forward = kF32;
inline constexpr Support l2norm_scale_backward = kF32;
inline constexpr Support rope_tables = kF32;
inline constexpr Support rope_forward = kF32;
inline constexpr Support rope_backward = kF32;
inline constexpr Support attention_forward{.limit = Limit::FlashHead, .arg = 0};   // o
inline constexpr Support attention_backward{.limit = Limit::FlashHead, .arg = 0};  // dq
inline constexpr Support gelu_forward = kF32;
inline constexpr Support gelu_backward = kF32;
inline constexpr Support eda_forward{.limit = Limit::RowWidth, .arg = 0};   // r
inline constexpr Support eda_backward{.limit = Limit::RowWidth, .arg = 2};  // dr
inline constexpr Support router_select_forward = kF32;
inline constexpr Support router_select_backward = kF32;
inline constexpr Support moe_forward = kF32;
inline constexpr Support moe_backward = kF32;
inline constexpr Support xent_forward = kF32;
inline constexpr Support xent_backward = kF32;
inline constexpr Support lm_head_xent_forward = kF32;
inline constexpr Support lm_head_xent_backward = kF32;
inline constexpr Support lm_head_xent_forward_backward = kF32;
inline constexpr Support cca_conv_step_forward = kF32;
inline constexpr Support attention_cached_forward{.limit = Limit::CachedAttention};
inline constexpr Support newton_schulz = kF32;
inline constexpr Support fill = kAny;
inline constexpr Support fill_zero = kAny;
inline constexpr Support zero_where_class = kAny;
inline constexpr Support fill_uniform = kAny;
inline constexpr Support convert = kAny;
inline constexpr Support fill_normal = kAny;
inline constexpr Support copy = kAny;
inline constexpr Support copy_segments = kAny;
inline constexpr Support gather_rows = kAny;
inline constexpr Support scatter_rows{.f64 = true, .limit = Limit::WeightedScatter};
inline constexpr Support concat_cols = kAny;
inline constexpr Support shift_targets = kAny;
inline constexpr Support sum = kAny;
inline constexpr Support sum_to = kAny;
inline constexpr Support sum_squares = kAny;
inline constexpr Support count_scored = kAny;
inline constexpr Support count_classes = kAny;
inline constexpr Support scale = kAny;
inline constexpr Support silu_mul = kAny;
inline constexpr Support balance_update = kAny;
inline constexpr Support adamw_update = kAny;
inline constexpr Support muon_momentum = kAny;
inline constexpr Support muon_apply = kAny;
// No tensors: ops/precision.cpp dispatches these itself, and the GPU takes either precision.
inline constexpr Support set_matmul_precision = kAny;
inline constexpr Support matmul_precision = kAny;

}  // namespace support

}  // namespace zaya::ops::gpu
