// Argument helpers shared by the op implementations: shape/dtype validation and optional
// pointers. A failed check is a caller bug, so these assert (with the op's name in the message)
// rather than throw.
#pragma once
#include "core/tensor.h"

namespace zaya::ops {

// All defined tensors are F32 or F64 and share the first one's dtype.
template <class... Ts>
void check_float(const Tensor& first, const Ts&... rest) {
  ZAYA_ASSERT(first.dtype == DType::F32 || first.dtype == DType::F64, "op needs F32/F64, got {}",
              dtype_name(first.dtype));
  auto same = [&](const Tensor& t) {
    ZAYA_ASSERT(!t.defined() || t.dtype == first.dtype, "dtype mismatch: {} vs {}",
                dtype_name(t.dtype), dtype_name(first.dtype));
  };
  (void)same;  // unused when there is no `rest`
  (same(rest), ...);
}

inline void check_numel(const Tensor& t, int64_t n, const char* what) {
  ZAYA_ASSERT(t.numel() == n, "{}: has shape {} ({} elements), expected {}", what, t.shape_str(),
              t.numel(), n);
}

// An index tensor (ids, targets, choices): I32 with n elements. `what` names it, e.g.
// "xent_forward: target".
inline void check_i32(const Tensor& t, int64_t n, const char* what) {
  ZAYA_ASSERT(t.dtype == DType::I32, "{} must be I32, got {}", what, dtype_name(t.dtype));
  check_numel(t, n, what);
}

// The data of an optional tensor, or null where the caller passed Tensor{} (output not needed,
// input absent).
template <class T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.ptr<T>() : nullptr;
}

}  // namespace zaya::ops
